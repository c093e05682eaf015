"""Full Anthropic Messages output path: recipe (parser + Messages encoder + SSE framing) vs
deepseek-recipe (StreamProcessor + MessagesChunkGenerator + ``to_json`` + the same
``event: NAME`` / ``data: …`` framing).

Run: ``python bench/bench_messages_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens) and ``tools``
(non-thinking, ~20k tokens of prose and parallel DSML tool calls; deepseek-recipe stops parsing after
the first block, so these rows compare unequal work), and ``block20k`` (non-thinking, a sentence then
ONE DSML block of ~20k tokens of parallel calls: both sides parse all of it), each fed one id per
push and all at once. Prints medians (ms, tokens/s, SSE bytes) and the ratio theirs/ours (> 1 means we are
faster). deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stream import TOOLS  # noqa: E402
from stream_bench import StreamBench, frame_events, main  # noqa: E402


def request(thinking: bool, tools: bool) -> dict:
    body = {"model": "deepseek-v4-pro", "max_tokens": 32000, "messages": [{"role": "user", "content": "Go."}],
            "thinking": {"type": "enabled" if thinking else "disabled"}, "stream": True}
    if tools:
        body["tools"] = [{"name": n, "input_schema": {"type": "object"}} for n in TOOLS]
    return body


BENCH = StreamBench(
    api="messages", request=request, response_id="msg_x", anchor_request="MessagesRequest",
    anchor_frame=frame_events, block_name="block20k",
    note="(tools: theirs stops parsing after the first tool block; block20k: argument fragments differ in "
         "granularity, docs/streaming.md)",
)


if __name__ == "__main__":
    main(BENCH, __doc__)
