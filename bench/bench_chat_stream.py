"""Full Chat Completions output path: recipe (parser + Chat encoder + SSE framing) vs deepseek-recipe
(StreamProcessor + ChatCompletionChunkGenerator + ``to_json`` + the same ``data: …`` framing).

Run: ``python bench/bench_chat_stream.py [--reps N]``. Same token ids for both (the outputs of
bench/bench_stream.py): ``think20k`` (thinking, 15k reasoning + 5k answer tokens) and ``tools``
(non-thinking, ~20k tokens of prose and parallel DSML tool calls), each fed one id per push and all
at once. Prints medians (ms, tokens/s) and the ratio theirs/ours (> 1 means we are faster).
deepseek-recipe (the anchor) is optional: without it only our numbers are printed.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stream import TOOLS  # noqa: E402
from stream_bench import StreamBench, frame_data, main  # noqa: E402


def request(thinking: bool, tools: bool) -> dict:
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Go."}],
            "reasoning_effort": "high" if thinking else "none", "stream": True}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in TOOLS]
    return body


BENCH = StreamBench(
    api="chat", request=request, response_id="chatcmpl-x", anchor_request="ChatCompletionRequest",
    anchor_frame=frame_data, anchor_trailer=b"data: [DONE]\n\n",
    note="(theirs stops parsing after the first tool block, so tool outputs differ in size)",
)


if __name__ == "__main__":
    main(BENCH, __doc__)
