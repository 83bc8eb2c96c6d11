"""#41, round six: ``optimize --app CMD --kernel K`` on a kernel file with a UTF-8 BOM (LF or CRLF)
or a ``coding: latin-1`` line crashed in ``prepare`` (``read_text``: the BOM reached ast.parse,
Latin-1 a UnicodeDecodeError), and ``eval --apps`` refused the same kernel ("its file does not
parse", agent/capture/bottleneck.py). The file is read as Python reads it, and user.diff, the
patched copy and ``--in-place`` keep its encoding, BOM and line endings."""
from __future__ import annotations

import codecs
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from swizzleperf.agent.capture import bottleneck, user_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.sandbox.write_back import source_text

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"
LATIN = "# -*- coding: latin-1 -*-\n# Übersetzung: café\n"


def _kernel_bytes(variant: str) -> bytes:
    text = (APPS / "transpose" / "kernel.py").read_text()
    if variant == "latin1":
        return (LATIN + text).encode("latin-1")
    data = codecs.BOM_UTF8 + ("# größe: π\n" + text).encode()
    return data.replace(b"\n", b"\r\n") if variant == "bom_crlf" else data


@pytest.fixture(scope="module", params=["bom", "bom_crlf", "latin1"])
def encoded(request, tmp_path_factory):
    """The transpose app with its kernel file in ``variant``'s bytes, captured, one verified run."""
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.proposers.scripted import ScriptedProposer
    work = tmp_path_factory.mktemp(request.param)
    folder = work / "user"
    folder.mkdir()
    (folder / "app.py").write_text((APPS / "transpose" / "app.py").read_text())
    data = _kernel_bytes(request.param)
    (folder / "kernel.py").write_bytes(data)
    prepared = user_kernel.prepare(f"{INTERPRET} {folder / 'app.py'}", "transpose_kernel", work)
    outcome = run.start(run.RunOptions(kernel=str(prepared.module_path), hw="h100", iterations=1, workdir=str(work)),
                        proposer=ScriptedProposer([("col", catalog_source("column-major", prepared.lifted.arg_names))]))
    return request.param, data, prepared, outcome


def test_the_kernel_is_captured_as_python_reads_it(encoded):
    variant, data, prepared, _ = encoded
    assert prepared.original == source_text(data).removeprefix("\ufeff")
    assert not prepared.original.startswith("\ufeff")
    assert prepared.lifted.target_name in source_text(prepared.module_path.read_bytes())


def test_user_diff_and_in_place_keep_encoding_bom_and_line_endings(encoded):
    variant, data, prepared, outcome = encoded
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    prepared.user_file.write_bytes(data)
    best = {**outcome.report["best"], "kind": "candidate"}
    outcome = SimpleNamespace(run_dir=outcome.run_dir, status="finished", report={**outcome.report, "best": best})
    summary = user_kernel.finish(outcome, prepared, in_place=True, test=None)
    assert summary["in_place"] == f"applied to {prepared.user_file}"
    written = prepared.user_file.read_bytes()
    assert written == Path(summary["patched_file"]).read_bytes() != data
    diff = Path(summary["user_diff"]).read_bytes()
    assert b"+" in diff and b"-" in diff
    if variant == "latin1":
        assert written.startswith(LATIN.encode("latin-1")) and LATIN.encode("latin-1") in data
        assert "Übersetzung: café".encode("latin-1") in written
        written.decode("latin-1")
        with pytest.raises(UnicodeDecodeError):
            written.decode("utf-8")
    else:
        assert written.startswith(codecs.BOM_UTF8) and written.count(codecs.BOM_UTF8) == 1
        assert "größe: π".encode() in written
    crlf = variant == "bom_crlf"
    for blob in (written, diff):
        assert (blob.count(b"\r\n") == blob.count(b"\n")) if crlf else b"\r" not in blob
    compile(written, "kernel.py", "exec")   # Python reads it back


@pytest.mark.parametrize("variant", ["bom", "bom_crlf", "latin1"])
def test_eval_apps_does_not_refuse_the_kernel_as_unparseable(tmp_path, variant, monkeypatch):
    """``eval --apps``' choice (bottleneck.why_not) reads the kernel file as Python does: the lift
    gets its text (the lift itself is tested on text in test_lift.py)."""
    path = tmp_path / "kernel.py"
    path.write_bytes(_kernel_bytes(variant))
    seen = {}

    def lift(source, kernel, launch, filename):
        seen["source"] = source
        compile(source, filename, "exec")   # what the lift's ast.parse met
        return SimpleNamespace(kind="lifted")
    monkeypatch.setattr(bottleneck, "lift", lift)
    row = SimpleNamespace(programs=12, l2_hit_rate=None, file=str(path), kernel="transpose_kernel", launch=lambda: None)
    assert bottleneck.why_not(row) == (None, "lifted")
    assert not seen["source"].startswith("\ufeff") and "transpose_kernel" in seen["source"]


def test_a_latin1_kernel_in_a_folder_latin1_cannot_name_is_captured(tmp_path):
    """The generated module is written in the kernel file's own encoding: the user's folder path
    went into it as a ``repr``, which latin-1 cannot hold for a folder named in CJK (round ten of
    #41: a traceback once the writer stopped falling back to UTF-8). Paths go in as ASCII escapes."""
    folder = tmp_path / "用户" / "user"
    folder.mkdir(parents=True)
    (folder / "app.py").write_text((APPS / "transpose" / "app.py").read_text())
    (folder / "kernel.py").write_bytes(_kernel_bytes("latin1"))
    prepared = user_kernel.prepare(f"{INTERPRET} {folder / 'app.py'}", "transpose_kernel", tmp_path / "work")
    data = prepared.module_path.read_bytes()
    data.decode("latin-1")
    assert "用户".encode("latin-1", "ignore") == b"" and "\\u7528\\u6237" in source_text(data)
    assert prepared.lifted.target_name in source_text(data)
