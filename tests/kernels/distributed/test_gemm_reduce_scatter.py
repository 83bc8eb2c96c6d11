"""kernels/distributed/gemm_reduce_scatter.py on CPU: both patterns at world sizes 2 and 3 through
``runner.run_group`` (all ranks in one process, the Triton interpreter), a flag that never
comes, catalog tile orders, and the spec's sizes counted by hand. The GPU runs are
test_multigpu.py's (every kernel through ``bench --verify-only``).

The interpreter runs in a worker process with ``TRITON_INTERPRET=1`` (the convention of
tests/kernels: ``@triton.jit`` picks the interpreter when a module is imported, so the pytest
process must not switch it on for everyone).

Tolerance: ||out - ref|| / ||ref|| against the fp32 sum of the W products. Two roundings to
the input dtype: each partial in the staging buffer and the output; the sum is accumulated in
fp32. Rounded to nearest (GPUs) that is ~2.4e-3 in bf16 and ~3e-4 in fp16 (counted with torch
at W = 2 and 8); the interpreter (triton 3.9) truncates fp32 to bf16, which doubles it (5.5e-3
at W = 2, 5.9e-3 at W = 3). The spec's 1e-2 / 2e-3 hold; a missing partial has error ~1/sqrt(W).
"""
from __future__ import annotations

import pytest
from _interpreted import compile_for_sm90, interpret_kernel, spliced_copy

from swizzleperf.agent.verification.candidate import target_args
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.kernels.distributed import gemm_reduce_scatter as kernel

KERNEL = "swizzleperf.kernels.distributed.gemm_reduce_scatter"


def _interpret(body: str) -> object:
    """``body`` after the kernel tests' imports, under the Triton interpreter in a fresh process."""
    return interpret_kernel(KERNEL, body)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_pattern_on_cpu(world_size):
    """Two launches of each pattern in both dtypes; bulk_sync and producer_consumer sum the same
    slots in the same order, so their outputs are identical (same errors to the last bit);
    epilogue_reduce sums its own partial unrounded (its own error, within the same bound; on the
    CPU in its two launches: the other owners' tiles, then the own ones), and push_copy_engine
    sums its own tiles in their epilogues as epilogue_reduce does (SUM_IN_EPILOGUE=1, its default)."""
    errors = _interpret(
        "out = {p: {d: [c.error for c in runner.run_group(kernel.SPEC, %d, p, dtype=d)]\n"
        "           for d in ('bfloat16', 'float16')} for p in kernel.SPEC.patterns}\n"
        "print(json.dumps(out))\n" % world_size)
    assert list(errors) == ["bulk_sync", "producer_consumer", "epilogue_reduce", "push_copy_engine"]
    for pattern, by_dtype in errors.items():
        for dtype, rank_errors in by_dtype.items():
            limit = {"bfloat16": 8e-3, "float16": 6e-4}[dtype]
            assert len(rank_errors) == world_size
            assert all(0 < e < limit for e in rank_errors), (pattern, dtype, rank_errors)
            if pattern == "producer_consumer":
                assert rank_errors == errors["bulk_sync"][dtype], (pattern, dtype)
            if pattern == "push_copy_engine":
                assert rank_errors == errors["epilogue_reduce"][dtype], (pattern, dtype)


def test_copy_engine_slices_and_where_it_sums():
    """push_copy_engine at W = 2 with its other owners' rows in one, two or four GEMM launches
    (M = 128: four 16-row tiles per owner, CE_GROUPS=4: a copy per row tile), the peers'
    partials added first or in the epilogue; in the epilogue it sums as epilogue_reduce does,
    to the last bit, with the partials loaded through pointers or through the staging's
    descriptor (SUM_TMA, C stored whole or in halves: EPILOGUE_SUBTILE)."""
    errors = _interpret(
        "spec = dataclasses.replace(kernel.SPEC,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 128, 'N': 32, 'K': 32}})\n"
        "runs = {f'{s}/{e}/{t}/{h}': [c.error for c in runner.run_group(spec, 2, 'push_copy_engine',\n"
        "            meta={'CE_GROUPS': 4, 'SLICES': s, 'SUM_IN_EPILOGUE': e, 'SUM_TMA': t,\n"
        "                  'EPILOGUE_SUBTILE': h}, dtype='float16')]\n"
        "        for s, e, t, h in ((1, 1, 0, 0), (2, 0, 0, 0), (4, 0, 0, 0), (4, 1, 0, 0),\n"
        "                           (2, 1, 1, 0), (2, 1, 1, 1))}\n"
        "runs['epilogue_reduce'] = [c.error for c in runner.run_group(spec, 2, 'epilogue_reduce',\n"
        "                                                             dtype='float16')]\n"
        "print(json.dumps(runs))\n")
    assert all(0 < e < 6e-4 for run in errors.values() for e in run), errors
    assert (errors["1/1/0/0"] == errors["4/1/0/0"] == errors["2/1/1/0"] == errors["2/1/1/1"]
            == errors["epilogue_reduce"]), errors
    assert kernel.copy_engine_slices(64, {"BLOCK_M": 16, "CE_GROUPS": 4, "SLICES": 2}) == [(0, 2), (2, 4)]
    assert kernel.copy_engine_slices(40, {"BLOCK_M": 16, "CE_GROUPS": 2, "SLICES": 4}) == [(0, 2), (2, 3)]


def test_copy_engine_groups_share_one_flag():
    """push_copy_engine with CE_GROUPS=1 at W = 2 (M = 64: two 16-row tiles per owner, N = 32:
    two column tiles): each owner's rows go over in one copy with one flag, (row tile 0, source)
    = index 0 * 2 + source, written by the stream; the own-rows GEMM sums all four tiles after
    it (waiting on a tile's own flag, never written, would give up). Two launches: epoch 2."""
    out = _interpret(
        "spec = dataclasses.replace(kernel.SPEC,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 64, 'N': 32, 'K': 32}})\n"
        "meta = spec.meta_for('check', {'CE_GROUPS': 1})\n"
        "problem = spec.problems['check']\n"
        "heaps = runner.Heap.group(2, spec.heap_bytes(problem, 2, 'bfloat16'))\n"
        "inputs = [spec.make_inputs(problem, r, 2, 0) for r in range(2)]\n"
        "states = [spec.setup(h, x, problem, meta) for h, x in zip(heaps, inputs)]\n"
        "for epoch in (1, 2):\n"
        "    runner._launch_group(spec, heaps, states, 'push_copy_engine', epoch, meta)\n"
        "errors = [runner.relative_error(spec.output(s), spec.reference(inputs, r))\n"
        "          for r, s in enumerate(states)]\n"
        "print(json.dumps({'flags': [s['flags'].tolist() for s in states], 'errors': errors}))\n")
    assert out["flags"][0] == [0, 2] + [0] * 6 and out["flags"][1] == [2] + [0] * 7
    assert all(0 < e < 8e-3 for e in out["errors"]), out["errors"]


@pytest.mark.parametrize("sum_tma", [0, 1])
def test_copy_engine_own_rows_wait_once_per_group_and_for_each_group(sum_tma):
    """push_copy_engine at W = 2 on two programs (M = 128: four 16-row tiles per owner, N = 32:
    two column tiles, CE_GROUPS=2: row tiles 0-1 and 2-3 in two copies, one flag each): rank 1's
    copy of the second group never comes, so rank 0's own rows, whose programs each sum tiles of
    both groups (tiles p, p + 2, ...: rows 0 then 2), acquire the first group's flag once and
    still wait for the second's, (row tile 2, source 1) = index 5, and give up there; the
    partials loaded through pointers or the staging's descriptor (SUM_TMA)."""
    message = _interpret(
        "original = kernel.copy_engine_push\n"
        "def some_copies(heap, copies, *rest):\n"
        "    original(heap, [c for c in copies if heap.rank == 0 or c[2] < 4], *rest)\n"
        "kernel.copy_engine_push = some_copies\n"
        "spec = dataclasses.replace(kernel.SPEC,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 128, 'N': 32, 'K': 32}})\n"
        "try:\n"
        "    runner.run_group(spec, 2, 'push_copy_engine', launches=1,\n"
        "                     meta={'CE_GROUPS': 2, 'SLICES': 2, 'NUM_SMS': 2, 'SUM_TMA': %d})\n"
        "    print(json.dumps('no error'))\n"
        "except SpinTimeout as exc:\n"
        "    print(json.dumps(str(exc)))\n" % sum_tma)
    assert message.startswith("rank 0: gave up waiting for flag partial_tile_ready[5] (set by "
                              "rank 1)"), message


def test_a_flag_that_never_comes_names_rank_and_flag():
    """Rank 1 skips its GEMM: rank 0's reduce waits for rank 1's partial of its one tile first
    (arrival order: source r - 1 first; M = 32, N = 16: one 16 x 16 tile per owner) and gives
    up on flag (tile 0, source 1) = index 1 after 4096 polls (Heap.group's bound)."""
    message = _interpret(
        "def steps(heap, state, pattern, epoch, meta):\n"
        "    ours = kernel.SPEC.steps(heap, state, pattern, epoch, meta)\n"
        "    if heap.rank == 1:\n"
        "        ours[0] = dataclasses.replace(ours[0], run=lambda: None)\n"
        "    return ours\n"
        "spec = dataclasses.replace(kernel.SPEC, steps=steps,\n"
        "    problems={**kernel.SPEC.problems, 'check': {'M': 32, 'N': 16, 'K': 32}})\n"
        "try:\n"
        "    runner.run_group(spec, 2, 'producer_consumer', launches=1)\n"
        "    print(json.dumps('no error'))\n"
        "except SpinTimeout as exc:\n"
        "    print(json.dumps(str(exc)))\n")
    assert message.startswith("rank 0: gave up waiting for flag partial_tile_ready[1] (set by "
                              "rank 1) after 4096 polls: it holds 0"), message


@pytest.mark.parametrize("order", ["column-major", "grouped-m:4"])
def test_a_catalog_order_through_the_interpreter(tmp_path, order):
    """The swizzle replaced by a catalog member (spliced as the agent does), at W = 2 in the
    GEMM's rank-relative grid (4 x 3 tiles: 2 rounds of the 2 owners) and in the reduce's grid
    (2 x 3, where grouped-m:4 makes one partial group)."""
    target = catalog_source(order, target_args(open(kernel.__file__).read(), "swizzle"))
    errors = _interpret(
        spliced_copy(kernel.__file__, target, tmp_path / "candidate.py") +
        "print(json.dumps([c.error for c in runner.run_group(module.SPEC, 2, 'producer_consumer')]))\n")
    assert all(0 < e < 8e-3 for e in errors), errors


def test_wrong_use_says_what_was_expected():
    import torch
    from swizzleperf.kernels.distributed.gemm_reduce_scatter import SPEC
    from swizzleperf.kernels.distributed.heap import Heap

    with pytest.raises(ValueError, match="M and K must be multiples of the world size 3"):
        SPEC.make_inputs({"M": 48, "N": 40, "K": 50}, 0, 3, 0)
    heap = Heap.group(2, SPEC.heap_bytes(SPEC.problems["check"], 2, "bfloat16"))[0]
    state = SPEC.setup(heap, SPEC.make_inputs(SPEC.problems["check"], 0, 2, 0),
                       SPEC.problems["check"], SPEC.check_meta)
    with pytest.raises(ValueError, match="pattern must be one of"):
        SPEC.steps(heap, state, "fused", 1, SPEC.check_meta)
    with pytest.raises(ValueError, match="COMM_SMS must be in 1..3"):
        SPEC.steps(heap, state, "producer_consumer", 1, {**SPEC.check_meta, "COMM_SMS": 0})
    # the staging is in the input dtype (half the bytes of fp32 on NVLink), the output outside
    assert state["staging"].shape == (2, 24, 40) and state["staging"].dtype == torch.bfloat16
    assert heap.owns(state["staging"]) and not heap.owns(state["out"])


def test_bench_problems_fit_one_h200_at_world_size_8():
    """Per rank at W = 8: the heap (staging [W, M/W, N]), A_r, B_r, the output, the baseline's
    partial [M, N] and output, and the verification's gathered inputs (W x (A_r + B_r))."""
    from swizzleperf.kernels.distributed.gemm_reduce_scatter import SPEC

    assert set(SPEC.bench_problems) <= set(SPEC.problems) and "check" in SPEC.problems
    for name in SPEC.bench_problems:
        p = SPEC.problems[name]
        M, N, K, w = p["M"], p["N"], p["K"], 8
        assert M % (w * SPEC.meta["BLOCK_M"]) == 0 and (K // w) % SPEC.meta["BLOCK_K"] == 0
        heap = SPEC.heap_bytes(p, w, "bfloat16")
        assert heap >= M * N * 2
        total = heap + 2 * (M * K // w + K // w * N + M // w * N) + 2 * (M * N + M // w * N) \
            + w * 2 * (M * K // w + K // w * N)
        assert total < 20e9, (name, total)   # far below 141 GB
    # counted by hand: llama70b-down-8k at W = 8 is 2 * 8192 * 8192 * 3584 FLOP per rank, and
    # each rank sends the 7 other owners their 1024 x 8192 bf16 rows of its partial.
    p = SPEC.problems["llama70b-down-8k"]
    assert SPEC.flops(p, 8) == 2 * 8192 * 8192 * 3584
    assert SPEC.comm_bytes(p, 8, "bfloat16") == 7 * 1024 * 8192 * 2


def test_every_launch_compiles_for_sm_90():
    """``compile_check``: each pattern's kernels through Triton's code generation and ptxas for
    sm_90 (what the interpreter never runs), on CPU."""
    stdout = compile_for_sm90("gemm_reduce_scatter")
    # each pattern twice: its pointer paths and its tensor-descriptor paths (as on Hopper)
    assert stdout.count("compiled for sm_90") == 2 * len(kernel.SPEC.patterns), stdout
    assert stdout.count("(tensor descriptors): compiled for sm_90") == len(kernel.SPEC.patterns), stdout


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_gemm_schedules_through_the_interpreter(world_size):
    """The per-rank GEMM data-parallel, with stream-K for the last wave, the last two and all tiles
    (kernels/schedule/persistent_gemm.py), in the pattern that waits on flags (producer_consumer), on 3
    programs (the check problem's tiles do not fill the waves: stream-K pieces are handed over
    between programs). Numerics as the other patterns'; fp32 sums in another order only."""
    errors = _interpret(
        "out = [[c.error for c in runner.run_group(kernel.SPEC, %d, 'producer_consumer', dtype='float16',\n"
        "        meta={'STREAM_K': s})] for s in (0, 1, 2, 3)]\n"
        "print(json.dumps(out))\n" % world_size)
    for rank_errors in errors:
        assert len(rank_errors) == world_size and all(0 < e < 6e-4 for e in rank_errors), errors


def test_epilogue_reduce_refuses_two_waves_of_stream_k_in_one_line():
    """With STREAM_K=2 a program's stream-K range spans more than a tile, so two ranks' programs
    could each wait for what the other does next (the module's constraint): the space and the
    launch both refuse it in one line; STREAM_K 0 and 1 pass."""
    problem = kernel.SPEC.problems["llama70b-o-4k"]
    meta = {**kernel.SPEC.meta_for("llama70b-o-4k"), "NUM_SMS": 132}
    assert "STREAM_K 0 or 1" in kernel.SPEC.constraints(problem, 2, "epilogue_reduce", {**meta, "STREAM_K": 2})
    assert kernel.SPEC.constraints(problem, 2, "epilogue_reduce", {**meta, "STREAM_K": 1}) is None
    assert kernel.SPEC.constraints(problem, 2, "bulk_sync", {**meta, "STREAM_K": 2}) is None


def test_the_warp_specialized_own_rows_compile_for_sm_90():
    """push_copy_engine with WS_OWN at the bench tiles (128 x 256 x 64, row tiles dividing the
    rows, as on Hopper): its own rows are the Gluon kernel, which builds for sm_90 with the flag
    wait's acquire, the proxy fence before the partials' TMA loads, and a load warp."""
    from swizzleperf.kernels.distributed import compile_check
    problem = {"M": 512, "N": 512, "K": 256}
    meta = dict(kernel.SPEC.meta_for("llama70b-o-4k", {"WS_OWN": 1}), NUM_SMS=132)
    compiled = compile_check.compile_steps("gemm_reduce_scatter", problem, meta, "push_copy_engine")
    ptx = compiled["gemm_reduce_scatter_own_ws"].asm["ptx"]
    for instruction in ("ld.global.sys.acquire", "fence.proxy.async.global", "setmaxnreg",
                        "wgmma.mma_async"):
        assert instruction in ptx, instruction
    assert "gemm_reduce_scatter_phase" in compiled   # the other owners' rows stay Triton's
