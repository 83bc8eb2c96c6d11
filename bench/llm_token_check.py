"""Do a run's token figures equal the server's? (#14: "tokens equal to the server's counts")

Some servers (llama-cpp-python 0.3.x) give no usage when streaming, so the transcript's figures for
those requests are estimates (the server's own tokenizer plus the chat template's tokens, labelled
``estimated: ...``). This script asks the server for its own counts of the same requests: each
sampled request's messages are sent again, not streamed, with ``max_tokens=1``, and the server's
``usage.prompt_tokens`` is compared with the transcript's ``prompt_tokens``. Completion tokens are
checked on fresh replies: a non-streamed request's ``usage.completion_tokens`` against the count
the transcript's method gives for the same text.

    python -m bench.llm_token_check RUN_DIR/transcript.jsonl [...] --base-url URL --model M \
        [--sample 12] [--out token_check.md]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import openai

from swizzleperf.agent.proposers.chat import ChatClient, ChatSettings, Exchange


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcripts", nargs="+", type=Path)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sample", type=int, default=12, help="requests replayed (all when fewer)")
    parser.add_argument("--completions", type=int, default=3, help="fresh replies checked")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = [json.loads(line) for path in args.transcripts for line in path.read_text().splitlines() if line]
    sent = [r for r in rows if r["tokens_source"] != "none: not sent" and r["messages"]]
    sample = random.Random(0).sample(sent, min(args.sample, len(sent)))
    client = openai.OpenAI(base_url=args.base_url, api_key="not-needed", max_retries=0, timeout=600)
    ours = ChatClient(ChatSettings(model=args.model, base_url=args.base_url))
    lines = ["| request | ours (prompt) | server (prompt) | difference | our source |", "|---|---|---|---|---|"]
    exact = 0
    for r in sample:
        usage = client.chat.completions.create(model=args.model, messages=r["messages"], max_tokens=1,
                                               temperature=0).usage
        diff = r["prompt_tokens"] - usage.prompt_tokens
        exact += diff == 0
        lines.append(f"| iteration {r['iteration']} #{r['n']} | {r['prompt_tokens']} | {usage.prompt_tokens} | "
                     f"{diff:+d} | {r['tokens_source']} |")
    lines += ["", "| fresh reply | ours (completion) | server (completion) | difference |", "|---|---|---|---|"]
    for i, r in enumerate(sample[:args.completions]):
        answer = client.chat.completions.create(model=args.model, messages=r["messages"], max_tokens=200,
                                                temperature=0)
        exchange = Exchange(n=1, started_at=0.0, messages=r["messages"],
                            reply=answer.choices[0].message.content or "")
        ours._estimate(exchange)
        lines.append(f"| {i + 1} | {exchange.completion_tokens} | {answer.usage.completion_tokens} | "
                     f"{exchange.completion_tokens - answer.usage.completion_tokens:+d} |")
    text = (f"Prompt tokens: {exact} of {len(sample)} sampled requests equal the server's count "
            f"({len(rows)} requests in the transcripts, {len(sent)} sent).\n\n" + "\n".join(lines) + "\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
