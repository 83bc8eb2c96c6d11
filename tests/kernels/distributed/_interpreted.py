"""Helpers of the distributed-kernel tests: code in a fresh Python under the Triton interpreter
(``@triton.jit`` picks the interpreter when a module is imported, so the pytest process, which
imports kernels compiled elsewhere, must not switch it on for everyone: the convention of
tests/kernels), a kernel module with another tile order spliced in, and the sm_90 build of a
kernel's launches without a GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def interpret(code: str, timeout: int = 300, script: Path | None = None) -> object:
    """Run ``code`` (dedented) with ``TRITON_INTERPRET=1`` in a fresh process, from the file
    ``script`` where given (spawned workers re-import their main module); return the JSON of
    its last stdout line. Fails the test with the process's output when it exits non-zero."""
    code = textwrap.dedent(code)
    if script is not None:
        script.write_text(code)
        command = [sys.executable, str(script)]
    else:
        command = [sys.executable, "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def interpret_kernel(kernel: str, body: str) -> object:
    """``body`` under the interpreter (:func:`interpret`) after the imports the kernel tests use:
    ``json``, ``dataclasses``, the module ``kernel`` (dotted name) as ``kernel``, ``runner`` and
    ``SpinTimeout``."""
    return interpret(f"import dataclasses, json\nimport {kernel} as kernel\n"
                     "from swizzleperf.kernels.distributed import runner\n"
                     "from swizzleperf.kernels.distributed.heap import SpinTimeout\n" + body)


def spliced_copy(kernel_file: str, target: str, path: Path) -> str:
    """Write the kernel module at ``kernel_file`` with its ``swizzle`` replaced by ``target`` (as
    the optimizer splices a candidate) to ``path``; return code that imports it as ``module``."""
    from swizzleperf.agent.verification.candidate import splice
    path.write_text(splice(Path(kernel_file).read_text(), "swizzle", target))
    return ("import importlib.util\n"
            f"module_spec = importlib.util.spec_from_file_location({path.stem!r}, {str(path)!r})\n"
            "module = importlib.util.module_from_spec(module_spec)\n"
            "module_spec.loader.exec_module(module)\n")


def compile_for_sm90(kernel: str) -> str:
    """``python -m swizzleperf.kernels.distributed.compile_check KERNEL`` (interpreter off); its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "swizzleperf.kernels.distributed.compile_check", kernel],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout
