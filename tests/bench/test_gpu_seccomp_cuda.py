"""bench/gpu_seccomp_cuda.py on the CPU: every variant's filter is installed in a fresh process and
refuses a unix socket exactly where it names that refusal; without a CUDA driver each says so."""
from __future__ import annotations

import ctypes.util

import pytest

from bench import gpu_seccomp_cuda
from swizzleperf import sandbox

pytestmark = pytest.mark.skipif(not sandbox._seccomp()[0], reason=f"no seccomp filter here: {sandbox._seccomp()[1]}")


def test_each_variant_refuses_a_unix_socket_only_where_it_says_so():
    names = [name for name, _ in gpu_seccomp_cuda.variants()]
    assert names == ["all", *sandbox.SECCOMP_REFUSALS, "none"]
    for name, refused in gpu_seccomp_cuda.variants():
        result = gpu_seccomp_cuda.try_variant(refused)
        assert "error" not in result, (name, result)
        assert result["unix_socket"] == ("EPERM" if "unix_socket" in refused else "made"), (name, result)
        if ctypes.util.find_library("cuda") is None:
            assert result["cuInit"] is None and result["why"].startswith("no CUDA driver here"), result


def test_the_main_writes_every_variant(tmp_path, capsys):
    import json
    assert gpu_seccomp_cuda.main(["--out", str(tmp_path / "out.json")]) == 0
    assert set(json.loads((tmp_path / "out.json").read_text())) == {n for n, _ in gpu_seccomp_cuda.variants()}
    assert capsys.readouterr().out.startswith("all ")
