"""``--in-place`` never overwrites the user's own edits (#21): the result is written back only if the
file is unchanged since the run read it, the digest kept in the record across a kill and
``--resume``; otherwise best.diff stays in the run folder and one line says so."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.sandbox.write_back import digest, file_digest, verified_text, write_back, write_sealed

ARGS = ["pid", "num_pid_m", "num_pid_n"]


@pytest.mark.parametrize("text", ["x = 1\n", "x = 1\r\ny = 2\r\n", "é = 'ü'\n" * 3])
def test_an_unchanged_file_is_replaced_keeping_its_mode_and_a_changed_one_is_not(tmp_path, text):
    path = tmp_path / "k.py"
    path.write_bytes(text.encode())
    path.chmod(0o640)
    expected = digest(path.read_text())  # the text as read agrees with the bytes' digest
    assert expected == file_digest(path)
    assert write_back(path, expected, "y = 2\n") == (True, "written")
    assert path.read_text() == "y = 2\n" and (path.stat().st_mode & 0o777) == 0o640
    assert write_back(path, expected, "z = 3\n") == (False, f"{path.resolve()} changed since the run read it")
    assert path.read_text() == "y = 2\n" and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("original, written", [
    (b"x = 1\r\ny = 2\r\n", b"a = 1\r\n\r\nb = 2\r\n"),          # CRLF stays CRLF
    (b"x = 1\ny = 2\n", b"a = 1\n\nb = 2\n"),                      # LF stays LF
    (b"x = 1\ry = 2\r", b"a = 1\r\rb = 2\r"),                      # old Mac CR stays CR
    (b"x = 1\r\ny = 2\r\nz = 3\n", b"a = 1\r\n\r\nb = 2\r\n"),  # mixed: the dominant one
    (b"x = 1\r\ny = 2\n", b"a = 1\n\nb = 2\n"),                   # a tie: LF
    (b"# -*- coding: latin-1 -*-\r\nx = '\xe9'\r\n",            # encoding and endings both kept
     b"# -*- coding: latin-1 -*-\r\na = '\xe9'\r\n"),
])
def test_a_file_is_written_back_with_its_own_line_endings(tmp_path, original, written):
    """#41's second replay: ``--in-place`` wrote a CRLF kernel back with LF endings, every line of
    the user's file changed bytes. The verified text (LF, as read) is checked by digest and written
    with the file's own (dominant) newline."""
    path = tmp_path / "k.py"
    path.write_bytes(original)
    text = written.decode("latin-1").replace("\r\n", "\n").replace("\r", "\n")
    assert write_back(path, file_digest(path), text) == (True, "written")
    assert path.read_bytes() == written
    edited = original + b"# the user's edit\r\n"
    path.write_bytes(edited)  # the digest check still refuses a changed file, whatever its endings
    assert not write_back(path, digest(original), text)[0] and path.read_bytes() == edited


def test_a_symlinked_file_is_written_through_the_link(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("a = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert write_back(link, digest("a = 1\n"), "a = 2\n")[0]
    assert link.is_symlink() and target.read_text() == "a = 2\n"


def test_a_missing_file_is_not_written(tmp_path):
    written, why = write_back(tmp_path / "gone.py", digest(""), "x")
    assert not written and "cannot be read" in why and not (tmp_path / "gone.py").exists()


class KilledAt(ScriptedProposer):
    """Proposes the script, and stops the run (as a kill would) when asked for proposal ``at``."""

    def __init__(self, script, at: int):
        super().__init__(script)
        self.at = at

    def propose(self, context):
        if len(self.contexts) == self.at:
            raise KeyboardInterrupt
        return super().propose(context)


@pytest.mark.parametrize("edited", [True, False])
def test_in_place_after_a_kill_and_resume_writes_only_an_unedited_file(tmp_path, gemm_path, edited, monkeypatch):
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=2, in_place=True)
    with pytest.raises(KeyboardInterrupt):
        run.start(options, proposer=KilledAt([("col", catalog_source("column-major", ARGS))], at=1))
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        run_id, config = db.execute("SELECT run_id, config_json FROM runs").fetchone()
    assert json.loads(config)["kernel_sha256"] == digest(gemm_path.read_text())  # kept in the record
    if edited:  # the user's edit while the run was down
        kernel.write_text(gemm_path.read_text() + "\n# my own edit\n")
    monkeypatch.chdir(tmp_path)  # resume from anywhere
    outcome = run.resume(run_id, workdir=options.workdir,
                         proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))]))
    assert outcome.status == "finished" and outcome.report["best"]["kind"] == "candidate"
    report = json.loads((outcome.run_dir / "report.json").read_text())
    if edited:
        assert kernel.read_text().endswith("# my own edit\n") and "NUM_XCDS" not in kernel.read_text()
        assert report["in_place"] == (f"not written: {kernel.resolve()} changed since the run read it; the best "
                                      f"kernel is {outcome.run_dir / 'gemm.py'} and its patch "
                                      f"{outcome.run_dir / 'best.diff'}")
        assert "NUM_XCDS" in (outcome.run_dir / "best.diff").read_text()
    else:
        assert "NUM_XCDS" in kernel.read_text()
        assert report["in_place"] == f"wrote the best kernel (xcd) into {kernel}"


def test_a_sealed_file_is_read_only_and_read_back_only_while_it_is_the_verified_text(tmp_path):
    """What is written is what was verified (#41): a candidate file is written read-only with its
    digest kept; read back for ``--in-place`` only while its text still has that digest."""
    path = tmp_path / "candidate001_gemm.py"
    path.write_text("stale\n")   # a file left there is replaced, not appended to
    sealed = write_sealed(path, "x = 1\n")
    assert sealed == digest("x = 1\n") and (path.stat().st_mode & 0o777) == 0o444
    assert verified_text(path, sealed) == ("x = 1\n", "verified")
    assert write_sealed(path, "x = 2\n") == digest("x = 2\n")   # read-only files are replaced whole
    path.chmod(0o644)
    path.write_text("x = 2\nimport os  # appended after verification\n")
    assert verified_text(path, digest("x = 2\n")) == (
        None, f"{path} is not the text that was verified (it changed after verification)")
    assert verified_text(path, None)[0] is None


class TamperingAt(ScriptedProposer):
    """Proposes the script; asked for proposal ``at``, appends a line to every candidate file of the
    run folder (after their verification), then has nothing more to propose."""

    def __init__(self, script, at: int, workdir: Path):
        super().__init__(script)
        self.at, self.workdir = at, workdir

    def propose(self, context):
        if len(self.contexts) == self.at:
            for path in self.workdir.glob("runs/*/candidates/candidate*.py"):
                path.chmod(0o644)
                with open(path, "a") as f:
                    f.write("import os  # appended after verification\n")
        return super().propose(context)


def test_in_place_refuses_a_candidate_changed_after_its_verification(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    workdir = tmp_path / ".sp"
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(workdir), plateau=10, iterations=2,
                             in_place=True)
    outcome = run.start(options, proposer=TamperingAt([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))], 1,
                                                      workdir))
    assert outcome.status == "finished" and outcome.report["best"]["kind"] == "candidate"
    best_file = next(outcome.run_dir.glob("candidates/candidate001*.py"))
    assert outcome.report["in_place"].startswith(f"not written: {best_file} is not the text that was verified")
    assert kernel.read_text() == gemm_path.read_text()   # neither the order nor the appended line


def test_the_run_folders_best_kernel_is_the_verified_text_or_not_written(tmp_path, gemm_path):
    """report.write_outputs' copy of the best kernel (``<run>/gemm.py``) is read through the digest
    kept when it was verified, like ``--in-place``: a candidate file with a line appended after its
    verification is not copied; report.json and report.md say why in one line."""
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    workdir = tmp_path / ".sp"
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(workdir), plateau=10, iterations=2)
    outcome = run.start(options, proposer=TamperingAt([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))], 1,
                                                      workdir))
    assert outcome.status == "finished" and outcome.report["best"]["kind"] == "candidate"
    best_file = next(outcome.run_dir.glob("candidates/candidate001*.py"))
    copy = outcome.run_dir / "gemm.py"
    assert not copy.exists() or "appended after verification" not in copy.read_text()
    report = json.loads((outcome.run_dir / "report.json").read_text())
    why = f"not written: {best_file} is not the text that was verified (it changed after verification)"
    assert report["best_kernel_file"] is None and report["best_kernel_refused"] == why
    assert why in " ".join((outcome.run_dir / "report.md").read_text().replace("\\", "").split())


def test_the_run_folders_best_kernel_is_written_sealed_when_unchanged(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1)
    outcome = run.start(options, proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))]))
    copy, best = outcome.run_dir / "gemm.py", outcome.report["best"]
    assert outcome.report["best_kernel_file"] == str(copy) and "best_kernel_refused" not in outcome.report
    assert digest(copy.read_text()) == best["kernel_sha256"] and (copy.stat().st_mode & 0o777) == 0o444


def test_a_run_recorded_before_digests_resumes_and_its_best_is_refused_in_one_line(tmp_path, gemm_path, monkeypatch):
    """A run killed before digests were kept (its attempts have no ``kernel_sha256``) resumes as
    any other; its best's text, with nothing to check it against, is neither copied into the run
    folder nor written ``--in-place``: one line each says why and points at best.diff, not at a
    best kernel file that was not written. Without the digest of the kernel itself in its
    configuration, the run folder's copy that resume imports cannot be checked: the resume is
    refused in one line (#41h)."""
    from types import SimpleNamespace

    from swizzleperf.agent.capture.user_kernel import _unverified
    from swizzleperf.agent.verification import evaluate
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=3, in_place=True)
    prepare = evaluate.Evaluator.prepare

    def without_digest(self, *args, **kwargs):   # as the evaluator wrote attempts before digests
        prepared = prepare(self, *args, **kwargs)
        prepared.pop("kernel_sha256", None)
        return prepared
    with monkeypatch.context() as m:
        m.setattr(evaluate.Evaluator, "prepare", without_digest)
        with pytest.raises(KeyboardInterrupt):
            run.start(options, proposer=KilledAt([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))], at=1))
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        run_id, stored = db.execute("SELECT run_id, config_json FROM runs").fetchone()
        config = json.loads(stored)
        del config["kernel_sha256"]
        db.execute("UPDATE runs SET config_json = ? WHERE run_id = ?", (json.dumps(config), run_id))
    with pytest.raises(run.RunError, match="keeps no digest of its kernel") as info:
        run.resume(run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert "original_gemm.py" in str(info.value) and "\n" not in str(info.value)
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        db.execute("UPDATE runs SET config_json = ? WHERE run_id = ?", (stored, run_id))
    outcome = run.resume(run_id, workdir=options.workdir,
                         proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    assert outcome.status == "finished"
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert [a["name"] for a in report["attempts"]][-2:] == ["xcd", "col"]   # resumed: the next candidate verified
    assert report["best"]["name"] == "xcd" and report["best"].get("kernel_sha256") is None
    best_file = next(outcome.run_dir.glob("candidates/candidate001*.py"))
    why = f"{best_file} has no digest of its verified text in the run record (a run recorded before digests were kept)"
    assert report["best_kernel_file"] is None and report["best_kernel_refused"] == f"not written: {why}"
    assert report["in_place"] == f"not written: {why}; its patch is {outcome.run_dir / 'best.diff'}"
    assert "\n" not in report["in_place"] + report["best_kernel_refused"]
    assert why in " ".join((outcome.run_dir / "report.md").read_text().replace("\\", "").split())
    assert not (outcome.run_dir / "gemm.py").exists() and kernel.read_text() == gemm_path.read_text()
    assert "NUM_XCDS" in (outcome.run_dir / "best.diff").read_text()
    prepared = SimpleNamespace(module_path=kernel, lifted=SimpleNamespace(target_name="swizzle"))   # --app's check
    order = catalog_source("xcd-grouped-m:8:8", ARGS)
    assert _unverified(prepared, report["best"], order) == ("the run record has no digest of the verified text "
                                                            "(a run recorded before digests were kept)")


def test_a_latin1_kernel_is_written_back_in_latin1(tmp_path):
    """#41, replayed from outside: a kernel with ``# -*- coding: latin-1 -*-`` (which Python reads)
    was written back as UTF-8 under that line: every accented letter outside the target changed."""
    from swizzleperf.sandbox.write_back import digest, verified_text, write_back, write_sealed
    user = tmp_path / "gemm.py"
    original = "# -*- coding: latin-1 -*-\n\"\"\"r\xe9sum\xe9\"\"\"\nX = 1\n".encode("latin-1")
    user.write_bytes(original)
    candidate = tmp_path / "candidate.py"
    new_text = "# -*- coding: latin-1 -*-\n\"\"\"r\xe9sum\xe9\"\"\"\nX = 2\n"
    sealed = write_sealed(candidate, new_text)
    assert candidate.read_bytes() == new_text.encode("latin-1")
    text, why = verified_text(candidate, sealed)
    assert text == new_text, why
    assert write_back(user, digest(original), text) == (True, "written")
    assert user.read_bytes() == new_text.encode("latin-1")


def test_a_resumed_checkpoint_naming_a_best_file_outside_the_run_folder_is_never_read(tmp_path, gemm_path,
                                                                                      monkeypatch):
    """A planted checkpoint whose best names a file outside the run folder, with that file's own
    digest, is neither written into the user's kernel by ``--in-place`` nor copied into the run
    folder (#41, third replay): the digest guards a file at rest, the run folder its place."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1, in_place=True)
    first = run.start(options, proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))]))
    assert first.report["best"]["kind"] == "candidate"
    kernel.write_text(gemm_path.read_text())          # as the run read it: --in-place would write it again
    secret = tmp_path / "elsewhere.py"
    secret.write_text("# A FILE OUTSIDE THE RUN FOLDER\n")
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        saver = SqliteSaver(db, serde=run.CHECKPOINT_SERDE)
        last = saver.get_tuple({"configurable": {"thread_id": first.run_id, "checkpoint_ns": ""}})
        values = dict(last.checkpoint["channel_values"])
        values["best"] = {**values["best"], "kernel_file": str(secret), "kernel_sha256": digest(secret.read_text())}
        saver.put(last.config, {**last.checkpoint, "channel_values": values}, last.metadata, {})
    monkeypatch.chdir(tmp_path)
    outcome = run.resume(first.run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert kernel.read_text() == gemm_path.read_text()
    assert "A FILE OUTSIDE" not in "".join(p.read_text() for p in outcome.run_dir.glob("*.py"))
    assert outcome.report["in_place"].startswith(f"not written: {secret} is not in the run folder")


def test_a_record_naming_a_run_folder_outside_the_workdir_is_not_resumed(tmp_path, gemm_path, monkeypatch):
    """``--resume`` imports the run folder's ``original_<kernel>``: a runs row naming a folder
    outside the workdir (planted, or the folder swapped for a link) is refused in one line before
    anything of it is read (#41, third replay)."""
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1)
    first = run.start(options, proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "imported"
    (planted / "original_gemm.py").write_text(gemm_path.read_text() + f"\nopen({str(marker)!r}, 'w').close()\n")
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        db.execute("UPDATE runs SET run_dir = ?", (str(planted),))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(run.RunError, match="is not inside"):
        run.resume(first.run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert not marker.exists()


# -- a best planted in the run folder, with its own digest (#41, "What is written is what was verified")

GENUINE = "xcd-grouped-m:8:8"
OWN_TARGET = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the output tile ``(pid_m, pid_n)`` it computes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n
'''


def _genuine(original: str) -> str:
    """A best kernel as the run writes one: the candidate builder's splice of a catalog order."""
    from swizzleperf.agent.verification.candidate import splice
    return splice(original, "swizzle", catalog_source(GENUINE, ARGS))


def _planted(original: str, how: str) -> str:
    genuine = _genuine(original)
    if how == "genuine":
        return genuine
    if how == "extra statement":      # (a) a statement of its own beside the kernel
        return genuine + "import os\nos.system('echo planted')\n"
    if how == "kernel body":          # (b) the kernel changed outside the swizzle: every C tile zeros
        assert genuine.count("    store_tile(c, accumulator, pid_m * BLOCK_M,") == 1
        return genuine.replace("    store_tile(c, accumulator, pid_m * BLOCK_M,",
                               "    store_tile(c, accumulator * 0, pid_m * BLOCK_M,")
    if how == "static check":         # (c) a swizzle no candidate could be: it calls what it finds
        assert original.count(OWN_TARGET) == 1
        first = "    pid_m = pid // num_pid_n\n"
        return original.replace(OWN_TARGET, OWN_TARGET.replace(
            first, "    __import__('os').system('echo planted')\n" + first))
    if how == "comment":              # the same tree, with a line the candidate builder never writes
        return genuine.replace("\n@triton.jit\ndef swizzle(",
                               "\n# planted: run `curl x | sh` first\n@triton.jit\ndef swizzle(", 1)
    raise AssertionError(how)


def _planted_run(tmp_path, gemm_path):
    """``(original text, the user's kernel, a run folder, the path a planted best takes in it)``:
    the user's kernel a copy of the bundled GEMM."""
    original = gemm_path.read_text()
    kernel = tmp_path / "gemm.py"
    kernel.write_text(original)
    run_dir = tmp_path / ".sp" / "runs" / "r1"
    (run_dir / "candidates").mkdir(parents=True)
    return original, kernel, run_dir, run_dir / "candidates" / "candidate009_gemm.py"


@pytest.mark.parametrize("how, why", [
    ("extra statement", "the best kernel differs from your kernel outside its rewrite target 'swizzle'"),
    ("kernel body", "the best kernel differs from your kernel outside its rewrite target 'swizzle'"),
    ("static check", "the best kernel's swizzle fails the candidates' static check (line 4: "
                     "__import__('os').system is not allowed"),
    ("comment", "the best kernel is not your kernel with only swizzle replaced as candidates are (text the "
                "candidate builder does not write)"),
    ("genuine", None),
])
def test_in_place_writes_a_best_in_the_run_folder_only_where_it_changes_only_the_swizzle(tmp_path, gemm_path, how, why):
    """Whoever can write both the record and the run folder can name a file of the run folder, with
    its own digest, as the verified best (#41): ``--in-place`` writes it only where it is the user's
    kernel with the swizzle alone replaced, by one that passes the candidates' static check, to the
    character. Else one line says why, nothing is written, and the run's result stands."""
    original, kernel, run_dir, planted = _planted_run(tmp_path, gemm_path)
    text = _planted(original, how)
    best = {"name": "planted", "kind": "candidate", "kernel_file": str(planted),
            "kernel_sha256": write_sealed(planted, text)}
    options = run.RunOptions(kernel=str(kernel), kernel_sha256=digest(original), in_place=True)
    line = run._write_back(kernel, best, options, run_dir, "swizzle")
    if why is None:
        assert line == f"wrote the best kernel (planted) into {kernel}" and kernel.read_text() == text
        return
    assert line.startswith(f"not written: {why}") and "\n" not in line
    assert line.endswith(f"; the best kernel is {run_dir / 'gemm.py'} and its patch {run_dir / 'best.diff'}")
    assert kernel.read_text() == original


def test_a_resumed_checkpoint_naming_a_planted_best_in_the_run_folder_is_not_written(tmp_path, gemm_path,
                                                                                     monkeypatch):
    """The record and the run folder rewritten together (#41): a checkpoint whose best is a file
    planted inside the run folder, its digest alongside, with a statement beside the kernel. The
    resumed run finishes with its own result; the user's kernel is not written."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1, in_place=True)
    first = run.start(options, proposer=ScriptedProposer([("xcd", catalog_source(GENUINE, ARGS))]))
    assert first.report["best"]["kind"] == "candidate" and "NUM_XCDS" in kernel.read_text()
    kernel.write_text(gemm_path.read_text())          # as the run read it: --in-place would write it again
    planted = first.run_dir / "candidates" / "candidate009_gemm.py"
    sealed = write_sealed(planted, _planted(gemm_path.read_text(), "extra statement"))
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        saver = SqliteSaver(db, serde=run.CHECKPOINT_SERDE)
        last = saver.get_tuple({"configurable": {"thread_id": first.run_id, "checkpoint_ns": ""}})
        values = dict(last.checkpoint["channel_values"])
        values["best"] = {**values["best"], "kernel_file": str(planted), "kernel_sha256": sealed}
        saver.put(last.config, {**last.checkpoint, "channel_values": values}, last.metadata, {})
    monkeypatch.chdir(tmp_path)
    outcome = run.resume(first.run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert outcome.status == "finished" and outcome.report["best"]["name"] == "xcd"
    assert kernel.read_text() == gemm_path.read_text()
    assert outcome.report["in_place"].startswith("not written: the best kernel differs from your kernel outside "
                                                 "its rewrite target 'swizzle'; ")


def test_write_back_refuses_what_its_check_refuses_and_a_file_that_does_not_decode(tmp_path):
    path = tmp_path / "k.py"
    path.write_text("x = 1\n")
    seen = []
    assert write_back(path, digest("x = 1\n"), "y = 2\n", lambda o: seen.append(o) or "no: not the target") == (
        False, "no: not the target")
    assert seen == ["x = 1\n"] and path.read_text() == "x = 1\n"
    path.write_bytes(b"x = '\xff'\n")   # not UTF-8, and no coding line: the check is never given it
    assert write_back(path, file_digest(path), "y = 2\n", lambda o: None) == (
        False, f"{path.resolve()} does not read in its declared encoding")
    assert path.read_bytes() == b"x = '\xff'\n"
    assert write_back(tmp_path / "k.py", file_digest(path), "y = 2\n") == (True, "written")


# -- hostile replay #41e: a BOM, deep expressions, a target named through a variable


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_kernel_with_a_bom_is_written_back_with_its_bom(tmp_path, gemm_path, newline):
    """#41e, LOST: a UTF-8 kernel that begins with a byte order mark was written back without it
    (the text Python reads has no BOM; the bytes written were that text, encoded). It is kept, and
    the digests still agree: the file's bytes, the text read from them."""
    import codecs

    from swizzleperf.sandbox.untrusted import read_source
    from swizzleperf.sandbox.write_back import source_text
    original = gemm_path.read_text()
    kernel = tmp_path / "gemm.py"
    kernel.write_bytes(codecs.BOM_UTF8 + original.replace("\n", newline).encode())
    assert read_source(kernel) == original
    run_dir = tmp_path / ".sp" / "runs" / "r1"
    (run_dir / "candidates").mkdir(parents=True)
    best_file = run_dir / "candidates" / "candidate001_gemm.py"
    text = _genuine(original)
    best = {"name": GENUINE, "kind": "candidate", "kernel_file": str(best_file),
            "kernel_sha256": write_sealed(best_file, text)}
    options = run.RunOptions(kernel=str(kernel), kernel_sha256=file_digest(kernel), in_place=True)
    line = run._write_back(kernel, best, options, run_dir, "swizzle")
    assert line == f"wrote the best kernel ({GENUINE}) into {kernel}"
    assert kernel.read_bytes() == codecs.BOM_UTF8 + text.replace("\n", newline).encode()
    assert read_source(kernel) == source_text(kernel.read_bytes()) == text
    small = tmp_path / "small.py"
    small.write_bytes(codecs.BOM_UTF8 + b"# -*- coding: utf-8 -*-\nx = '\xc3\xa9'\n")
    assert write_back(small, file_digest(small), "# -*- coding: utf-8 -*-\ny = '\xe9'\n") == (True, "written")
    assert small.read_bytes() == codecs.BOM_UTF8 + b"# -*- coding: utf-8 -*-\ny = '\xc3\xa9'\n"
    small.write_bytes(b"x = 1\n")   # no BOM: none added
    assert write_back(small, file_digest(small), "y = 2\n") == (True, "written") and small.read_bytes() == b"y = 2\n"


def _deep(terms: int) -> str:
    return "X = " + "1 + " * terms + "1\n"


@pytest.mark.parametrize("terms", [500, 2500, 3000])
def test_a_planted_best_with_a_deep_expression_is_refused_in_one_line(tmp_path, gemm_path, terms):
    """#41e, CRASHED: a planted best ``X = 1 + 1 + ...`` of 500 terms parses, and the comparison of
    the trees outside the target (a deep copy, ``ast.dump``) recursed past Python's limit: a
    traceback. One line now, nothing written; a tree too deep to parse says so."""
    original, kernel, run_dir, planted = _planted_run(tmp_path, gemm_path)
    best = {"name": "planted", "kind": "candidate", "kernel_file": str(planted),
            "kernel_sha256": write_sealed(planted, _genuine(original) + "\n" + _deep(terms))}
    options = run.RunOptions(kernel=str(kernel), kernel_sha256=digest(original), in_place=True)
    line = run._write_back(kernel, best, options, run_dir, "swizzle")
    why = ("the best kernel does not parse" if terms >= 3000
           else "the best kernel differs from your kernel outside its rewrite target 'swizzle'")
    assert line.startswith(f"not written: {why}; ") and "\n" not in line
    assert kernel.read_text() == original


def test_a_genuine_kernel_with_a_deep_expression_is_optimized_and_written_back(tmp_path, gemm_path):
    """#41e: a kernel of the user's with a 500-term sum at module level stopped its run with an
    internal error (the splice's comparison of the trees recursed too deep). It runs, and its best
    is written back."""
    OWN = "@triton.jit\ndef swizzle("
    source = gemm_path.read_text().replace("\n\n" + OWN, "\n\n" + _deep(500) + "\n\n" + OWN, 1)
    kernel = tmp_path / "gemm.py"
    kernel.write_text(source)
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1, in_place=True)
    outcome = run.start(options, proposer=ScriptedProposer([("xcd", catalog_source(GENUINE, ARGS))]))
    assert outcome.status == "finished" and outcome.report["best"]["name"] == "xcd"
    assert outcome.report["in_place"] == f"wrote the best kernel (xcd) into {kernel.resolve()}"
    assert kernel.read_text() == _genuine(source)


def test_an_unexpected_failure_of_the_write_back_is_one_line_and_the_result_is_kept(tmp_path, gemm_path,
                                                                                   monkeypatch):
    """Whatever the write-back's check raises (a RecursionError of a tree deeper than the one above),
    the run finishes with its report and one line for --in-place; nothing is written."""
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())

    def deep(*_args):
        raise RecursionError("maximum recursion depth exceeded")
    monkeypatch.setattr(run, "_outside_target", deep)
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1, in_place=True)
    outcome = run.start(options, proposer=ScriptedProposer([("xcd", catalog_source(GENUINE, ARGS))]))
    assert outcome.status == "finished" and outcome.report["best"]["name"] == "xcd"
    line = outcome.report["in_place"]
    assert line.startswith("not written: the best kernel could not be checked (RecursionError: maximum "
                           "recursion depth exceeded)") and "\n" not in line
    assert kernel.read_text() == gemm_path.read_text()
    assert json.loads((outcome.run_dir / "report.json").read_text())["in_place"] == line


def _variable_target(gemm_source: str) -> str:
    """kernels/gemm.py with its target named ``tile_order`` through a module-level variable."""
    source = gemm_source.replace("swizzle(", "tile_order(").replace(
        'rewrite_target="swizzle"', "rewrite_target=TARGET_NAME").replace(
        "SPEC = KernelSpec(", 'TARGET_NAME = "tile_order"\n\nSPEC = KernelSpec(')
    assert source.count("TARGET_NAME") == 2 and "def tile_order(pid, num_pid_m, num_pid_n):" in source
    return source


def test_in_place_writes_the_best_of_a_kernel_naming_its_target_through_a_variable(tmp_path, gemm_path):
    """#41e, FALSE-REFUSAL: ``rewrite_target=TARGET_NAME`` (not a literal). The write-back's check
    found the target by reading the literal, found none, took the default ``swizzle``, and refused
    the genuine best ("differs outside 'swizzle'"). It checks the run's own target."""
    kernel = tmp_path / "gemm.py"
    kernel.write_text(_variable_target(gemm_path.read_text()))
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=1, in_place=True)
    order = catalog_source(GENUINE, ARGS).replace("def swizzle(", "def tile_order(")
    outcome = run.start(options, proposer=ScriptedProposer([("xcd", order)]))
    assert outcome.status == "finished" and outcome.report["best"]["name"] == "xcd"
    assert outcome.report["in_place"] == f"wrote the best kernel (xcd) into {kernel.resolve()}"
    assert "NUM_XCDS" in kernel.read_text() and "rewrite_target=TARGET_NAME" in kernel.read_text()
