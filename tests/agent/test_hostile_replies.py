"""Hostile model replies through the loopback OpenAI server (#12): code that would run when the
`def` executes is refused statically, never spliced, never run, never written into the user's file."""
from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer

from swizzleperf.agent import run
from swizzleperf.agent.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]


def _hostile(marker: Path) -> list:
    grouped = catalog_source("grouped-m:8", ARGS)
    payload = f"__import__('builtins').exec(\"open({str(marker)!r}, 'w')\")"
    return [
        grouped.replace("num_pid_n):", f"num_pid_n={payload}):", 1),            # default argument
        grouped.replace("num_pid_n):", f"num_pid_n) -> {payload}:", 1),         # return annotation
        grouped.replace("@triton.jit\n", f"@triton.jit\n@{payload}\n", 1),      # extra decorator
        grouped + f"\n{payload}\n",                                            # module level
    ]


@pytest.mark.parametrize("index", range(4))
def test_hostile_replies_are_invalid_and_never_run(tmp_path, gemm_path, index):
    marker = tmp_path / "payload-ran"
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    reply = "Grouped order.\n```python\n" + _hostile(marker)[index] + "```\n"
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(reply, prompt_tokens=10, completion_tokens=10)
        options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"),
                                 iterations=1, model="fake", base_url=server.base_url, in_place=True)
        outcome = run.start(options)
    verdicts = [a["verdict"] for a in outcome.report["attempts"]]
    assert verdicts in (["INVALID"], ["NO_CANDIDATE"]), verdicts  # refused: statically or as a reply
    assert not marker.exists(), "model-written code ran"
    assert kernel.read_text() == gemm_path.read_text()  # --in-place wrote nothing: no candidate won
