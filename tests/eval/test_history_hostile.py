"""The notebook's history loader (eval/history.py) on hostile runs (#41): a transcript of unclosed
fences is read in time linear in its length (it grew 4x per doubling: a regex like the one fixed
in the proposer), a report.json nested 50 000 deep or of the wrong types, a transcript line of
the wrong shape and a record row holding text for a number are one line each (``HistoryError``)
or a missing figure, and the other runs of the workdir load."""
from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from hang_guard import never_blocks

from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval import history

ROOT = Path(__file__).resolve().parents[2]
QWEN_GEMM = ROOT / "bench" / "results" / "real_llm" / "work" / "runs" / "20261124-012842-ba04"
DEEP = "[" * 50_000 + "]" * 50_000


def _seconds(action, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("line", ["```\n", "```python\n", "text ```\n"])
def test_a_reply_of_unclosed_fences_is_read_in_linear_time(line):
    """N and 4N lines: linear is 4x (allow 8x for noise); the quadratic regex was 16x (0.1 s and
    1.6 s at these sizes on the project's CPU machine)."""
    small, large = line * 3_000, line * 12_000
    t_small = max(_seconds(lambda: history.function_source(small, "swizzle")), 1e-3)
    t_large = _seconds(lambda: history.function_source(large, "swizzle"))
    assert t_large / t_small < 8 and t_large < 0.5, (t_small, t_large)


def _run_folder(tmp_path: Path, name: str = QWEN_GEMM.name) -> Path:
    folder = tmp_path / "runs" / name
    shutil.copytree(QWEN_GEMM, folder)
    return folder


def test_a_transcript_of_unclosed_fences_loads_within_a_second(tmp_path):
    folder = _run_folder(tmp_path)
    rows = [json.loads(line) for line in (folder / "transcript.jsonl").read_text().splitlines() if line.strip()]
    rows[0]["reply"] = "```python\n" * 40_000
    (folder / "transcript.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    start = time.perf_counter()
    run, it = history.load_run(str(folder))
    assert time.perf_counter() - start < 5.0
    assert run["run_id"] == QWEN_GEMM.name


@pytest.mark.parametrize("name, text, expected", [
    ("deep", '{"attempts": ' + DEEP + "}", "nests 50001 levels deep"),
    ("a list", "[1, 2]", "Input should be a valid dictionary"),
    ("attempts as a number", '{"attempts": 5}', "attempts"),
    ("an attempt's iteration as text", '{"attempts": [{"iteration": "one", "name": "x"}]}', "attempts.0.iteration"),
    ("l2_hit_rate as text", '{"baseline": {"l2_hit_rate": "lots"}}', "baseline.l2_hit_rate"),
    ("not JSON", "{not json", "is not JSON"),
])
def test_a_report_that_is_not_a_run_s_is_one_line(tmp_path, name, text, expected):
    folder = _run_folder(tmp_path)
    (folder / "report.json").write_text(text)
    with pytest.raises(history.HistoryError) as info:
        history.load_run(str(folder))
    message = str(info.value)
    assert expected in message and str(folder / "report.json") in message and "\n" not in message, message


@pytest.mark.parametrize("line, expected", [
    (DEEP, "nests 50000 levels deep"),
    ('{"iteration": 1, "messages": "all"}', "messages"),
    ('{"iteration": "first"}', "iteration"),
])
def test_a_transcript_line_that_is_not_a_request_is_one_line(tmp_path, line, expected):
    folder = _run_folder(tmp_path)
    with open(folder / "transcript.jsonl", "a") as out:
        out.write(line + "\n")
    with pytest.raises(history.HistoryError) as info:
        history.load_run(str(folder))
    assert expected in str(info.value) and "transcript.jsonl, line " in str(info.value)


def test_one_bad_run_is_one_line_and_the_others_load(tmp_path):
    _run_folder(tmp_path, "20261124-000000-aaaa")
    _run_folder(tmp_path, "20261124-000001-bbbb")
    (_run_folder(tmp_path, "20261124-000002-cccc") / "report.json").write_text('{"k": ' + DEEP + "}")
    loaded, failed = history.load_runs(str(tmp_path))
    assert sorted(loaded) == ["20261124-000000-aaaa", "20261124-000001-bbbb"]
    assert len(failed) == 1 and failed[0].startswith("20261124-000002-cccc: ") and "\n" not in failed[0]


def test_a_record_with_text_for_a_figure_and_deep_metrics_still_loads(tmp_path):
    record = RunRecord(tmp_path)
    record.create_run("r1", {"kernel": "gemm", "kernel_path": "k.py", "hardware": "mi300x", "mode": "simulated",
                             "proposer": "policy", "run_dir": "runs/r1"}, {})
    for i, l2 in enumerate((0.5, 0.7, 0.6)):
        record.save_attempt("r1", {"kind": "baseline" if i == 0 else "candidate", "iteration": i, "name": f"c{i}",
                                   "verdict": "PASS", "metrics": {"l2_hit_rate": l2}}, "policy", i == 1)
    with sqlite3.connect(record.db_path) as db:
        db.execute("UPDATE iterations SET l2_hit_rate = 'lots', metrics_json = ? WHERE iteration = 2", (DEEP,))
    run, it = history.load_run(None, str(tmp_path))
    assert run["objective"] == "L2 hit rate" and it.best_so_far.tolist()[:2] == [0.5, 0.7]
    assert history.summary(it).roof.tolist() == ["", "", ""]


@pytest.mark.parametrize("make", ["fifo", "folder", "link to stdin"])
def test_a_report_that_is_a_pipe_a_folder_or_the_terminal_is_one_line_not_a_hang(tmp_path, make):
    """A named pipe for report.json (or a link to /proc/self/fd/0) blocked the loader for ever; a
    folder raised IsADirectoryError from load_run (round three of #41)."""
    import os
    _run_folder(tmp_path, "20261124-000000-aaaa")
    folder = _run_folder(tmp_path, "20261124-000001-bbbb")
    report = folder / "report.json"
    report.unlink()
    {"fifo": lambda: os.mkfifo(report), "folder": report.mkdir,
     "link to stdin": lambda: report.symlink_to("/proc/self/fd/0")}[make]()
    with never_blocks(30, "the loader hung"):
        with pytest.raises(history.HistoryError, match="not a regular file"):
            history.load_run(str(folder))
        loaded, failed = history.load_runs(str(tmp_path))
    assert list(loaded) == ["20261124-000000-aaaa"] and len(failed) == 1 and "\n" not in failed[0]


def test_a_report_of_no_entry_goes_through_every_cell_of_the_notebook(tmp_path):
    """#41's second replay: ``{"attempts": []}`` (no baseline, no attempt) loaded, then the
    notebook's prediction_error raised (its text columns were empty float columns)."""
    folder = _run_folder(tmp_path)
    (folder / "report.json").write_text('{"attempts": []}')
    run, it = history.load_run(str(folder))
    assert it.empty
    for table in (history.summary(it), history.rejections(it), history.prediction_error(it), history.spend(it)):
        assert len(table) <= 1
    assert len(history.transcript(run)) > 0
