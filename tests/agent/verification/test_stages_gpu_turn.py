"""A worker that shares its GPU (agent/verification/stages.py, request ``gpu_turn``) asks for it
once, just before its first timing stage, and runs the stages before it without waiting."""
from __future__ import annotations

import io

from swizzleperf import sandbox
from swizzleperf.agent.verification import stages


def _run(monkeypatch, capsys, names: list, gpu_turn: bool) -> list:
    seen = []
    monkeypatch.setattr(stages, "load_kernel", lambda path: (None, None))
    monkeypatch.setattr("sys.stdin", io.StringIO("go\n"))

    def stage(name):
        def run(module, spec, request):
            seen.append((name, capsys.readouterr().out.count(sandbox.GPU_TURN_ASK)))
            return {}
        return run
    table = {name: stage(name) for name in ("numerics", "timing", "compare")}
    result = stages.run_stages({"kernel_path": "k.py", "stages": names, "gpu_turn": gpu_turn}, table)
    assert result["verdict"] == "PASS"
    return seen


def test_the_worker_asks_once_before_its_first_timing_stage(monkeypatch, capsys):
    seen = _run(monkeypatch, capsys, ["numerics", "timing", "compare"], gpu_turn=True)
    assert seen == [("numerics", 0), ("timing", 1), ("compare", 0)]


def test_a_worker_alone_on_its_gpu_never_asks(monkeypatch, capsys):
    seen = _run(monkeypatch, capsys, ["numerics", "timing"], gpu_turn=False)
    assert seen == [("numerics", 0), ("timing", 0)]
