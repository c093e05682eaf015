"""Full OpenAI Responses output path: recipe (parser + Responses encoder + SSE framing with
``event:`` lines) vs deepseek-recipe (StreamProcessor + ResponsesChunkGenerator with the request echo
+ ``to_json`` + the same ``event: <type>`` / ``data: …`` framing).

Run: ``python bench/bench_responses_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens), ``tools``
(non-thinking, ~20k tokens of prose and blocks of parallel DSML tool calls; deepseek-recipe stops
after the first block, so this row compares unequal work) and ``oneblock`` (one sentence and a single
~20k-token block of parallel calls, parsed completely by both), each fed one id per push and all at
once. Prints medians (ms, tokens/s) and the ratio theirs/ours (> 1 means we are faster).
deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stream import TOOLS
from stream_bench import StreamBench, frame_events, main


def request(thinking: bool, tools: bool) -> dict:
    body = {"model": "deepseek-v4-pro", "input": "Go.", "reasoning": {"effort": "high" if thinking else "none"}, "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOLS]
    return body


BENCH = StreamBench(
    api="responses", request=request, response_id="resp_x", anchor_request="ResponsesRequest",
    anchor_frame=frame_events, anchor_echo=True,
    note="(tools: theirs stops parsing after the first block; oneblock: same calls, different argument "
         "fragment granularity)",
)


if __name__ == "__main__":
    main(BENCH, __doc__)
