"""Triton kernels of the dispatch probe (profiling/dispatch_probe.py), imported only when a probe
runs. ``%smid``, ``%globaltimer`` and ``%clock64`` are read through inline PTX; each read takes a
value it depends on, so that it is not moved across the work it brackets."""
import triton
import triton.language as tl


@triton.jit
def _smid(dep):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _now(dep):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _clock(dep):
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [dep], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def placement_kernel(smid_ptr, start_ptr, hold_ptr, spin_ns, HOLD: tl.constexpr):
    """Record SM and start time of each program; spin ``spin_ns``. With ``HOLD > 0`` a vector of
    HOLD fp32 (values in [0, 1)) stays live across the spin, to limit programs per SM."""
    pid = tl.program_id(0)
    smid = _smid(pid)
    t0 = _now(pid)
    if HOLD > 0:
        offs = tl.arange(0, HOLD)
        held = tl.load(hold_ptr + offs)
        t0 = _now(tl.sum(held, axis=0).to(tl.int32))
    now = t0
    while now - t0 < spin_ns:
        now = _now(pid)
    if HOLD > 0:
        tl.store(hold_ptr + offs, held + 1.0, mask=held < 0.0)  # never true: keeps `held` live
    tl.store(smid_ptr + pid, smid)
    tl.store(start_ptr + pid, t0)


@triton.jit
def chase_kernel(claim_ptr, chain_ptr, out_ptr, target_sm, start, steps):
    """The first program to land on SM ``target_sm`` follows ``steps`` links of the chain
    (``ld.global.cg``: cached in L2 only) and stores the ``%clock64`` cycles it took."""
    pid = tl.program_id(0)
    if _smid(pid) == target_sm:
        if tl.atomic_add(claim_ptr, 1) == 0:
            idx = start
            t0 = _clock(idx)
            for _ in range(steps):
                idx = tl.load(chain_ptr + idx, cache_modifier=".cg")
            t1 = _clock(idx)
            tl.store(out_ptr, t1 - t0)
            tl.store(out_ptr + 1, idx.to(tl.int64))
