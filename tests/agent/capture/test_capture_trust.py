"""``--app``'s trust holes (issue #41): the user's app sees no process of the agent's, its capture
files are data (schema-checked, nothing of them breaks out of the generated module), the lift
takes the definition the app launched, and what ``--in-place`` writes is what was verified.

The apps are in tests/helpers/apps/ (``hostile/``, ``redefined/``, ``guarded/``), interpreted.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from swizzleperf import sandbox
from swizzleperf.agent.capture import user_kernel
from swizzleperf.agent.capture.capture import CaptureError, capture, run_with_hook
from swizzleperf.agent.capture.lift import LiftError
from swizzleperf.agent.capture.lift_common import kernel_function
from swizzleperf.agent.verification.load import module_level_functions
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify
from swizzleperf.sandbox.write_back import write_sealed

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"
SECRET = "sk-issue41-marker"


# -- the app runs in its own PID namespace -------------------------------------------------------

def test_the_app_sees_no_process_of_the_agent_and_its_daemons_end_with_it(tmp_path):
    """A process of the agent's started with an API key in its environment (``/proc/<pid>/environ``
    shows the environment a process was started with): no environ the app can read holds the key
    (its parent's included), the agent's pid is not among those it lists, and a daemon it starts
    in a session of its own does not outlive it."""
    late, report, log = tmp_path / "late.txt", tmp_path / "spy.json", tmp_path / "app.log"
    holder = subprocess.Popen(["sleep", "60"], env={"OPENAI_API_KEY": SECRET})
    try:
        code = run_with_hook(f"{sys.executable} {APPS / 'hostile' / 'spy.py'} {SECRET} {late} {report}",
                             sandbox.app_env(), 60, tmp_path, log)
    finally:
        holder.kill()
        holder.wait()
    assert code == 0, log.read_text()
    seen = json.loads(report.read_text())
    assert seen["found"] == []
    if sandbox.isolation()[0]:   # a PID namespace: only the app's own processes, the agent's unseen
        assert os.getpid() not in seen["pids"] and seen["ppid"] in seen["pids"] and len(seen["pids"]) < 10, seen
    time.sleep(1.5)
    assert not late.exists()   # ended with the app


# -- capture files are data ----------------------------------------------------------------------

HOSTILE = [   # a field of the hook's launch file rewritten by the app, and what the one line names
    # valid Python both in the generated module's comment and in its KernelSpec line: it ran before #41
    ({"kernel": "triple_kernel\nimport os; os.system('touch {marker}')\nX = dict(a=(" + "'" * 3},
     "kernel: Value error, must be a Python identifier"),
    ({"kernel": "other_kernel"}, "names kernel 'other_kernel', not 'triple_kernel'"),
    ({"line": "3\nimport os"}, "line: Input should be a valid integer"),
    ({"file": "/etc/passwd"}, "file: Value error, must be the absolute path of an existing .py file"),
    ({"grid": [4, 0]}, "grid.1: Input should be greater than or equal to 1"),
    ({"grid": [1, 1, 1, 1]}, "grid: List should have at most 3 items"),
    ({"programs": 7}, "programs 7 is not the grid's 12"),
    ({"params.0.kind": "code"}, "params.0.kind: Input should be"),
    ({"params.0.name": "x_ptr; import os"}, "params.0.name: Value error, must be a Python identifier"),
    ({"params.0.dtype": "load"}, "params.0.dtype: Input should be 'float16'"),
    ({"globals": {"A\nimport os": 1}}, "globals.A import os.[key]: Value error, must be a Python identifier"),
    ({"outputs.0.name": "M"}, "output M is not a tensor argument"),
]


@pytest.mark.parametrize("patch, expected", HOSTILE, ids=[next(iter(p)) + f"-{i}" for i, (p, _) in enumerate(HOSTILE)])
def test_a_rewritten_launch_file_is_refused_in_one_line_and_nothing_runs_in_the_agent(tmp_path, patch, expected):
    marker = tmp_path / "MARKER"
    patch = {k: (v.replace("{marker}", str(marker)) if isinstance(v, str) else v) for k, v in patch.items()}
    (tmp_path / "patch.json").write_text(json.dumps(patch))
    app = f"{INTERPRET} {APPS / 'hostile' / 'app.py'} {tmp_path / 'patch.json'}"
    with pytest.raises(CaptureError) as info:
        user_kernel.prepare(app, "triple_kernel", tmp_path / "work")
    message = str(info.value)
    assert expected in message and "\n" not in message, message
    assert not marker.exists()



def test_a_launch_file_naming_a_huge_kernel_file_is_refused_before_it_is_read(tmp_path):
    """#41's second replay: the app pointed its launch file's ``file`` at a sparse 6 GiB ``.py``
    file; the agent read it whole (12 GB) and then raised a SyntaxError traceback."""
    huge = tmp_path / "huge_kernel.py"
    with open(huge, "wb") as f:
        f.truncate(6 << 30)   # sparse: no disk used
    (tmp_path / "patch.json").write_text(json.dumps({"file": str(huge)}))
    app = f"{INTERPRET} {APPS / 'hostile' / 'app.py'} {tmp_path / 'patch.json'}"
    with pytest.raises(CaptureError) as info:
        user_kernel.prepare(app, "triple_kernel", tmp_path / "work")
    message = str(info.value)
    assert "file: Value error, must be a kernel file of at most 2097152 bytes" in message and "\n" not in message


def test_a_kernel_defined_by_exec_is_refused_in_one_line_that_says_why(tmp_path):
    """#41's second replay: a kernel without a source file ended the app with the hook's own
    ``TypeError: expected str, bytes or os.PathLike object, not NoneType``."""
    with pytest.raises(CaptureError) as info:
        user_kernel.prepare(f"{INTERPRET} {APPS / 'hostile' / 'exec_defined.py'}", "exec_kernel", tmp_path)
    message = str(info.value)
    assert "swizzleperf cannot capture exec_kernel: it has no source file" in message and "\n" not in message

def test_comments_of_the_generated_module_stay_one_line():
    for text in ["a\nb", "a\rb", "a\x0bb", "a\x0cb", "a\x1cb", "a\x85b", "a\u2028b", "a\u2029b", "a\x00b", "a\x1bb"]:
        line = user_kernel._one_line(f"python app.py # {text}")
        assert len(f"# {line}\n".splitlines()) == 1 and line.isprintable() and "\x00" not in line
        assert ast.parse(f"# {line}\nx = 1\n").body[0].lineno == 2


# -- the definition the app launched -------------------------------------------------------------

def test_the_launched_definition_is_found_by_its_first_line():
    source = (APPS / "redefined" / "kernel.py").read_text()
    tree = ast.parse(source)
    assert kernel_function(tree, "scale_kernel", "kernel.py").lineno == 12        # no line: the first
    assert kernel_function(tree, "scale_kernel", "kernel.py", 15).lineno == 16    # decorator's line
    assert kernel_function(tree, "scale_kernel", "kernel.py", 28).lineno == 29
    with pytest.raises(LiftError, match="the app launched scale_kernel defined at line 20, but the "
                                        "definitions of scale_kernel there start at line 12, 15, 28"):
        kernel_function(tree, "scale_kernel", "kernel.py", 20)


@pytest.mark.parametrize("which, factor", [("", 3.0), ("first", 2.0)])
def test_the_launched_definition_is_lifted_and_verified_not_a_same_named_one(tmp_path, which, factor):
    """A plain-Python fallback of the same name defined first (under `if not HAS_TRITON:`) is not
    taken for the kernel; of two Triton definitions, the one launched is rewritten and bound by the
    generated module, whichever the name ends bound to: the baseline replays it bitwise (the other
    computes x * 2 where it computes x * 3, or the reverse), and a candidate order reaches it."""
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'redefined' / 'app.py'} {which}", "scale_kernel", tmp_path)
    launched = 15 if which else 28
    assert prepared.capture.launch["line"] == launched
    tree = ast.parse(prepared.lifted.source)
    defs = [n for n in module_level_functions(tree) if n.name == "scale_kernel"]   # in source order
    calls = [prepared.lifted.target_name in ast.unparse(d) for d in defs]
    assert calls == [False, bool(which), not which]   # only the launched one reads the target
    assert f"{user_kernel.LAUNCHED} = scale_kernel" in prepared.module_path.read_text()
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0]


# -- what is written is what was verified --------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """The guarded app's capture, and one run of the loop that verifies a candidate order."""
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.proposers.scripted import ScriptedProposer
    work = tmp_path_factory.mktemp("guarded")
    folder = work / "user"
    folder.mkdir()
    (folder / "app.py").write_text((APPS / "guarded" / "app.py").read_text())
    prepared = user_kernel.prepare(f"{INTERPRET} {folder / 'app.py'}", "triple_kernel", work)
    outcome = run.start(run.RunOptions(kernel=str(prepared.module_path), hw="h100", iterations=1, workdir=str(work)),
                        proposer=ScriptedProposer([("row", catalog_source("row-major", prepared.lifted.arg_names))]))
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    return prepared, outcome


@pytest.mark.parametrize("tampered", [False, True])
def test_app_in_place_writes_only_the_verified_order(guarded, tampered):
    """``--app ... --in-place``: the best order is written into the user's file only where the
    generated module with it spliced in is the text that was verified; a line appended to the run
    folder's module after the run is refused in one line, the user's file untouched."""
    prepared, outcome = guarded
    user_file = prepared.user_file
    user_file.write_text(prepared.original)
    best = {**outcome.report["best"], "kind": "candidate"}   # row-major may not beat the kernel's own
    outcome = SimpleNamespace(run_dir=outcome.run_dir, status="finished", report={**outcome.report, "best": best})
    original_module = prepared.module_path.read_text()
    assert (prepared.module_path.stat().st_mode & 0o777) == 0o444   # the run folder's copy: for reading
    if tampered:
        prepared.module_path.chmod(0o644)
        prepared.module_path.write_text(original_module + "print('appended after verification')\n")
    try:
        summary = user_kernel.finish(outcome, prepared, in_place=True, test=None)
    finally:
        write_sealed(prepared.module_path, original_module)
    if tampered:
        assert summary["in_place"] == (f"not applied: the best order spliced into {prepared.module_path} is not "
                                       f"the text that was verified (changed after verification)")
        assert user_file.read_text() == prepared.original
    else:
        assert summary["in_place"] == f"applied to {user_file}"
        assert user_file.read_text() == Path(summary["patched_file"]).read_text() != prepared.original
