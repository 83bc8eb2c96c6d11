"""The reflection-history notebook on a committed run folder (#45): the README's
``SWIZZLEPERF_RUN=bench/results/...`` from the folder Jupyter starts in (notebooks/), and
``swizzleperf notebook RUN`` headless, from the repository's root and from elsewhere."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.eval import history

ROOT = Path(__file__).resolve().parents[2]
#: A committed run folder (report.json and transcript.jsonl only): the README's example.
RUN = "bench/results/real_llm/work/runs/20261124-012842-ba04"
HEADLINE = "run 20261124-012842-ba04: gemm on mi300x (simulated)"


def test_a_path_from_the_root_is_found_from_notebooks(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")
    run, iterations = history.load_run(RUN)
    assert run["run_id"] == "20261124-012842-ba04" and len(iterations) == 10
    assert len(history.transcript(run)) == 13
    assert history.located("20261124-012842-ba04") == "20261124-012842-ba04"   # a run id stays one


def test_the_readme_example_runs_in_jupyters_folder(monkeypatch):
    """What Jupyter does: the kernel starts in notebooks/, SWIZZLEPERF_RUN as the README writes it."""
    from nbclient import NotebookClient
    nb = nbformat.read(ROOT / "notebooks" / "reflection_history.ipynb", as_version=4)
    monkeypatch.setenv("SWIZZLEPERF_RUN", RUN)
    monkeypatch.delenv("SWIZZLEPERF_WORKDIR", raising=False)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    assert HEADLINE in "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_swizzleperf_notebook_runs_it_headless(tmp_path, where):
    run = RUN if where == "root" else str(ROOT / RUN)
    out = tmp_path / "executed.ipynb"
    proc = swizzleperf("notebook", run, "--out", str(out), cwd=ROOT if where == "root" else tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HEADLINE in proc.stdout and "## Every attempt" in proc.stdout and "NOT_PERMUTATION" in proc.stdout
    assert f"executed notebook: {out}" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
    executed = nbformat.read(out, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)   # the objective's figure


def test_a_run_folder_that_is_not_there_is_one_line(tmp_path):
    assert_one_line_error(swizzleperf("notebook", "no/such/run", cwd=tmp_path), "no run folder or workdir")
    assert not list(tmp_path.iterdir())


def test_a_cell_that_fails_is_one_line_and_the_copy_keeps_it(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "report.json").write_text('{"attempts": "not a list"}')
    proc = swizzleperf("notebook", str(folder), "--out", str(tmp_path / "x.ipynb"), cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "the notebook stopped: HistoryError")
    assert "\x1b[" not in proc.stderr and (tmp_path / "x.ipynb").exists()
    assert os.environ.get("SWIZZLEPERF_RUN") is None


def test_the_kernel_imports_nothing_from_here_and_gets_no_key_and_the_copy_replaces_a_link(tmp_path):
    """#41 round fourteen: an app under ``optimize --app`` may write the folder the user then runs
    ``swizzleperf notebook`` in; a ``pandas.py`` it left there was imported by the notebook's kernel
    with ``OPENAI_API_KEY`` in its environment, and the executed copy was written through a link
    planted at its name. Now the kernel imports nothing from that folder and gets no credential,
    and the copy is a new file renamed over the link (its target untouched)."""
    import subprocess
    from run_cli import CLI
    for name in ("pandas.py", "numpy.py"):
        (tmp_path / name).write_text("import os\nopen(os.path.join(os.path.dirname(__file__), 'PLANTED'), 'a')"
                                     ".write(os.environ.get('OPENAI_API_KEY', 'no key') + '\\n')\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    (tmp_path / "executed.ipynb").symlink_to(victim)
    env = {**os.environ, "OPENAI_API_KEY": "sk-notebook-must-not-see-0123456789"}
    proc = subprocess.run(CLI + ["notebook", str(ROOT / RUN), "--out", "executed.ipynb"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HEADLINE in proc.stdout and not (tmp_path / "PLANTED").exists()
    assert victim.read_text() == "the user's file\n"
    assert not (tmp_path / "executed.ipynb").is_symlink() and nbformat.read(tmp_path / "executed.ipynb", as_version=4).cells


def test_the_notebooks_folder_is_read_only_to_the_app():
    """#41 round fourteen: ``swizzleperf notebook`` runs notebooks/reflection_history.ipynb's cells;
    its folder is among the agent's own, read-only to ``--app`` (capture's NOTEBOOKS is the path
    eval/notebook.py runs)."""
    from swizzleperf.agent.capture.capture import NOTEBOOKS, agent_owned_paths
    from swizzleperf.eval.notebook import NOTEBOOK
    assert NOTEBOOKS == NOTEBOOK.parent and str(NOTEBOOKS) in agent_owned_paths()
