"""The roof in report.json / report.md (from a recorded ncu profile, and for a simulated run) and the
loop's early stop at the roof (a fake evaluator whose measurements are that profile's)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from langgraph.checkpoint.memory import MemorySaver
from ncu_fixture import h200_measurer, measured_metrics

from swizzleperf import hwspecs
from swizzleperf.agent.loop import report
from swizzleperf.agent.loop.graph import Budget, Loop
from swizzleperf.agent.proposers.scripted import ScriptedProposer

RUN = {"kernel": "gemm", "kernel_path": "kernels/gemm.py", "hardware": "h200", "mode": "measured", "run_id": "r",
       "run_dir": "runs/r", "proposer": "scripted"}
SOURCE = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid // num_pid_n, pid % num_pid_n\n"


def _attempt(kind: str, name: str, metrics: dict, iteration: int = 0) -> dict:
    return {"kind": kind, "iteration": iteration, "name": name, "source": SOURCE, "verdict": "PASS", "reason": "",
            "lesson": "", "metrics": metrics}


def test_report_carries_the_roof_of_a_recorded_ncu_profile(monkeypatch):
    """Row-major and grouped-m:8 on an H200 (ncu): TFLOP/s, shares, GB/s, binding roof and ceiling
    per row; the peaks with their sources."""
    base = _attempt("baseline", "baseline", measured_metrics(monkeypatch, "row-major"))
    best = _attempt("candidate", "grouped-m:8", measured_metrics(monkeypatch, "grouped-m:8"), iteration=1)
    r = report.build_report({"baseline": base, "best": best, "history": [best], "iteration": 1}, RUN, "t")
    orders = r["roof"]["orders"]
    assert set(orders) == {"baseline", "best", "attempt 1"}
    row = orders["best"]
    assert row["status"] == "measured" and row["binding"] == "compute"
    assert row["tflops"] == pytest.approx(771.5, abs=0.1) and row["shares"]["compute"] == pytest.approx(0.780, abs=1e-3)
    assert row["gbps"] == pytest.approx(1102.0, abs=0.1) and row["shares"]["DRAM"] == pytest.approx(0.2296, abs=1e-3)
    assert row["roof_share"] == pytest.approx(0.7797, abs=1e-3) and row["max_gain"] == pytest.approx(0.2825, abs=1e-3)
    assert orders["baseline"]["max_gain"] == pytest.approx(0.4662, abs=1e-3)
    peaks = r["roof"]["peaks"]
    assert peaks["flops"]["value"] == 989.4e12 and "H200 Tensor Core GPU datasheet" in peaks["flops"]["source"]
    assert peaks["l2_bytes_per_s"]["source"].startswith("estimate")
    md = report.render_markdown(r)
    assert "## Roof" in md and "| best: grouped-m:8 | 771.5 | 78.0% | 1102.0 | 23.0% |" in md
    assert "| compute | 78.0% | 28.2% |" in md
    assert "- peak_bf16_flops (dense bfloat16 matrix): 989.4 TFLOP/s: NVIDIA H200" in md   # our text, unescaped (#15)
    assert "best: at 78 % of the roof: no tile order can gain more than 28 %" in md


def test_a_simulated_run_reports_predicted_bytes_and_not_measured(monkeypatch):
    m = h200_measurer(monkeypatch, {})
    m.target = SimpleNamespace(spec=hwspecs.load_spec("mi300x"), mode="simulated", device=None)
    metrics = {"time_ms": None, "predicted_dram_bytes": 0.805e9, "predicted_source": "simulated:mi300x"}
    metrics["roof"] = m.roof(metrics)
    base = _attempt("baseline", "baseline", metrics)
    r = report.build_report({"baseline": base, "best": base, "history": []}, {**RUN, "hardware": "mi300x",
                                                                              "mode": "simulated"}, "t")
    row = r["roof"]["orders"]["baseline"]
    assert row["status"] == "predicted" and row["tflops"] == "not measured" and row["roof_share"] == "not measured"
    assert row["dram_source"] == "simulated:mi300x (predicted)"
    md = report.render_markdown(r)
    # a byte count under "DRAM GB/s" says what it is (#15)
    assert "| baseline: baseline | not measured | not measured | not measured (0.81 GB predicted) | not measured |" in md
    assert "(predicted) | not measured | not measured |" in md


class _Record:
    def mark_best(self, *args): pass
    def save_attempt(self, *args, **kwargs): pass
    def save_requests(self, *args): pass


class _Evaluator:
    """Every order verifies and measures as the recorded grouped-m:8 profile at the time ``times``
    gives for its name (measured on an H200)."""

    module_source = SOURCE

    def __init__(self, monkeypatch, times: dict):
        self.metrics = {name: measured_metrics(monkeypatch, "grouped-m:8", time_ms=t) for name, t in times.items()}

    def baseline(self): return "baseline", SOURCE
    def expert(self): return None
    def analysis(self, baseline): return ""
    def context_fields(self): return {"problem": {}, "meta": {}, "tile_grid": (128, 64), "swizzle_args": (128, 64)}
    def prepare(self, label, source): return {"verdict": "", "reason": "", "source": source, "kernel_file": label, "diff": ""}
    def verify(self, kernel_file, time_it): return {"verdict": "PASS", "reason": "", "details": {}, "mapping": ""}
    def measure(self, kernel_file, mapping, details): return self.metrics[kernel_file.split("-", 1)[1]]
    def may_be_best(self, attempt): return True
    def better(self, attempt, best): return attempt["metrics"]["time_ms"] < best["metrics"]["time_ms"]
    def beyond_noise(self, attempt, best): return True
    def lesson(self, attempt, best, baseline): return ""
    def target_reached(self, *args): return None
    def contenders(self, state): return []
    def precheck(self, *args, **kwargs): return None
    def evidence(self, *args, **kwargs): return []
    def simulate(self, source): return {}
    def order_cannot_matter(self): return None


def _run(monkeypatch, times: dict, iterations: int = 2) -> tuple:
    proposer = ScriptedProposer([(f"order{i}", SOURCE) for i in range(1, iterations + 1)])
    events = []
    target = SimpleNamespace(mode="measured", spec=hwspecs.load_spec("h200"))
    loop = Loop(spec=SimpleNamespace(name="gemm", rewrite_target="swizzle"), target=target,
                evaluator=_Evaluator(monkeypatch, times), proposer=proposer, record=_Record(), run_id="r",
                budget=Budget(iterations=iterations, plateau=10), on_event=lambda k, d: events.append((k, d)))
    state = loop.build(MemorySaver()).invoke({}, {"configurable": {"thread_id": "r"}})
    return state, proposer, events


def test_a_baseline_at_the_roof_ends_the_run_without_a_proposal(monkeypatch):
    """2.25 ms against the 2.2226 ms floor: no tile order can gain more than 1.2 % (< 3 %)."""
    state, proposer, events = _run(monkeypatch, {"baseline": 2.25, "order1": 2.24, "order2": 2.23})
    assert state["stop_reason"].startswith("at 99 % of the roof: no tile order can gain more than 1 %")
    assert "bound by compute" in state["stop_reason"] and "stopped instead of spending iterations" in state["stop_reason"]
    assert proposer.contexts == [] and state["iteration"] == 0
    assert ("roof", {"name": "baseline", "line": state["stop_reason"]}) in events   # printed on screen
    r = report.build_report(state, RUN, "t")
    md = report.render_markdown(r)
    assert "stopped: at 99 % of the roof\\: no tile order can gain more than 1 %" in md   # md_text escapes ':'
    assert "best: at 99 % of the roof: no tile order can gain more than 1 %" in md


def test_a_best_that_reaches_the_roof_stops_the_loop(monkeypatch):
    """The baseline (3.26 ms) is 47 % above its floor; the first proposal (2.26 ms, 1.7 %) reaches the roof."""
    state, proposer, _ = _run(monkeypatch, {"baseline": 3.26, "order1": 2.26, "order2": 2.25}, iterations=4)
    assert len(proposer.contexts) == 1 and state["stop_reason"].startswith("at 98 % of the roof")
    assert "Roof of the baseline (measured" in _prompt(proposer.contexts[0])


def test_far_from_the_roof_the_loop_spends_its_iterations(monkeypatch):
    state, proposer, _ = _run(monkeypatch, {"baseline": 3.26, "order1": 3.0, "order2": 2.9})
    assert len(proposer.contexts) == 2 and state["stop_reason"] == "iteration budget reached (2)"


def _prompt(context) -> str:
    """The LLM proposer's user message for ``context`` (prompts/propose.j2)."""
    from swizzleperf.agent.proposers.llm import render_messages
    return render_messages(context)[1]["content"]


def test_the_eval_table_has_a_percent_of_roof_column(monkeypatch):
    """eval/suite.py's table: the best's "% of roof" with its binding roof, measured; "not measured"
    with the predicted binding roof, simulated; n/a for a run without a roof."""
    import pandas as pd

    from swizzleperf.eval import suite
    best = _attempt("candidate", "grouped-m:8", measured_metrics(monkeypatch, "grouped-m:8"), iteration=1)
    measured = report.build_report({"baseline": best, "best": best, "history": []}, RUN, "t")
    m = h200_measurer(monkeypatch, {})
    m.target = SimpleNamespace(spec=hwspecs.load_spec("mi300x"), mode="simulated", device=None)
    metrics = {"time_ms": None, "predicted_dram_bytes": 0.805e9, "predicted_source": "simulated:mi300x"}
    simulated = report.build_report({"best": _attempt("baseline", "baseline", {**metrics, "roof": m.roof(metrics)})},
                                    {**RUN, "hardware": "mi300x", "mode": "simulated"}, "t")
    cells = [suite._roof_cell(suite._roof_columns(r)) for r in (measured, simulated, {})]
    assert cells == ["78.0% (compute)", "not measured (compute, predicted)", "n/a"]
    row = {k: None for k in ("mode", "status", "baseline_l2_hit_rate", "expert_l2_hit_rate", "best_name",
                             "best_l2_hit_rate", "baseline_dram_bytes", "best_dram_bytes", "speedup_vs_baseline",
                             "speedup_vs_expert", "iteration_of_best", "tokens", "cost_usd")}
    row.update(kernel="gemm", rejected="", verdict="no change", best_source="measured:ncu",
               **suite._roof_columns(measured))
    table = suite._markdown(pd.DataFrame([row]))
    header, _, line = table.splitlines()[:3]
    assert header.split(" | ")[13] == "% of roof" and line.split(" | ")[13] == "78.0% (compute)"


class _Confirming(_Evaluator):
    """The head-to-head that chooses (the first compare) flatters the chosen order; the confirmation
    apart from it (the second, fresh rounds) does not."""

    def __init__(self, monkeypatch, times: dict, rounds: list):
        super().__init__(monkeypatch, times)
        self.rounds, self.compared = list(rounds), []

    def contenders(self, state): return [state["baseline"], state["best"]]

    def compare(self, kernel_files: list) -> dict:
        self.compared.append(list(kernel_files))
        times = self.rounds.pop(0)
        return {"verdict": "PASS", "reason": "", "rounds": 20, "time_ms": [t for t in times],
                "time_spread_ms": [0.01 for _ in times], "round_medians_ms": [[t] * 20 for t in times]}


def test_the_reported_gain_comes_from_rounds_apart_from_those_that_chose_it(monkeypatch):
    """#44: the chosen order's figure is the confirmation's (another process, fresh rounds)."""
    evaluator = _Confirming(monkeypatch, {"baseline": 3.26, "order1": 3.0, "order2": 2.9},
                            rounds=[[3.26, 2.90], [3.25, 3.20]])
    target = SimpleNamespace(mode="measured", spec=hwspecs.load_spec("h200"), device=None)
    loop = Loop(spec=SimpleNamespace(name="gemm", rewrite_target="swizzle"), target=target, evaluator=evaluator,
                proposer=ScriptedProposer([("order1", SOURCE + "\n# one"), ("order2", SOURCE + "\n# two")]),
                record=_Record(), run_id="r",
                budget=Budget(iterations=2, plateau=10), on_event=lambda k, d: None)
    state = loop.build(MemorySaver()).invoke({}, {"configurable": {"thread_id": "r"}})
    assert len(evaluator.compared) == 2 and evaluator.compared[1] == evaluator.compared[0]   # baseline, chosen
    best, base = state["best"]["metrics"], state["baseline"]["metrics"]
    assert best["time_ms"] == 3.20 and best["selection_time_ms"] == 2.90 and base["time_ms"] == 3.25
    assert "fresh rounds apart from the selection" in best["time_source"]
    assert state["confirmation"]["final"]["note"].startswith("the reported figures")
    r = report.build_report(state, RUN, "t")
    assert r["best"]["speedup_vs_baseline"] == pytest.approx(3.25 / 3.20)
