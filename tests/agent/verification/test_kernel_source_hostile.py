"""Kernel files as Python reads them, and within a size (#41).

A kernel file above ``MAX_KERNEL_BYTES`` (2 MiB; a 17 MB one ran 15 minutes and 6.7 GB for the
baseline and the expert alone) is refused in one line before anything else reads it. A Latin-1
kernel with its PEP 263 coding line (which Python compiles) is read in its encoding, not as UTF-8
(it was a ``UnicodeDecodeError``), and optimized like any other. ``--workdir`` naming a regular
file is one line."""
from __future__ import annotations

import time

import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.kernels.spec import KernelLoadError
from swizzleperf.sandbox import untrusted

ARGS = ["pid", "num_pid_m", "num_pid_n"]


def _huge(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    padding = "# padding " + "x" * 100 + "\n"
    kernel.write_text(gemm_path.read_text() + padding * (17_000_000 // len(padding)))
    return kernel


def test_a_17_mb_kernel_is_refused_in_one_line_at_once(tmp_path, gemm_path):
    kernel = _huge(tmp_path, gemm_path)
    start = time.monotonic()
    with pytest.raises(KernelLoadError) as info:
        load_spec(kernel)
    assert time.monotonic() - start < 2.0
    message = str(info.value)
    assert f"longer than the {untrusted.MAX_KERNEL_BYTES} bytes allowed" in message and "\n" not in message


def test_a_17_mb_kernel_is_one_line_from_the_command_line(tmp_path, gemm_path):
    kernel = _huge(tmp_path, gemm_path)
    proc = swizzleperf("optimize", str(kernel), "--iterations", "1", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "bytes allowed")


LATIN1_HEADER = "# -*- coding: latin-1 -*-\n# Ein Kernel für Matrizen, geprüft (Größe egal)\n"


def test_a_latin1_kernel_with_its_coding_line_is_read_and_optimized(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_bytes((LATIN1_HEADER + gemm_path.read_text()).encode("latin-1"))
    compile(kernel.read_bytes(), str(kernel), "exec")   # Python takes it
    assert "für" in untrusted.read_source(kernel)
    assert load_spec(kernel).rewrite_target
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=1)
    outcome = run.start(options, proposer=ScriptedProposer([("grouped", catalog_source("grouped-m:8", ARGS))]))
    assert outcome.status == "finished"
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]


def test_a_kernel_that_is_not_text_in_its_declared_encoding_is_one_line(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_bytes(b"# -*- coding: no-such-codec -*-\n" + gemm_path.read_bytes())
    with pytest.raises(KernelLoadError) as info:
        load_spec(kernel)
    assert "cannot be read as Python source" in str(info.value) and "\n" not in str(info.value)
    kernel.write_bytes(b"\xff\xfe" + gemm_path.read_bytes())     # not UTF-8, no coding line
    with pytest.raises(KernelLoadError):
        load_spec(kernel)


def test_a_workdir_that_is_a_file_is_one_line(tmp_path, gemm_path):
    (tmp_path / "afile").write_text("x")
    proc = swizzleperf("optimize", str(gemm_path), "--workdir", "afile", "--iterations", "1", cwd=tmp_path,
                       timeout=120)
    assert_one_line_error(proc, "--workdir afile is a file, not a folder")
