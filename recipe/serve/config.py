"""Server settings as one immutable value (the CLI builds it from its flags)."""

from __future__ import annotations

from dataclasses import dataclass, field

from recipe.options import SchemaLimits
from recipe.serve.routing import ROUTING_POLICIES, RoutingWeights

__all__ = ["Timeouts", "ServeConfig"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Engine timeouts in seconds; ``None`` turns one off.

    Attributes:
        connect: opening a connection to an HTTP engine.
        first_token: from sending the request to the engine's first delta (prefill included).
        idle: the longest gap between two deltas.
        total: the whole generation.
    """

    connect: float | None = 10.0
    first_token: float | None = 600.0
    idle: float | None = 120.0
    total: float | None = 3600.0

    def __post_init__(self) -> None:
        for name in ("connect", "first_token", "idle", "total"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"timeout {name} must be > 0 seconds or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """How the server behaves.

    Attributes:
        timeouts: engine timeouts (:class:`Timeouts`).
        max_concurrency: generation requests in flight at once; past it 429 (OpenAI APIs) / 529
            (Messages) at once. None: unbounded.
        prepare_inline_bytes: bodies up to this size are prepared on the event loop; larger ones
            (and those reading the conversation store) in a worker thread, so one huge prompt
            never stalls the other streams.
        prepare_inline_objects: bodies with more JSON objects than this (``{`` counted in the raw
            bytes, which no escape can hide) are prepared in a worker thread too, whatever their
            size: a small body can hold a schema whose validation and grammar take seconds.
        schema_limits: bounds on each request's JSON Schemas (:class:`~recipe.options.SchemaLimits`:
            ``max_schema_nodes``, ``max_schema_properties``, ``max_enum_values``, ``max_size_bound``,
            ``max_grammar_bytes``); past one a request is the API's own 400 naming the limit and the
            field. None keeps the options' own (``Options.schema_limits``; the defaults).
        drain_seconds: at shutdown, how long in-flight streams may run before they are cut.
        routing: how a replica pool picks a replica (``recipe serve --routing``): ``cost`` (default)
            the replica where the request costs least — uncached prefill tokens plus its load
            (:mod:`recipe.serve.routing`); ``prefix`` the longest cached prefix, ties and
            ``max_imbalance`` by load.
        routing_weights: the cost's exchange rates (:class:`~recipe.serve.routing.RoutingWeights`:
            ``request_tokens`` per request running or waiting, ``kv_tokens`` for a full KV cache,
            ``over_tokens`` per request past ``load_margin`` above the pool's mean).
        metrics_interval: seconds between scrapes of each HTTP engine's ``/metrics`` for its own
            running / waiting requests and KV usage (pools of two or more replicas with ``cost``
            routing); 0 turns scraping off (this server's in-flight counts alone).
        max_imbalance: ``prefix`` routing: the replica with the longest cached prefix is skipped for
            the least loaded one when it has this many more requests in flight. None: never.
        coalesce_ms: stream frames that arrive within this many milliseconds of the previous write
            are joined into one write (the first frame is never held; a decoding engine's deltas,
            tens of milliseconds apart, are not delayed). 0 sends every frame on its own.
        constrain: how much of each request's output constraint reaches the engines (``recipe
            serve --constrain``): ``full`` (default) the grammar of the whole turn — reasoning, DSML
            tool calls per ``tool_choice``, ``response_format`` — in the form each engine's spec
            names (``&grammar=``); ``format`` the ``response_format`` only, in the engines' plain
            JSON / regex fields (not in thinking mode); ``off`` nothing (recipe still validates
            answers and notes mismatches). An engine that refuses what it is sent fails the request
            with the API's own 400.
        warm: at startup, prepare one request for the first model of the table and build its
            output parser, so the vocabulary and the parser tables are loaded before the first
            request instead of during it (about a second for the DeepSeek-V4 vocabulary). A failure
            is logged, never fatal.
        gc_freeze: at startup (after ``warm``; once per process), collect and then ``gc.freeze()``
            everything loaded so far — modules, vocabulary, tables — so Python's cyclic garbage
            collector never walks them again: a full collection then takes about a millisecond
            instead of tens, which would otherwise stall every stream of the event loop at once. It
            is process-wide: turn it off when embedding the app in a process that manages its own
            collector.
        probe_seconds: how often each replica is probed in the background (HTTP engines: ``GET
            /health``) for ``/health/ready`` and to readmit an ejected replica; None: never (every
            replica counts as reachable).
        render_only: serve no generation routes, only the render and derender routes
            (:mod:`recipe.serve.render`) and the informational ones: a tokenizer service for fleet
            routers (``recipe serve --render-only``). No engine is contacted.
        max_model_len: the engines' context window in tokens (prompt plus completion), overriding
            what the engines report. None: the smallest ``max_model_len`` the replicas report
            (``GET /v1/models``, read at startup and when a replica answers again after a refused
            or broken connection), else ``Options.context_limit``. A request without ``max_tokens``
            gets the room the window leaves; a prompt (plus ``max_tokens``) over it is the API's own
            400 ``context_length_exceeded`` naming the field.
        vocabulary: the vocabulary the engines run (``recipe serve --vocabulary``): ``v4``
            (DeepSeek-V4's: the V4 and V4.1 families) or ``v3`` (DeepSeek-V3's: V3, R1, V3.1,
            V3.2); only its families' model names are served, others get the API's unknown-model
            400. None: learned from the vLLM replicas at start (``POST /tokenize`` of a probe
            text), else every family.
    """

    timeouts: Timeouts = field(default_factory=Timeouts)
    max_concurrency: int | None = None
    prepare_inline_bytes: int = 64 * 1024
    prepare_inline_objects: int = 64
    schema_limits: SchemaLimits | None = None
    drain_seconds: float = 30.0
    routing: str = "cost"
    routing_weights: RoutingWeights = field(default_factory=RoutingWeights)
    metrics_interval: float = 2.0
    max_imbalance: int | None = 32
    coalesce_ms: float = 5.0
    constrain: str = "full"
    warm: bool = True
    gc_freeze: bool = True
    probe_seconds: float | None = 2.0
    render_only: bool = False
    max_model_len: int | None = None
    vocabulary: str | None = None

    def __post_init__(self) -> None:
        if self.vocabulary is not None and self.vocabulary not in ("v4", "v3"):
            raise ValueError(f"vocabulary must be v4 or v3, not {self.vocabulary!r}")
        if self.constrain not in ("off", "format", "full"):
            raise ValueError(f"constrain must be off, format or full, not {self.constrain!r}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1 or None")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2 or None")
        if not self.coalesce_ms >= 0:
            raise ValueError("coalesce_ms must be >= 0")
        if self.probe_seconds is not None and not self.probe_seconds > 0:
            raise ValueError("probe_seconds must be > 0 or None")
        if self.routing not in ROUTING_POLICIES:
            raise ValueError(f"routing must be one of {', '.join(ROUTING_POLICIES)}, not {self.routing!r}")
        if not self.metrics_interval >= 0:
            raise ValueError("metrics_interval must be >= 0 seconds")
