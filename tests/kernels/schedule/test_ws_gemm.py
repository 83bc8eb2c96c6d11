"""kernels/schedule/ws_gemm.py: the warp-specialized Gluon GEMM. Gluon kernels do not run under
the Triton interpreter, so on the CPU the kernel is compiled for sm_90 (Triton's code generation
and ptxas), its configurations' shared memory counted, and its tile order (plain Triton) run
through the interpreter; numerics run on a GPU (marked ``gpu``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from swizzleperf.kernels.schedule import ws_gemm
from swizzleperf.kernels.schedule.persistent_gemm import SM90_SHARED_BYTES

BASE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "GROUP_M": 8}
#: cuBLAS's 320 x 128 tile: 256 rows for the 8 consumer warps, 64 for a second consumer of 4.
TALL = {**BASE, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_M_LOW": 64, "EPILOGUE_SPLIT": 2}


@pytest.mark.parametrize("meta", [BASE, {**BASE, "num_stages": 4, "EPILOGUE_SPLIT": 2},
                                  {**BASE, "BLOCK_N": 128, "num_warps": 4, "num_stages": 6}, TALL])
def test_compiles_for_sm_90_with_a_load_warp_and_wgmma(meta):
    """The PTX holds what makes it the kernel it claims to be: registers handed between warp
    groups (setmaxnreg), TMA loads and stores, asynchronous wgmma; Triton's shared memory count
    is ours plus at most 1 KiB of its own, within sm_90's 227 KiB."""
    kernel = ws_gemm.compile_for_hopper(meta, 4096, 1280, 8192)
    ptx = kernel.asm["ptx"]
    for instruction in ("setmaxnreg.dec", "setmaxnreg.inc", "wgmma.mma_async",
                        "cp.async.bulk.tensor.2d.shared::",   # a TMA load (::cta in 3.9, ::cluster in 3.6)
                        "cp.async.bulk.tensor.2d.global.shared::cta", "mbarrier.try_wait"):
        assert instruction in ptx, instruction
    assert 0 <= kernel.metadata.shared - ws_gemm.shared_bytes(meta) <= 1024
    assert kernel.metadata.shared <= SM90_SHARED_BYTES


def test_config_error_refuses_what_cannot_build():
    assert ws_gemm.config_error(BASE) is None
    assert "shared memory" in ws_gemm.config_error({**BASE, "num_stages": 4})   # 262 KB
    assert ws_gemm.config_error({**BASE, "num_stages": 4, "EPILOGUE_SPLIT": 2}) is None
    assert "num_warps" in ws_gemm.config_error({**BASE, "num_warps": 2})
    assert "multiple of 128" in ws_gemm.config_error({**BASE, "BLOCK_M": 64})
    assert "BLOCK_N" in ws_gemm.config_error({**BASE, "BLOCK_N": 512})
    assert "missing" in ws_gemm.config_error({"BLOCK_M": 128})
    assert ws_gemm.config_error(TALL) is None
    assert "BLOCK_M_LOW" in ws_gemm.config_error({**TALL, "BLOCK_M_LOW": 128})
    assert "registers" in ws_gemm.config_error({**TALL, "BLOCK_M": 128, "BLOCK_N": 256, "num_stages": 2})
    assert "shared memory" in ws_gemm.config_error({**TALL, "EPILOGUE_SPLIT": 1})   # 248 KB
    with pytest.raises(ValueError, match="shared memory"):
        ws_gemm.compile_for_hopper({**BASE, "num_stages": 4}, 256, 256, 256)


def test_matmul_refuses_rows_tma_cannot_address():
    """K or N not a multiple of 8 (bf16 rows not 16-byte aligned) or a transposed operand: a
    ValueError before anything launches (so this runs on the CPU)."""
    a, b = torch.ones(64, 72, dtype=torch.bfloat16), torch.ones(72, 300, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="B .* 16-byte"):
        ws_gemm.matmul(a, b, BASE)
    with pytest.raises(ValueError, match="A .* 16-byte"):
        ws_gemm.matmul(torch.ones(72, 64, dtype=torch.bfloat16).t(), b[:, :256], BASE)


def test_tile_order_is_a_permutation_in_groups_of_rows():
    """Every tile exactly once over all indices, for grids that the groups divide and that they
    do not; tiles 0 .. GROUP_M - 1 go down the first column of the first group."""
    code = """
        import json, torch, triton, triton.language as tl
        from swizzleperf.kernels.schedule.ws_gemm import tile_coordinates

        @triton.jit
        def order(out, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            for tile in range(num_pid_m * num_pid_n):
                pid_m, pid_n = tile_coordinates(tile, num_pid_m, num_pid_n, GROUP_M)
                tl.store(out + 2 * tile, pid_m)
                tl.store(out + 2 * tile + 1, pid_n)

        result = {}
        for m, n, g in ((8, 5, 8), (13, 7, 8), (3, 4, 8), (10, 3, 4)):
            out = torch.full((m * n, 2), -1, dtype=torch.int32)
            order[(1,)](out, m, n, g)
            result[f"{m}x{n}g{g}"] = out.tolist()
        print(json.dumps(result))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for key, pairs in result.items():
        m, rest = key.split("x")
        n, g = (int(x) for x in rest.split("g"))
        assert sorted(map(tuple, pairs)) == [(i, j) for i in range(int(m)) for j in range(n)], key
        assert [tuple(p) for p in pairs[:min(g, int(m))]] == [(i, 0) for i in range(min(g, int(m)))]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 1280, 8192), (300, 520, 200), (129, 264, 72), (700, 264, 136)])
@pytest.mark.parametrize("meta", [BASE, {**BASE, "num_stages": 4, "EPILOGUE_SPLIT": 2},
                                  {**BASE, "BLOCK_N": 128, "num_warps": 4, "num_stages": 6}, TALL])
def test_numerics_on_hopper(shape, meta):
    """Fresh random inputs, C poisoned with NaN: within bf16 rounding of the fp32 product,
    ragged edges included (TMA zero-fills loads and clips stores out of bounds), the second
    consumer's rows of a 320-row tile partly or wholly past M among them."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("needs Hopper (sm_90) or newer")
    M, N, K = shape
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    ws_gemm.matmul(a, b, meta, c=c)
    expected = a.float() @ b.float()
    assert not torch.isnan(c).any()
    assert float((c.float() - expected).norm() / expected.norm()) < 1e-2
