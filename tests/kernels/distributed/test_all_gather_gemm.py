"""kernels/distributed/all_gather_gemm.py on CPU: every pattern at world sizes 2 and 3 through
``runner.run_group`` (all ranks in one process, the Triton interpreter), a flag that never
comes, a catalog tile order, and the spec's sizes counted by hand. The GPU runs are
test_multigpu.py's (every kernel through ``bench --verify-only``).

The interpreter runs in a worker process with ``TRITON_INTERPRET=1`` (the convention of
tests/kernels: ``@triton.jit`` picks the interpreter when a module is imported, so the pytest
process, which imports kernels compiled elsewhere, must not switch it on for everyone).

Tolerance: ||C - ref|| / ||ref|| against the fp32 product; C is accumulated in fp32 and rounded
once to the input dtype. The interpreter (triton 3.9) converts fp32 to bf16 by truncation, not
rounding to nearest, which doubles the bf16 error (3.3e-3 here against 1.7e-3 rounded); fp16
rounds (2e-4). The spec's 1e-2 / 2e-3 hold with a margin of 3x and more; a row tile taken from
the wrong rank has error ~1.4.
"""
from __future__ import annotations

import pytest
from _interpreted import compile_for_sm90, interpret_kernel, spliced_copy

from swizzleperf.agent.verification.candidate import target_args
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.kernels.distributed import all_gather_gemm as kernel

KERNEL = "swizzleperf.kernels.distributed.all_gather_gemm"


def _interpret(body: str) -> object:
    """``body`` after the kernel tests' imports, under the Triton interpreter in a fresh process."""
    return interpret_kernel(KERNEL, body)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_pattern_on_cpu(world_size):
    """Two launches of each pattern in both dtypes; the patterns differ only in where the rows
    of A come from, so their outputs are identical (same errors to the last bit)."""
    errors = _interpret(
        "out = {p: {d: [c.error for c in runner.run_group(kernel.SPEC, %d, p, dtype=d)]\n"
        "           for d in ('bfloat16', 'float16')} for p in kernel.SPEC.patterns}\n"
        "print(json.dumps(out))\n" % world_size)
    # every pattern ran, the default first: push since 2026-11-25 (pull measured 4x slower than
    # every other pattern on two H100s, bench/results/dist_optimize_h100x2/ at commit 2f3ed18, so no longer the default)
    assert list(errors) == ["push", "push_copy_engine", "bulk_sync", "pull"]
    for pattern, by_dtype in errors.items():
        for dtype, rank_errors in by_dtype.items():
            limit = {"bfloat16": 5e-3, "float16": 4e-4}[dtype]
            assert len(rank_errors) == world_size
            assert all(0 < e < limit for e in rank_errors), (pattern, dtype, rank_errors)
            assert rank_errors == errors["pull"][dtype], (pattern, dtype)


@pytest.mark.parametrize("world_size", [2, 3])
def test_copy_engine_groups_share_one_flag(world_size):
    """push_copy_engine with CE_GROUPS=1: each peer's shard (two 16-row tiles, M = 32 W) is one
    copy and one flag, the first row tile's, written by the stream; the GEMM reads both row
    tiles after that one flag (waiting for the second tile's own flag, never written, would
    give up). The output equals pull's to the last bit."""
    out = _interpret(
        "w = %d\n"
        "spec = dataclasses.replace(kernel.SPEC,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 32 * w, 'N': 16 * w, 'K': 40}})\n"
        "meta = spec.meta_for('check', {'CE_GROUPS': 1})\n"
        "problem = spec.problems['check']\n"
        "heaps = runner.Heap.group(w, spec.heap_bytes(problem, w, 'bfloat16'))\n"
        "inputs = [spec.make_inputs(problem, r, w, 0) for r in range(w)]\n"
        "states = [spec.setup(h, x, problem, meta) for h, x in zip(heaps, inputs)]\n"
        "for epoch in (1, 2):\n"
        "    runner._launch_group(spec, heaps, states, 'push_copy_engine', epoch, meta)\n"
        "pull = [c.error for c in runner.run_group(spec, w, 'pull')]\n"
        "ours = [runner.relative_error(spec.output(s), spec.reference(inputs, r))\n"
        "        for r, s in enumerate(states)]\n"
        "print(json.dumps({'flags': states[0]['flags'].tolist(), 'ours': ours, 'pull': pull}))\n"
        % world_size)
    # rank 0's flags, [source rank, row tile]: each peer wrote its group's first flag, epoch 2
    assert out["flags"] == [0, 0] + [2, 0] * (world_size - 1)
    assert out["ours"] == out["pull"] and all(0 < e < 5e-3 for e in out["ours"])


def test_a_flag_that_never_comes_names_rank_and_flag():
    """Rank 1 skips its push: rank 0's GEMM gives up on its one remote row tile (M = 32: one
    16-row tile per rank, one column tile), rank 1's chunk 0, flag index 1 * 1 + 0, after
    4096 polls (Heap.group's bound), and the runner raises it. Two row tiles would cost a
    second give-up of ~2 s under the interpreter."""
    message = _interpret(
        "def steps(heap, state, pattern, epoch, meta):\n"
        "    ours = kernel.SPEC.steps(heap, state, pattern, epoch, meta)\n"
        "    if heap.rank == 1:\n"
        "        ours[0] = dataclasses.replace(ours[0], run=lambda: None)\n"
        "    return ours\n"
        "spec = dataclasses.replace(kernel.SPEC, steps=steps,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 32, 'N': 32, 'K': 16}})\n"
        "try:\n"
        "    runner.run_group(spec, 2, 'push', launches=1)\n"
        "    print(json.dumps('no error'))\n"
        "except SpinTimeout as exc:\n"
        "    print(json.dumps(str(exc)))\n")
    assert message.startswith("rank 0: gave up waiting for flag a_chunk_ready[1] (set by rank 1) "
                              "after 4096 polls: it holds 0"), message


@pytest.mark.parametrize("order", ["column-major", "grouped-m:4"])
def test_a_catalog_order_through_the_interpreter(tmp_path, order):
    """The swizzle replaced by a catalog member (spliced as the agent does), at W = 2 (4 x 2
    tiles: 2 row tiles per rank, 2 columns): column-major visits the remote rows before the
    local rows' second column; a grouped-m:4 group spans both ranks' rows."""
    target = catalog_source(order, target_args(open(kernel.__file__).read(), "swizzle"))
    errors = _interpret(
        spliced_copy(kernel.__file__, target, tmp_path / "candidate.py") +
        "print(json.dumps({p: [c.error for c in runner.run_group(module.SPEC, 2, p)]\n"
        "                  for p in ('pull', 'push')}))\n")
    for pattern, rank_errors in errors.items():
        assert all(0 < e < 5e-3 for e in rank_errors), (pattern, rank_errors)


def test_wrong_use_says_what_was_expected():
    import torch
    from swizzleperf.kernels.distributed.all_gather_gemm import SPEC
    from swizzleperf.kernels.distributed.heap import Heap

    with pytest.raises(ValueError, match="M and N must be multiples of the world size 3"):
        SPEC.make_inputs({"M": 50, "N": 48, "K": 8}, 0, 3, 0)
    heap = Heap.group(2, SPEC.heap_bytes(SPEC.problems["check"], 2, "bfloat16"))[0]
    state = SPEC.setup(heap, SPEC.make_inputs(SPEC.problems["check"], 0, 2, 0),
                       SPEC.problems["check"], SPEC.check_meta)
    with pytest.raises(ValueError, match="pattern must be one of"):
        SPEC.steps(heap, state, "fused", 1, SPEC.check_meta)
    with pytest.raises(ValueError, match="COMM_SMS must be in 1..3"):
        SPEC.steps(heap, state, "push", 1, {**SPEC.check_meta, "COMM_SMS": 4})
    assert state["c"].dtype == torch.bfloat16 and not heap.owns(state["c"])


def test_bench_problems_fit_one_h200_at_world_size_8():
    """Per rank at W = 8: the heap (the gathered A, the shard its own rows), B_r, C_r, the
    baseline's gathered A
    and C_r, and the verification's fp32 reference (all of A and C_r in fp32)."""
    from swizzleperf.kernels.distributed.all_gather_gemm import SPEC

    assert set(SPEC.bench_problems) <= set(SPEC.problems) and "check" in SPEC.problems
    for name in SPEC.bench_problems:
        p = SPEC.problems[name]
        M, N, K, w = p["M"], p["N"], p["K"], 8
        assert M % (w * SPEC.meta["BLOCK_M"]) == 0 and (N // w) % SPEC.meta["BLOCK_N"] == 0
        heap = SPEC.heap_bytes(p, w, "bfloat16")
        assert heap >= M * K * 2
        total = heap + 2 * (K * N // w + M * N // w) + 2 * (M * K + M * N // w) \
            + 4 * (M * K + K * N // w + M * N // w)
        assert total < 20e9, (name, total)   # far below 141 GB
    # counted by hand: llama70b-up-8k at W = 8 is 2 * 8192 * 3584 * 8192 FLOP per rank, and
    # each rank's 1024 x 8192 bf16 shard goes to 7 peers.
    p = SPEC.problems["llama70b-up-8k"]
    assert SPEC.flops(p, 8) == 2 * 8192 * 3584 * 8192
    assert SPEC.comm_bytes(p, 8, "bfloat16") == 7 * 1024 * 8192 * 2


def test_every_launch_compiles_for_sm_90():
    """``compile_check``: each pattern's kernels through Triton's code generation and ptxas for
    sm_90 (what the interpreter never runs), on CPU."""
    stdout = compile_for_sm90("all_gather_gemm")
    # each pattern twice: its pointer paths and its tensor-descriptor paths (as on Hopper)
    assert stdout.count("compiled for sm_90") == 2 * len(kernel.SPEC.patterns), stdout
    assert stdout.count("(tensor descriptors): compiled for sm_90") == len(kernel.SPEC.patterns), stdout


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_gemm_schedules_through_the_interpreter(world_size):
    """The per-rank GEMM data-parallel, with stream-K for the last wave, the last two and all tiles
    (kernels/schedule/persistent_gemm.py), in the pattern that waits on flags (push), on 3
    programs (the check problem's tiles do not fill the waves: stream-K pieces are handed over
    between programs). Numerics as the other patterns'; fp32 sums in another order only."""
    errors = _interpret(
        "out = [[c.error for c in runner.run_group(kernel.SPEC, %d, 'push', dtype='float16',\n"
        "        meta={'STREAM_K': s})] for s in (0, 1, 2, 3)]\n"
        "print(json.dumps(out))\n" % world_size)
    for rank_errors in errors:
        assert len(rank_errors) == world_size and all(0 < e < 6e-4 for e in rank_errors), errors


@pytest.mark.parametrize("pattern, config, world_size", [
    ("push_copy_engine", kernel.WS_TILE_CONFIGS[0], 2), ("push_copy_engine", kernel.WS_TILE_CONFIGS[1], 4),
    ("bulk_sync", kernel.WS_TILE_CONFIGS[1], 2)])
def test_the_warp_specialized_gemm_compiles_for_sm_90(pattern, config, world_size):
    """WS_GEMM, on a problem whose operands TMA can address (as on Hopper): the GEMM is the
    Gluon kernel, with a load warp, wgmma and TMA; in push_copy_engine its load warp acquires
    the peers' flags and fences the proxies before reading their rows through TMA (a 320-row
    tile spans two ranks' rows: 512 rows a rank). Gluon does not run in the
    interpreter: the numerics ran on H100s (bench/results/ws_all_gather_h100x2/)."""
    from swizzleperf.kernels.distributed import compile_check
    problem = {"M": 512 * world_size, "N": 256 * world_size, "K": 256}
    meta = dict(kernel.SPEC.meta_for("llama70b-qkv-4k", config), NUM_SMS=132)
    assert kernel.SPEC.constraints(problem, world_size, pattern, meta) is None
    compiled = compile_check.compile_steps("all_gather_gemm", problem, meta, pattern, world_size,
                                           streams=("main", ))
    assert "all_gather_gemm_gemm" not in compiled
    ptx = compiled["all_gather_gemm_ws"].asm["ptx"]
    waits = ("ld.global.sys.acquire", "fence.proxy.async.global") if pattern == "push_copy_engine" else ()
    for instruction in ("setmaxnreg", "wgmma.mma_async", "cp.async.bulk.tensor.2d") + waits:
        assert instruction in ptx, instruction
    if pattern == "bulk_sync":
        assert "sys.acquire" not in ptx


def test_ws_gemm_constraints():
    """WS_GEMM in configurations the Gluon kernel builds; patterns without its path (push, pull)
    take the same configurations with the Triton GEMM."""
    problem = kernel.SPEC.problems["llama70b-qkv-4k"]
    meta = lambda config: dict(kernel.SPEC.meta_for("llama70b-qkv-4k", config), NUM_SMS=132)  # noqa: E731
    for config in kernel.WS_TILE_CONFIGS:
        for pattern in kernel.PATTERNS:
            assert kernel.SPEC.constraints(problem, 2, pattern, meta(config)) is None
    assert "BLOCK_M_LOW" in kernel.SPEC.constraints(problem, 2, "bulk_sync", meta({"BLOCK_M_LOW": 64}))
    assert "shared memory" in kernel.SPEC.constraints(problem, 2, "bulk_sync",
                                                      meta({"WS_GEMM": 1, "EPILOGUE_SUBTILE": 0}))
