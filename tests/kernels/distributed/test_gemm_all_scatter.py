"""kernels/distributed/gemm_all_scatter.py on CPU: the four patterns at world sizes 2 and 3 through
``runner.run_group`` (all ranks in one process, Triton interpreter, in a worker with
``TRITON_INTERPRET=1``), a catalog tile order, a lost flag, and the sizes counted by hand.
GPU runs: test_multigpu.py.

Tolerance: ||C - ref|| / ||ref|| against fp32; C accumulates in fp32 and is rounded once to the
input dtype (the interpreter truncates fp32 to bf16: ~3.3e-3, against 1.7e-3 measured on an
H200). A tile missing on one rank leaves NaN (error inf); one from the wrong rank, error ~1.4.
"""
from __future__ import annotations

import pytest
from _interpreted import interpret_kernel, spliced_copy

from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.kernels.distributed import gemm_all_scatter as kernel


def _interpret(body: str) -> object:
    """``body`` after the kernel tests' imports, under the Triton interpreter in a fresh process."""
    return interpret_kernel("swizzleperf.kernels.distributed.gemm_all_scatter", body)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_pattern_on_cpu(world_size):
    errors = _interpret(
        "print(json.dumps({p: {d: [c.error for c in runner.run_group(kernel.SPEC, %d, p, dtype=d)]"
        " for d in ('bfloat16', 'float16')} for p in kernel.SPEC.patterns}))" % world_size)
    assert list(errors) == list(kernel.PATTERNS)
    for pattern, by_dtype in errors.items():
        for dtype, rank_errors in by_dtype.items():
            assert len(rank_errors) == world_size
            assert all(0 < e < kernel.SPEC.tolerance[dtype] / 2 for e in rank_errors), (
                pattern, dtype, rank_errors)
            # the patterns only move finished tiles: the same bits on every rank and pattern
            assert rank_errors == errors["bulk_sync"][dtype], (pattern, dtype)


def test_a_catalog_order_as_the_rewrite_target(tmp_path):
    """The tile order is the rewrite target: grouped-m:2 spliced in gives the same C."""
    target = catalog_source("grouped-m:2", ["pid", "num_pid_m", "num_pid_n"])
    errors = _interpret(
        spliced_copy(kernel.__file__, target, tmp_path / "gemm_all_scatter_grouped.py") +
        "print(json.dumps([c.error for c in runner.run_group(module.SPEC, 2, 'workgroup_specialized')]))")
    assert all(0 < e < 1e-2 for e in errors)


def test_a_lost_flag_names_rank_and_flag():
    """Rank 1's producer_consumer GEMM never runs: its scatter gives up on tile 0's flag."""
    message = _interpret(
        "def steps(heap, state, pattern, epoch, meta):\n"
        "    ours = kernel.SPEC.steps(heap, state, pattern, epoch, meta)\n"
        "    if heap.rank == 1:\n"
        "        ours[0] = dataclasses.replace(ours[0], run=lambda: None)\n"
        "    return ours\n"
        "spec = dataclasses.replace(kernel.SPEC, steps=steps,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 16, 'N': 32, 'K': 16}})\n"
        "try:\n"
        "    runner.run_group(spec, 2, 'producer_consumer', launches=1)\n"
        "    print(json.dumps('no error'))\n"
        "except SpinTimeout as exc:\n"
        "    print(json.dumps(str(exc)))\n")
    assert message.startswith("rank 1: gave up waiting for flag tile_ready[0] (set by rank 1)"), message


def test_sizes_counted_by_hand():
    p = {"M": 4096, "N": 4096, "K": 4096}
    assert kernel.SPEC.flops(p, 2) == 2 * 4096 * 2048 * 4096
    assert kernel.SPEC.comm_bytes(p, 4, "bfloat16") == 3 * 4096 * 1024 * 2
    assert set(kernel.SPEC.bench_problems) <= set(kernel.SPEC.problems)
    assert kernel.SPEC.knobs["pattern"] == kernel.PATTERNS
    with pytest.raises(ValueError, match="multiple of the world size 3"):
        kernel.make_inputs({"M": 4, "N": 8, "K": 4}, 0, 3, 0)


@pytest.mark.parametrize("pattern", ["bulk_sync", "producer_consumer", "fused_sequential"])
def test_stream_k_through_the_interpreter(pattern):
    """The patterns other than workgroup_specialized with stream-K over the last wave (the check
    problem's own meta is data-parallel): numerics as without."""
    errors = _interpret(
        "out = [[c.error for c in runner.run_group(kernel.SPEC, 2, %r, dtype='float16',\n"
        "        meta={'STREAM_K': 1})]]\n"
        "print(json.dumps(out))\n" % pattern)
    for rank_errors in errors:
        assert len(rank_errors) == 2 and all(0 < e < 6e-4 for e in rank_errors), errors


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_gemm_schedules_through_the_interpreter(world_size):
    """The per-rank GEMM data-parallel, with stream-K for the last wave, the last two and all tiles
    (kernels/schedule/persistent_gemm.py), in the pattern that waits on flags (workgroup_specialized), on 3
    programs (the check problem's tiles do not fill the waves: stream-K pieces are handed over
    between programs). Numerics as the other patterns'; fp32 sums in another order only."""
    errors = _interpret(
        "out = [[c.error for c in runner.run_group(kernel.SPEC, %d, 'workgroup_specialized', dtype='float16',\n"
        "        meta={'STREAM_K': s})] for s in (0, 1, 2, 3)]\n"
        "print(json.dumps(out))\n" % world_size)
    for rank_errors in errors:
        assert len(rank_errors) == world_size and all(0 < e < 6e-4 for e in rank_errors), errors


@pytest.mark.parametrize("pattern, config, instructions", [
    ("bulk_sync", kernel.WS_TILE_CONFIGS[1], ("cp.async.bulk.tensor.2d.global.shared::cta",)),
    ("producer_consumer", kernel.WS_TILE_CONFIGS[0],
     ("cp.async.bulk.tensor.2d.global.shared::cta", "cp.async.bulk.wait_group 0",
      "fence.proxy.async.global", "atom.global.gpu.release"))])
def test_the_warp_specialized_gemm_compiles_for_sm_90(pattern, config, instructions):
    """WS_GEMM at its two configurations, on a problem whose blocks TMA can address (as on
    Hopper): the local block's GEMM is the Gluon kernel, with a load warp and wgmma; bulk_sync's
    stores C through TMA (the 320-row tile's two consumers included), producer_consumer's too,
    and releases each tile's flag after its store has completed (not only read its shared
    memory) and a proxy fence. Gluon does not run in the interpreter: the
    numerics ran on two H100s (bench/results/ws_all_scatter_h100x2/)."""
    from swizzleperf.kernels.distributed import compile_check
    problem = {"M": 640, "N": 512, "K": 256}
    meta = dict(kernel.SPEC.meta_for("iris-4096", config), NUM_SMS=132)
    assert kernel.SPEC.constraints(problem, 2, pattern, meta) is None
    compiled = compile_check.compile_steps("gemm_all_scatter", problem, meta, pattern)
    assert "gemm_all_scatter_gemm" not in compiled
    ptx = compiled["gemm_all_scatter_gemm_ws"].asm["ptx"]
    for instruction in ("setmaxnreg", "wgmma.mma_async") + instructions:
        assert instruction in ptx, instruction


def test_ws_gemm_constraints():
    """Only configurations the Gluon kernel can build, a second consumer's rows only with it;
    patterns without its path take the same configurations with the Triton GEMM."""
    problem, tall = kernel.SPEC.problems["iris-4096"], kernel.WS_TILE_CONFIGS[1]
    meta = lambda config: dict(kernel.SPEC.meta_for("iris-4096", config), NUM_SMS=132)  # noqa: E731
    for pattern in kernel.PATTERNS:
        assert kernel.SPEC.constraints(problem, 2, pattern, meta(tall)) is None
    assert "BLOCK_M_LOW" in kernel.SPEC.constraints(problem, 2, "bulk_sync", meta({"BLOCK_M_LOW": 64}))
    assert kernel.SPEC.constraints(problem, 2, "producer_consumer", meta({"WS_GEMM": 1})) is None
    # 4 stages of 128 x 256 x 64 and C's whole tile: 256 KiB > 227
    assert "shared memory" in kernel.SPEC.constraints(problem, 2, "bulk_sync",
                                                      meta({"WS_GEMM": 1, "EPILOGUE_SUBTILE": 0}))


def test_producer_consumer_takes_the_triton_gemm_for_a_320_row_tile():
    """The scatter's flags are per BLOCK_M x BLOCK_N tile, so producer_consumer runs the 320-row
    configuration's tiles with the Triton GEMM (as on Hopper, compiled for sm_90)."""
    from swizzleperf.kernels.distributed import compile_check
    problem = {"M": 640, "N": 512, "K": 256}
    meta = dict(kernel.SPEC.meta_for("iris-4096", kernel.WS_TILE_CONFIGS[1]), NUM_SMS=132)
    compiled = compile_check.compile_steps("gemm_all_scatter", problem, meta, "producer_consumer")
    assert set(compiled) == {"gemm_all_scatter_gemm", "gemm_all_scatter_scatter"}


def test_workgroup_specialized_takes_no_stream_k():
    """triton 3.6 does not build workgroup_specialized with stream-K tiles: the policy must not
    propose it (the other patterns keep STREAM_K)."""
    problem = kernel.SPEC.problems["iris-4096"]
    meta = dict(kernel.SPEC.meta_for("iris-4096", {"STREAM_K": 1}), NUM_SMS=132)
    assert "STREAM_K" in kernel.SPEC.constraints(problem, 2, "workgroup_specialized", meta)
    assert kernel.SPEC.constraints(problem, 2, "producer_consumer", meta) is None
    assert not [c for c in kernel.SPEC.space("iris-4096", 2, 132)
                if c["pattern"] == "workgroup_specialized" and c.get("STREAM_K")]
