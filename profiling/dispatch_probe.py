"""Where programs land on a live NVIDIA GPU: the SM (``%smid``) and start time (``%globaltimer``)
of every program id of a launch, for ``swizzleperf hw --probe``.

Each program spins for ``spin_ns`` so that a whole wave is resident at once; ``num_warps = 32``
(1024 threads) keeps the probe at two programs per SM at most, near the one per SM of the GEMM.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def probe(num_programs: int = 1024, spin_ns: int = 20_000) -> dict:
    """Run the probe kernel; returns ``{device, sm_of_program: [...], start_ns: [...], summary}``.

    Raises:
        RuntimeError: no CUDA device.
    """
    import torch
    import triton
    import triton.language as tl

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU to probe")

    @triton.jit
    def placement_kernel(smid_ptr, start_ptr, spin_ns):
        pid = tl.program_id(0)
        smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [pid], dtype=tl.int32,
                                         is_pure=False, pack=1)
        t0 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [pid], dtype=tl.int64,
                                       is_pure=False, pack=1)
        now = t0
        while now - t0 < spin_ns:
            now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [pid], dtype=tl.int64,
                                            is_pure=False, pack=1)
        tl.store(smid_ptr + pid, smid)
        tl.store(start_ptr + pid, t0)

    smid = torch.full((num_programs,), -1, dtype=torch.int32, device="cuda")
    start = torch.zeros(num_programs, dtype=torch.int64, device="cuda")
    for _ in range(2):  # the first launch compiles and warms up
        placement_kernel[(num_programs,)](smid, start, spin_ns, num_warps=32)
    torch.cuda.synchronize()
    sm, t = smid.cpu().numpy(), start.cpu().numpy()
    return {"device": torch.cuda.get_device_name(), "spin_ns": spin_ns,
            "sm_of_program": sm.tolist(), "start_ns": (t - t.min()).tolist(), "summary": summarize(sm, t, spin_ns)}


def summarize(sm: np.ndarray, start_ns: np.ndarray, spin_ns: int) -> dict:
    """Facts the simulator and the prompt can use: the SMs of the first programs, how many
    programs start before the first one ends (the first wave), and how often neighbouring ids
    share an SM."""
    order = np.argsort(start_ns, kind="stable")
    first_wave = int(np.sum(start_ns - start_ns.min() < spin_ns))
    return {"first_programs_sm": sm[:16].tolist(),
            "started_in_id_order": bool(np.all(np.diff(order[: min(64, len(order))]) > 0)),
            "first_wave_programs": first_wave,
            "distinct_sms": int(np.unique(sm).size),
            "neighbours_on_same_sm": float(np.mean(sm[1:] == sm[:-1]))}


def save(result: dict, folder: Path) -> Path:
    """Write the probe next to the run records: ``<folder>/probe_<gpu>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"probe_{result['device'].split()[-1].lower()}.json"
    path.write_text(json.dumps(result))
    return path
