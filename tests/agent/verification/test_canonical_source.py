"""What is checked is what runs (issue #21): a reply whose docstring holds a second ``def
swizzle`` line with code under it passed the static check (its real body is harmless) while
Triton's interpreter, which re-reads the function's text from the last line beginning with
``def``, ran the docstring's code: in the verification workers, and after ``--in-place`` in the
user's next launch. The loop now splices, verifies, reports and writes back only the canonical
source generated from the checked syntax tree; these runs prove the payload never runs and is
never written, through the loopback OpenAI server and through the scripted loop."""
from __future__ import annotations

import json
from pathlib import Path

from fake_openai import FakeOpenAIServer

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]


def docstring_def(marker: Path) -> str:
    """An XCD-grouped order (a real improvement on the simulated MI300X, so it wins and --in-place
    writes it back) whose docstring holds a `def swizzle` that appends to ``marker`` when it runs;
    the real body closes the docstring's quotes in what the interpreter reads as a comment."""
    lines = catalog_source("xcd-grouped-m:8:8", ARGS).splitlines(keepends=True)
    assert lines[2].strip().startswith('"""')   # the catalog's one-line docstring
    head, body = "".join(lines[:2]), "".join(lines[3:])
    payload = (f'    """Grouped by 8 tile rows.\n'
               f'def swizzle(pid, num_pid_m, num_pid_n):\n'
               f'    open({str(marker)!r}, "a").write("payload ran\\n")\n'
               f'    return pid // num_pid_n, pid % num_pid_n\n'
               f'    # """\n')
    return head + payload + body


def _written(run_dir: Path) -> str:
    """Every kernel file, diff and report of a run folder (the record of the reply aside)."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(run_dir.rglob("*"))
                     if p.is_file() and p.suffix in (".py", ".md", ".diff"))


def _assert_never_ran_never_written(outcome, kernel: Path, marker: Path) -> None:
    assert not marker.exists(), "the docstring's code ran"
    user_file = kernel.read_text()
    assert "NUM_XCDS" in user_file, "the XCD-grouped order was not written back"
    for text in (user_file, _written(outcome.run_dir)):
        assert "payload ran" not in text and str(marker) not in text
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert report["best"]["kind"] == "candidate" and "payload" not in report["best"]["swizzle_source"]
    lines = [line.strip() for line in user_file.splitlines()]
    assert sum(line.startswith("def swizzle(") for line in lines) == 1


def test_the_docstring_def_never_runs_nor_is_written_through_the_scripted_loop(tmp_path, gemm_path):
    marker = tmp_path / "payload-ran"
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=1,
                             in_place=True)
    outcome = run.start(options, proposer=ScriptedProposer([("grouped", docstring_def(marker))]))
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    _assert_never_ran_never_written(outcome, kernel, marker)


def test_the_docstring_def_never_runs_nor_is_written_through_the_loopback_server(tmp_path, gemm_path):
    marker = tmp_path / "payload-ran"
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    reply = "Grouped order.\n```python\n" + docstring_def(marker) + "```\n"
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(reply, prompt_tokens=10, completion_tokens=10)
        options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"),
                                 iterations=1, model="fake", base_url=server.base_url, in_place=True,
                                 evidence=False)
        outcome = run.start(options)
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    _assert_never_ran_never_written(outcome, kernel, marker)


def test_with_the_canonical_source_bypassed_the_worker_still_refuses_two_def_lines(tmp_path, gemm_path):
    """The reply's text written into a module as it is (what the loop did before): the worker reads
    the target's text as Triton does and refuses it before anything of it runs (before, the payload
    ran 15 times in one verification and a non-permutation passed)."""
    from swizzleperf.agent.verification.verify import VerifyConfig, verify
    marker = tmp_path / "payload-ran"
    source = gemm_path.read_text()
    own = source[source.index("@triton.jit\ndef swizzle("):source.index("\n\n\n", source.index("def swizzle("))]
    path = tmp_path / "raw.py"
    path.write_text(source.replace(own, docstring_def(marker).rstrip("\n")))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(1,)))
    # the worker refuses a target whose text holds two `def` lines before anything of it runs
    assert result.verdict.value == "INVALID" and "2 lines beginning with `def`" in result.reason
    assert not marker.exists()
