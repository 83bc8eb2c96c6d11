"""The eval over bundled kernels (on CPU: simulated MI300X), its resume, its tables and plot, and
the reflection-history notebook executed top to bottom against the run it produced."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

from swizzleperf.eval import history
from swizzleperf.eval.suite import KERNELS, EvalError, EvalOptions, resolve_kernels, run_eval, select_kernels

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    options = EvalOptions(kernels=["gemm"], hw="mi300x", iterations=2, workdir=str(folder / ".swizzleperf"),
                          out_dir=str(folder / "results"))
    eval_id, table, files = run_eval(options)
    return options, eval_id, table, files


def test_tables_and_plot(evaluated):
    options, eval_id, table, files = evaluated
    assert [f.name for f in files] == [f"{eval_id}.csv", f"{eval_id}.md", f"{eval_id}_l2.png"]
    row = table.iloc[0]
    assert row.kernel == "gemm" and row["mode"] == "simulated" and row.iterations == 2
    assert row.best_l2_hit_rate > row.baseline_l2_hit_rate and row.verdict == "higher predicted L2 hit rate"
    assert pd.isna(row.speedup_vs_baseline)  # no time without a GPU: no speedup claimed
    assert pd.read_csv(files[0]).shape[0] == 1
    assert "| gemm | simulated |" in files[1].read_text()


def test_a_finished_kernel_is_not_redone(evaluated):
    options, eval_id, table, _ = evaluated
    events = []
    again_id, again, _ = run_eval(options, eval_id, on_event=lambda kind, data: events.append(kind))
    assert again_id == eval_id and events == ["eval", "skip"]
    assert again.run_id.tolist() == table.run_id.tolist()


def test_unknown_kernels_and_evals(tmp_path):
    with pytest.raises(EvalError, match="unknown kernel"):
        resolve_kernels("gemm,nope")
    assert resolve_kernels("gemm") == ["gemm"]
    with pytest.raises(EvalError, match="no eval"):
        run_eval(EvalOptions(workdir=str(tmp_path / ".swizzleperf")), "eval-missing")


def test_history_helpers(evaluated):
    options = evaluated[0]
    run, it = history.load_run(workdir=options.workdir)
    assert run["kernel"] == "gemm" and list(it.kind[:2]) == ["baseline", "expert"]
    assert it.best_so_far.dropna().is_monotonic_increasing  # simulated: hit rate, higher is better
    assert history.prediction_error(it).empty  # nothing measured on a CPU
    assert history.spend(it).iloc[-1].iteration == "all"


def test_notebook_runs_top_to_bottom(evaluated):
    options = evaluated[0]
    nb = nbformat.read(ROOT / "notebooks" / "reflection_history.ipynb", as_version=4)
    os.environ["SWIZZLEPERF_WORKDIR"] = options.workdir
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    finally:
        os.environ.pop("SWIZZLEPERF_WORKDIR")
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "gemm on mi300x (simulated)" in text


def test_notebook_runs_from_its_folder_as_jupyter_starts_it(evaluated, tmp_path):
    """No SWIZZLEPERF_WORKDIR: the notebook finds the record above the folder it starts in."""
    import shutil
    options = evaluated[0]
    project = Path(options.workdir).parent
    (project / "notebooks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "notebooks" / "reflection_history.ipynb", project / "notebooks")
    nb = nbformat.read(project / "notebooks" / "reflection_history.ipynb", as_version=4)
    assert "SWIZZLEPERF_WORKDIR" not in os.environ
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(project / "notebooks")}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "gemm on mi300x (simulated)" in text


def test_distributed_kernels_are_eval_rows_per_world_size():
    assert resolve_kernels("distributed")[:3] == ["gemm_all_scatter@2", "gemm_all_scatter@4", "gemm_all_scatter@8"]
    assert len(resolve_kernels("all")) == 10 + 12 and resolve_kernels("flash_decode@4") == ["flash_decode@4"]
    with pytest.raises(EvalError, match="KERNEL@W"):
        resolve_kernels("flash_decode@5")


def test_kernels_is_the_single_gpu_ten():
    assert resolve_kernels("kernels") == list(KERNELS) and len(KERNELS) == 10


def test_all_on_a_spec_without_interconnect_figures_leaves_the_distributed_rows_out():
    """#45: `eval --hw mi300x` ran 12 distributed rows that could only fail (mi300x.yaml gives no
    copy-engine or SM-copy rates): `all` leaves them out saying why, naming them is refused."""
    names, left_out = select_kernels("all", "mi300x")
    assert names == list(KERNELS)
    assert "12 distributed rows left out" in left_out and "hwspecs/mi300x.yaml gives no" in left_out
    assert "copy_engine_bytes_per_s" in left_out and "--kernels kernels" in left_out
    for asked in ("distributed", "gemm,flash_decode@2", "all,gemm_all_scatter"):
        with pytest.raises(EvalError, match="hwspecs/mi300x.yaml gives no"):
            select_kernels(asked, "mi300x")
    assert select_kernels("all", "h200") == (resolve_kernels("all"), "")
    assert select_kernels("kernels", "mi300x") == (list(KERNELS), "")


def _row(kernel: str, status: str, l2) -> dict:
    return {"kernel": kernel, "status": status, "best_source": "simulated:mi300x" if l2 else None,
            **{f"{label}_l2_hit_rate": l2 for label in ("baseline", "expert", "best")}}


def test_the_plot_never_draws_a_failed_row_as_zero(tmp_path):
    from swizzleperf.eval.suite import _plots, plotted_rows
    table = pd.DataFrame([_row("gemm", "finished", 0.8), _row("softmax", "finished", 0.0),
                          _row("flash_decode@2", "failed", None), _row("spmv", "running", None),
                          _row("gemm_all_scatter@2", "finished", None)])
    rows, left_out = plotted_rows(table)
    assert rows.kernel.tolist() == ["gemm", "softmax"]   # a real 0 % stays
    assert left_out == "not finished: flash_decode@2, spmv; no L2 figure: gemm_all_scatter@2"
    assert _plots(table, tmp_path, "eval-x")[0].stat().st_size > 0


def test_eval_exits_non_zero_when_a_row_did_not_finish(tmp_path, monkeypatch):
    """#45: 12 of 22 rows failed and the command exited 0."""
    from typer.testing import CliRunner

    from swizzleperf.agent.cli import app
    from swizzleperf.agent.loop import run

    def start(options, on_event=None):
        raise run.RunError("stopped by the test")
    monkeypatch.setattr(run, "start", start)
    result = CliRunner().invoke(app, ["eval", "--kernels", "gemm,softmax", "--hw", "mi300x", "--workdir",
                                      str(tmp_path / ".sp"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "2 of 2 rows did not finish (gemm: failed, softmax: failed" in " ".join(result.output.split())


def test_a_distributed_row_is_predicted_and_labelled(tmp_path):
    options = EvalOptions(kernels=["gemm_all_scatter@8"], iterations=1, workdir=str(tmp_path / ".sp"),
                          out_dir=str(tmp_path / "results"))
    _, table, files = run_eval(options)
    row = table.iloc[0]
    assert row.status == "finished" and row["mode"] == "simulated" and row.best_source.startswith("simulated:h200")
    assert pd.isna(row.best_time_ms) and row.best_predicted_time_ms > 0 and row.torch_nccl_predicted_ms > 0
    assert "(predicted)" in files[1].read_text()


def test_eval_passes_prices_and_evidence_to_each_run(tmp_path, monkeypatch):
    from swizzleperf.agent.loop import run
    seen = []

    def start(options, on_event=None):
        seen.append(options)
        raise run.RunError("stopped by the test")
    monkeypatch.setattr(run, "start", start)
    options = EvalOptions(kernels=["gemm"], hw="mi300x", iterations=1, workdir=str(tmp_path / ".sp"),
                          out_dir=str(tmp_path / "out"), price_in_per_mtok=0.5, price_out_per_mtok=2.0,
                          evidence=False)
    _, table, _ = run_eval(options)
    assert (seen[0].price_in_per_mtok, seen[0].price_out_per_mtok, seen[0].evidence) == (0.5, 2.0, False)
    assert table.iloc[0].status == "failed"


@pytest.mark.parametrize("row", [
    {"kernel": "gemm", "mode": "simulated", "status": "finished", "reason": "", "baseline_dram_bytes": 805306368,
     "best_dram_bytes": 805306368, "tokens": 18050, "cost_usd": 0.0123, "verdict": "higher predicted L2 hit rate"},
    {"kernel": "black_scholes", "mode": None, "status": "failed", "reason": "boom", "baseline_dram_bytes": None,
     "best_dram_bytes": None, "tokens": None, "cost_usd": None, "verdict": "failed: boom"},
])
def test_the_markdown_keeps_dram_tokens_and_status(row):
    from swizzleperf.eval.suite import _markdown
    base = {f"{label}_{k}": None for label in ("baseline", "expert", "best")
            for k in ("name", "time_ms", "l2_hit_rate", "source", "predicted_time_ms")}
    table = pd.DataFrame([{**base, "speedup_vs_baseline": None, "speedup_vs_expert": None, "iteration_of_best": 1,
                           "rejected": "", **row}])
    text = _markdown(table)
    header, _, line = text.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in line.split("|")]))
    assert cells["status"] == row["status"] and cells["verdict"] == row["verdict"]
    if row["tokens"]:
        assert cells["baseline DRAM GB"] == "0.81" == cells["best DRAM GB"]
        assert cells["tokens (cost)"] == "18050 ($0.0123)"
    else:
        assert cells["best DRAM GB"] == "n/a" and cells["tokens (cost)"] == "n/a"


@pytest.mark.parametrize("source, cell", [
    ("estimated: 4 of 4 requests without server usage", "2921 (estimated: 4 of 4 requests without server usage)"),
    ("the server's usage (4 of 4 requests)", "2921"),
])
def test_estimated_tokens_are_marked_as_estimates(source, cell):
    """llama-cpp-python gives no usage on a stream: its counts are the proposer's estimates (#11)."""
    from swizzleperf.eval.suite import _markdown
    base = {f"{label}_{k}": None for label in ("baseline", "expert", "best")
            for k in ("name", "time_ms", "l2_hit_rate", "source", "predicted_time_ms")}
    table = pd.DataFrame([{**base, "kernel": "gemm", "mode": "simulated", "status": "finished", "reason": "",
                           "baseline_dram_bytes": None, "best_dram_bytes": None, "speedup_vs_baseline": None,
                           "speedup_vs_expert": None, "iteration_of_best": 1, "rejected": "", "tokens": 2921,
                           "tokens_source": source, "cost_usd": 0.0, "verdict": "no change"}])
    text = _markdown(table)
    header, _, line = text.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in line.split("|")]))
    assert cells["tokens (cost)"] == cell
    assert "the server's counts unless marked estimated" in text


def test_a_policy_rows_tokens_say_no_request_was_sent(evaluated):
    assert evaluated[2].iloc[0].tokens_source == "no LLM request sent"


def test_an_eval_keeps_no_credentials_and_asks_for_them_again(tmp_path, monkeypatch):
    """The record of an eval holds its LLM endpoint redacted (#21.3): a resume must give the same URL
    again (another endpoint is one line), and the worker processes get it in their environment."""
    import sqlite3

    from swizzleperf.eval import suite, workers

    secret_url = "http://agent:hunter2@127.0.0.1:9/v1?api_key=sk-abc123"
    options = EvalOptions(kernels=["gemm", "transpose"], model="m", base_url=secret_url,
                          workdir=str(tmp_path / ".swizzleperf"))
    (tmp_path / ".swizzleperf").mkdir()
    suite._register(options, "eval-x")
    with sqlite3.connect(tmp_path / ".swizzleperf" / "swizzleperf.db") as db:
        stored = " ".join(row[0] for row in db.execute("SELECT options_json FROM evals"))
    assert "hunter2" not in stored and "sk-abc123" not in stored and "127.0.0.1:9" in stored
    monkeypatch.delenv(workers.BASE_URL_VARIABLE, raising=False)
    with pytest.raises(EvalError, match="give the same --base-url again"):
        suite.stored_options(options.workdir, "eval-x")
    with pytest.raises(EvalError, match="is not the endpoint"):
        suite.stored_options(options.workdir, "eval-x", base_url="http://agent:pw@127.0.0.1:10/v1")
    assert suite.stored_options(options.workdir, "eval-x", base_url=secret_url).base_url == secret_url
    monkeypatch.setenv(workers.BASE_URL_VARIABLE, secret_url)  # what a worker process of the eval sees
    assert suite.stored_options(options.workdir, "eval-x").base_url == secret_url

    started = {}

    def fake_popen(command, **kwargs):
        started.update(kwargs["env"])
        raise OSError("not started in this test")

    monkeypatch.setattr(workers.subprocess, "Popen", fake_popen)
    with pytest.raises(OSError):
        workers._start(options.workdir, "eval-x", "gemm", 0, [], tmp_path, base_url=secret_url)
    assert started[workers.BASE_URL_VARIABLE] == secret_url
