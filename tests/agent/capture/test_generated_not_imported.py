"""The module ``optimize --app`` generates is never imported in the agent's own process (issue #41):
its code is the user's app's file as the app left it, and a hostile app rewrites that file while
it runs. The agent builds the module's KernelSpec from the capture's schema-checked data
(agent/verification/load.py's ``captured_declaration``, agent/capture/capture.py's ``captured_spec``);
only the boxed workers import it.

The app is tests/helpers/apps/hostile/rewrites_source.py, interpreted.
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.capture import user_kernel
from swizzleperf.agent.verification import load
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"
MARK = "SWIZZLEPERF_HOSTILE_IMPORT"


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """The hostile app prepared (captured, lifted, generated), the agent's HOME and caches private."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.delenv(MARK, raising=False)
    user, markers = tmp_path / "user", tmp_path / "markers"
    user.mkdir()
    markers.mkdir()
    (user / "kernel.py").write_text((APPS / "guarded" / "app.py").read_text())
    app = f"{INTERPRET} {APPS / 'hostile' / 'rewrites_source.py'} {user / 'kernel.py'} {markers}"
    prepared = user_kernel.prepare(app, "triple_kernel", tmp_path / "work")
    return prepared, markers


def _untouched(markers: Path) -> None:
    assert not (markers / f"imported-{os.getpid()}").exists(), "the generated module ran in the agent's process"
    assert MARK not in os.environ, "the generated module set the agent's environment"


def test_the_hostile_code_is_in_the_generated_module_and_never_runs_in_the_agent(hostile):
    prepared, markers = hostile
    generated = prepared.module_path.read_text()
    assert "_hostile_os.system(" in generated and "_hostile_os.environ.setdefault(" in generated   # kept: live code
    _untouched(markers)                                   # prepare read its spec
    spec = load.load_spec(prepared.module_path)           # as the run does
    _untouched(markers)
    assert load.captured_declaration(ast.parse(generated)) == (str(prepared.capture.folder),
                                                               prepared.lifted.target_name)
    assert (spec.name, spec.rewrite_target, spec.num_programs("default")) == ("triple_kernel",
                                                                              prepared.lifted.target_name, 12)
    assert spec.source_path == prepared.module_path.resolve()
    with pytest.raises(Exception, match="never launches"):   # the launch is the worker's
        spec.launch({})


def test_the_run_verifies_it_in_a_worker_without_running_it_in_the_agent(hostile):
    """The worker imports the module as written (the box refuses the marker's write there); the
    baseline still passes bitwise, and the agent's process stays as it was."""
    prepared, markers = hostile
    result = verify(prepared.module_path, prepared.module_path.parent.parent / "m.npy",
                    VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    _untouched(markers)


def test_a_run_of_the_loop_and_its_resume_never_run_it_in_the_agent(hostile):
    """The loop's own loads (its start, the simulator's trace of the captured launch, a resume from
    the run folder's copy) build the spec from the capture's data too."""
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.proposers.scripted import ScriptedProposer
    from swizzleperf.agent.verification.swizzles import catalog_source
    prepared, markers = hostile
    work = prepared.capture.folder.parent.parent
    proposer = ScriptedProposer([("row", catalog_source("row-major", prepared.lifted.arg_names))])
    outcome = run.start(run.RunOptions(kernel=str(prepared.module_path), hw="h100", iterations=1, workdir=str(work)),
                        proposer=proposer)
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    _untouched(markers)
    again = run.resume(outcome.run_id, workdir=str(work), proposer=ScriptedProposer([]))
    assert again.status in ("finished", "no_candidate", "stalled"), again.status
    _untouched(markers)
