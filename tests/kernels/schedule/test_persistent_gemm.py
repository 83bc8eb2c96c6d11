"""kernels/schedule/persistent_gemm.py through kernels/gemm.py on CPU: every schedule (data-parallel,
stream-K of the last wave, of the last two, of every tile) on persistent grids of several sizes, with tensor
descriptors and with pointers, at a typical and a ragged shape, through the Triton interpreter;
the stream-K split and ranges counted by hand; a tile order that skips or repeats a tile is
NOT_PERMUTATION through the optimizer's verification.

Tensor descriptors: triton 3.9's interpreter runs them (host-side ``TensorDescriptor`` loads and
stores, zero-filled out of bounds), so both paths run here. The ragged shape (M = 33, N = 17,
K = 70) has rows of 140 and 34 bytes, not multiples of 16: no tensor map can describe them, so
it runs on pointers whatever is asked (``tma_supported``), as on a GPU.

Tolerance: ||C - ref|| / ||ref|| against the fp32 product, C rounded once to fp16 (2^-11 unit
roundoff: ~2e-4 seen) or bf16 (the interpreter truncates: ~3.4e-3 seen); the spec's 2e-3 / 1e-2.
A tile computed twice, missed, or a stream-K piece added twice or lost gives errors of order 1
(or NaN: C is poisoned first).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify
from swizzleperf.kernels.schedule.persistent_gemm import (cdiv, config_error, schedule_grid,
                                                          shared_bytes, split_tiles, tail_rows)


def _interpret(code: str) -> object:
    """``code`` under TRITON_INTERPRET=1 in a fresh process (``@triton.jit`` picks the
    interpreter at import: never in the pytest process); the JSON of its last stdout line."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_SCHEDULES = """
import json, torch
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.kernels.schedule.persistent_gemm import schedule_grid, split_tiles, tma_supported
module, spec = load_kernel({path!r})
shape, tiles, dtype = {shape!r}, {tiles!r}, {dtype!r}
rows = []
for seed, (tma, stream_k, programs, subtile) in enumerate({cases!r}):
    inputs = spec.make_inputs(shape, 10 + seed, "cpu", dtype)
    inputs["c"].fill_(float("nan"))
    spec.launch(inputs, **tiles, num_warps=4, num_stages=1, STREAM_K=stream_k, NUM_SMS=programs,
                TMA=tma, EPILOGUE_SUBTILE=subtile)
    ref = spec.reference(inputs).double()
    out = inputs["c"].double()
    num_tiles = -(-shape["M"] // tiles["BLOCK_M"]) * -(-shape["N"] // tiles["BLOCK_N"])
    rows.append(dict(tma=tma and tma_supported(inputs["a"], inputs["b"], inputs["c"]),
                     stream_k=stream_k, programs=programs, nan=bool(torch.isnan(out).any()),
                     error=float((out - ref).norm() / ref.norm()),
                     stream_k_tiles=num_tiles - split_tiles(
                         num_tiles, schedule_grid(num_tiles, programs, stream_k), stream_k)))
print(json.dumps(rows))
"""


@pytest.mark.parametrize("shape, tiles, dtype, tma_expected", [
    # 4 x 3 = 12 tiles of 32 x 32, K in 3 steps (the last 16 deep); rows of 160 / 144 / 144 bytes
    ({"M": 100, "N": 72, "K": 80}, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, "float16", True),
    # 3 x 2 = 6 tiles of 16 x 16, K in 5 steps (the last 6 deep), every edge ragged: pointers
    ({"M": 33, "N": 17, "K": 70}, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}, "bfloat16", False),
], ids=["typical", "ragged"])
def test_every_schedule_through_the_interpreter(gemm_path, shape, tiles, dtype, tma_expected):
    """12 tiles on 5 programs: stream-K 1 splits the last 2 tiles' 6 K steps over 5 programs
    (one or two steps each), stream-K 2 the last 7 (21 steps, 4 or 5 a program: pieces cross
    tile boundaries); on 4 programs the waves are full (no stream-K whatever is asked); on 7,
    the last 5 tiles, or all 12. Stream-K 3 gives all 12 to stream-K, on 16 programs too (more
    programs than tiles: 36 K steps, 2 or 3 a program). With C in two halves where descriptors
    run."""
    cases = [(tma, sk, p, int(tma and p == 5)) for tma in (True, False) for sk in (0, 1, 2, 3)
             for p in (4, 5, 7, 16) if p < 16 or sk == 3]
    rows = _interpret(_SCHEDULES.format(path=str(gemm_path), shape=shape, tiles=tiles, dtype=dtype,
                                        cases=cases))
    limit = {"float16": 2e-3, "bfloat16": 1e-2}[dtype]
    for case, row in zip(cases, rows):
        assert not row["nan"] and 0 < row["error"] < limit, (case, row)
        assert row["tma"] == (case[0] and tma_expected), (case, row)
    if shape["M"] == 100:   # stream-K tiles per case, counted by hand (the docstring)
        assert [r["stream_k_tiles"] for r in rows[:13]] == [0, 0, 0, 0, 2, 5, 0, 7, 12, 12, 12, 12, 12]


_TAIL = """
import json, torch
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.kernels.schedule.persistent_gemm import tail_rows
module, spec = load_kernel({path!r})
shape = {{"M": 100, "N": 72, "K": 80}}
rows = []
for seed, (tma, programs) in enumerate([(True, 5), (False, 5), (True, 4), (False, 3)]):
    inputs = spec.make_inputs(shape, 20 + seed, "cpu", "bfloat16")
    inputs["c"].fill_(float("nan"))
    spec.launch(inputs, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=1, NUM_SMS=programs,
                TMA=tma, TAIL_BLOCK_N=16)
    ref = spec.reference(inputs).double()
    out = inputs["c"].double()
    rows.append(dict(tail_rows=tail_rows(4, 3, 5, programs, 0.5), nan=bool(torch.isnan(out).any()),
                     error=float((out - ref).norm() / ref.norm())))
print(json.dumps(rows))
"""


def test_a_tail_of_narrower_tiles_through_the_interpreter(gemm_path):
    """12 tiles of 32 x 32 (M = 100, N = 72: the last row and column ragged) on 5 programs end
    after 3 tile times data-parallel; cut into 20 tiles of 32 x 16 (each 0.5 / 0.8 = 0.625 of a
    whole tile's time, ``TAIL_EFFICIENCY``) they end after 4 x 0.625 = 2.5, sooner than with one
    row cut (9 whole tiles 2, 2, 2, 2, 1 a program, then one tail tile each: 2.625), so
    ``tail_rows`` gives all four rows to the tail; on 4 and 3 programs no cut ends sooner than 3
    and 4, so none. Every case computes C whole (poisoned first), through descriptors and
    pointers."""
    rows = _interpret(_TAIL.format(path=str(gemm_path)))
    assert [r["tail_rows"] for r in rows] == [4, 4, 0, 0]
    for row in rows:
        assert not row["nan"] and 0 < row["error"] < 1e-2, row


def test_tail_rows_counted_by_hand():
    # 320 tiles of 128 x 256 at M = 4096, N = 2560 on 132 SMs end after 3 tile times: 26 rows
    # (260 tiles) whole, two waves less 4 tiles, then 6 rows of 20 tiles of 128 x 128 (0.625 each),
    # one a program from the last: 2.625 (5 rows leave 6 programs a third whole tile: 3; 7 rows
    # end at 2.625 too, and the tie goes to fewer)
    assert tail_rows(32, 10, 20, 132, 0.5) == 6
    # full waves (640 tiles at N = 5120 end after 5; no split ends sooner): none
    assert tail_rows(32, 20, 40, 132, 0.5) == 0
    assert tail_rows(4, 3, 5, 4, 0.5) == 0 and tail_rows(4, 3, 5, 5, 0.5) == 4
    # fewer tiles than programs: 2 x 3 whole tiles on 10 programs end after one tile time; one
    # row cut leaves a whole tile on programs 0..2 (still 1), both rows cut give programs 9..0 one
    # or two tail tiles (1.25): none. One row of 2 tiles cut into 4 ends after 0.625: all of it
    assert tail_rows(2, 3, 6, 10, 0.5) == 0 and tail_rows(1, 2, 4, 10, 0.5) == 1
    meta = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "STREAM_K": 0}
    assert config_error({**meta, "TAIL_BLOCK_N": 128}) is None
    assert "excludes STREAM_K=1" in config_error({**meta, "STREAM_K": 1, "TAIL_BLOCK_N": 128})
    for bad in (256, 96, 8):
        assert "TAIL_BLOCK_N must be 0 (no tail) or a power of two" in config_error({**meta, "TAIL_BLOCK_N": bad})


def test_cdiv_is_tritons_on_host_integers():
    import triton
    for a in (0, 1, 15, 16, 17, 4095, 4096, 4097, 1 << 40):
        for b in (1, 2, 16, 128, 132):
            assert cdiv(a, b) == triton.cdiv(a, b), (a, b)


def test_split_tiles_counted_by_hand():
    # 160 tiles of 128 x 256 on 132 SMs (M = 4096, N = 1280): a partial wave of 28
    assert split_tiles(160, 132, 0) == 160
    assert split_tiles(160, 132, 1) == 132            # the 28 of the last wave stream-K
    assert split_tiles(160, 132, 2) == 0              # and the full wave before: all of them
    assert split_tiles(264, 132, 1) == split_tiles(264, 132, 2) == 264   # full waves: none
    assert split_tiles(300, 132, 2) == 300 - 36 - 132
    assert split_tiles(100, 132, 1) == split_tiles(100, 132, 2) == 0     # under one wave
    assert split_tiles(160, 132, 3) == split_tiles(64, 132, 3) == 0      # every tile
    with pytest.raises(ValueError, match="STREAM_K must be one of"):
        split_tiles(10, 4, 4)
    with pytest.raises(ValueError, match="programs must be >= 1"):
        split_tiles(10, 0, 1)


def test_schedule_grid_launches_every_program_only_for_all_stream_k():
    # 64 tiles of 128 x 256 at M = 4096, N = 512 on 132 SMs
    assert [schedule_grid(64, 132, s) for s in (0, 1, 2)] == [64, 64, 64]
    assert schedule_grid(64, 132, 3) == 132
    assert schedule_grid(300, 132, 0) == schedule_grid(300, 132, 3) == 132
    assert schedule_grid(0, 132, 0) == 1


_RANGES = """
import json, torch, triton, triton.language as tl
from swizzleperf.kernels.schedule.persistent_gemm import stream_k_range, stream_k_segment

@triton.jit
def pieces(out, num_programs, units, k_iters):
    pid = tl.program_id(0)
    first, stop = stream_k_range(pid, num_programs, units)
    i = 0
    while stop > first:
        tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
        base = out + (pid * 16 + i) * 4
        tl.store(base, tile)
        tl.store(base + 1, k_lo)
        tl.store(base + 2, k_hi)
        tl.store(base + 3, start)
        stop = start
        i += 1

rows = {{}}
for programs, tiles, k_iters in {cases!r}:
    out = torch.full((programs * 16 * 4,), -1, dtype=torch.int32)
    pieces[(programs,)](out, programs, tiles * k_iters, k_iters)
    rows[f"{{programs}},{{tiles}},{{k_iters}}"] = out.view(programs, 16, 4).tolist()
print(json.dumps(rows))
"""


@pytest.mark.parametrize("programs, tiles, k_iters", [(5, 2, 3), (5, 12, 3), (7, 3, 2), (4, 9, 5)])
def test_stream_k_pieces_cover_every_k_step_once(programs, tiles, k_iters):
    """Each program's range walked backwards piece by piece: every (tile, K step) exactly once
    over all programs, at most one piece per program ends inside a tile (the hand-over slot is
    one per program), and a tile's finishing piece belongs to the highest program touching it
    (waits go to lower programs only). (7, 3, 2): fewer steps than programs, one step each."""
    out = _interpret(_RANGES.format(cases=[(programs, tiles, k_iters)]))
    covered = {}
    for pid, slots in enumerate(out[f"{programs},{tiles},{k_iters}"]):
        handovers = 0
        for tile, k_lo, k_hi, _ in (s for s in slots if s[0] >= 0):
            assert 0 <= k_lo < k_hi <= k_iters
            handovers += k_hi < k_iters
            for k in range(k_lo, k_hi):
                covered.setdefault((tile, k), []).append(pid)
        assert handovers <= 1, (pid, slots)
    assert sorted(covered) == [(t, k) for t in range(tiles) for k in range(k_iters)]
    assert all(len(p) == 1 for p in covered.values())
    for t in range(tiles):
        owners = [covered[(t, k)][0] for k in range(k_iters)]
        assert owners == sorted(owners) and covered[(t, k_iters - 1)][0] == max(owners)


def test_shared_memory_of_a_configuration_counted_by_hand():
    # 128 x 256 x 64, 4 stages: 4 * (128*64 + 64*256) * 2 B = 192 KiB of operands; C's tile
    # 128 x 256 x 2 B = 64 KiB whole (256 KiB: over sm_90's 227 KB) or 32 KiB in halves (224 KiB)
    meta = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "STREAM_K": 0}
    assert shared_bytes(meta, 2) == 256 * 1024
    assert "must fit 232448 B per program, got 262144 B" in config_error(meta)
    assert shared_bytes({**meta, "EPILOGUE_SUBTILE": 1}, 2) == 224 * 1024
    assert config_error({**meta, "EPILOGUE_SUBTILE": 1}) is None
    assert "STREAM_K must be one of" in config_error({**meta, "STREAM_K": 5})
    assert "missing ['num_stages']" in config_error({k: v for k, v in meta.items() if k != "num_stages"})


def test_warp_specialization_is_refused_where_it_compiles_to_the_same_kernel(monkeypatch):
    """Triton warp-specializes the loop from compute capability 10 only: on Hopper, ROCm and the
    interpreter the option builds the same kernel, so a configuration with it is refused (and so
    never timed twice), and the tuner's candidates leave it out."""
    from swizzleperf.kernels.schedule import gemm_tuning, persistent_gemm
    meta = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3, "STREAM_K": 0}
    for capability, effective in (((9, 0), False), ((10, 0), True)):
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.setattr(persistent_gemm.torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(persistent_gemm.torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(persistent_gemm, "_capability", lambda index, c=capability: c)
        assert persistent_gemm.warp_specialize_effective() is effective
        error = config_error({**meta, "WARP_SPECIALIZE": 1})
        assert (error is None) is effective
        assert effective or "compiles to the same kernel as WARP_SPECIALIZE=0" in error
        with_ws = [c for c in gemm_tuning.candidates(4096, 5120, 8192, 132) if c.get("WARP_SPECIALIZE")]
        assert bool(with_ws) is effective
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not persistent_gemm.warp_specialize_effective()


_REPEATS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Row-major, but tile index 5 computes tile 4's place again (tile 5's never)."""
    pid = tl.where(pid == 5, 4, pid)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n
'''
_SKIPS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Row-major shifted by one: the last tile index lands outside the grid, tile 0 never."""
    pid = pid + 1
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n
'''


@pytest.mark.parametrize("target, expected", [(_REPEATS, "computed more than once"),
                                              (_SKIPS, "never computed")], ids=["repeats", "skips"])
def test_a_tile_repeated_or_skipped_is_not_a_permutation(tmp_path, gemm_source, target, expected):
    """The persistent loop computes ``swizzle(tile)`` for every tile index once, over all
    programs' iterations and both loops (data-parallel and stream-K): the optimizer's
    permutation stage, which probes the target on every index of the grid, is the whole check."""
    path = tmp_path / "gemm_candidate.py"
    path.write_text(splice(gemm_source, "swizzle", target))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(3,)))
    assert result.verdict is Verdict.NOT_PERMUTATION, result.reason
    assert expected in result.reason and "default problem" in result.reason, result.reason


_SLOT = """
import json, torch, triton, triton.language as tl
from swizzleperf.kernels.schedule.persistent_gemm import slot_offsets

@triton.jit
def offsets(out, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :],
             slot_offsets(BLOCK_M, BLOCK_N))

rows = {{}}
for bm, bn in {cases!r}:
    out = torch.full((bm * bn,), -1, dtype=torch.int32)
    offsets[(1,)](out, bm, bn)
    rows[f"{{bm}}x{{bn}}"] = out.tolist()
print(json.dumps(rows))
"""


def test_slot_offsets_are_a_permutation_in_the_accumulators_order():
    """Every tile element gets its own place in the slot (a hand-over neither loses nor doubles
    an element), and the 32 lanes of a warp (16 rows; lane 4 g + t holds columns 8 j + 2 t and
    8 j + 2 t + 1 of rows g and g + 8) reach 32 consecutive floats for each of their registers."""
    cases = [(16, 16), (32, 32), (128, 256), (256, 128), (64, 64)]
    out = _interpret(_SLOT.format(cases=cases))
    for bm, bn in cases:
        slot = out[f"{bm}x{bn}"]
        assert sorted(slot) == list(range(bm * bn)), (bm, bn)
        for warp_rows in range(0, bm, 16):
            for j in range(bn // 8):
                for half in (0, 1):
                    for e in (0, 1):   # one register of every lane of the warp at these rows
                        lanes = [slot[(warp_rows + half * 8 + g) * bn + 8 * j + 2 * t + e]
                                 for g in range(8) for t in range(4)]
                        assert lanes == list(range(lanes[0], lanes[0] + 32)), (bm, bn, j, half, e)
