"""The memory-access analysis a proposer reads: footprints, which programs share which data, the
working set of one concurrent wave against L2, and how dispatch splits sharing programs across L2
domains. Computed from a ``TileTrace`` and an order; rendered by ``prompts/analysis.j2``."""
from __future__ import annotations

import math

import numpy as np

from swizzleperf import prompts
from swizzleperf.kernels.trace import TileTrace
from swizzleperf.profiling.l2sim import placement


def analyze(trace: TileTrace, order: np.ndarray, grid: tuple, hw, probe: dict | None = None) -> dict:
    """Figures of the analysis (bytes, counts, fractions) for program -> tile ``order``.

    Args:
        trace: accesses of every logical tile ([tiles, steps, accesses]).
        order: int ``[programs]``, the flat tile index each program id computes.
        grid: the logical tile grid (its product is the number of tiles).
        hw: the ``HardwareSpec`` (domains, compute units, L2 bytes per domain, dispatch).
        probe: a stored dispatch probe of this GPU; programs are then placed as it measured
            (``l2sim.placement``).

    Raises:
        ValueError, ProbeError: as ``l2sim.placement``.
    """
    keys = trace.keys
    reads = (keys >= 0) & ~trace.writes()
    per_program = np.where(reads, trace.block_bytes[np.maximum(keys, 0)], 0).sum(axis=(1, 2))
    dom, cus = placement(order.size, hw, trace.programs_per_cu, probe)
    slots = min(cus) * trace.programs_per_cu
    wave = sum(cus) * trace.programs_per_cu
    return {
        "programs": int(order.size), "steps": int(keys.shape[1]), "grid": list(grid),
        "read_bytes_per_program": float(per_program.mean()),
        "total_read_bytes": float(per_program.sum()),
        "compulsory_bytes": float(trace.block_bytes[~trace.block_is_write].sum()),
        "operands": [_operand_sharing(trace, j, grid) for j in range(keys.shape[2])
                     if bool(reads[:, :, j].any())],
        "slots_per_domain": int(slots), "wave": int(wave), "domains": hw.l2_domains,
        "l2_bytes_per_domain": hw.l2_bytes_per_domain,
        "wave_step_bytes": _wave_step_bytes(trace, order, dom, slots),
        "wave_total_bytes": _wave_total_bytes(trace, order[:wave]),
        "domains_per_shared_block": _domains_per_block(trace, order[:wave], dom[:wave]),
        "probed_on": probe["device"] if probe else None,
        "source": trace.source,
    }


def _operand_sharing(trace: TileTrace, j: int, grid: tuple) -> dict:
    """Operand j (the j-th access of every step): its blocks, and which tiles share them."""
    keys = trace.keys[:, :, j]
    valid = keys[(keys >= 0) & ~trace.writes()[:, :, j]]
    readers = np.bincount(valid, minlength=trace.block_bytes.size)[np.unique(valid)]
    first = keys[:, 0]
    shared_axis = None
    coords = np.unravel_index(np.arange(trace.num_tiles), grid)
    for axis, coord in enumerate(coords):  # do tiles with equal coordinate `axis` share blocks?
        same = np.unique(np.stack([coord, first]), axis=1).shape[1] == np.unique(coord).size
        if same and np.unique(first).size == np.unique(coord).size:
            shared_axis = axis
    return {"index": j, "blocks": int(np.unique(valid).size),
            "block_bytes": float(trace.block_bytes[np.unique(valid)].mean()),
            "readers_per_block": float(readers.mean()), "shared_by_equal_axis": shared_axis}


def _wave_step_bytes(trace: TileTrace, order: np.ndarray, dom: np.ndarray, slots: int) -> float:
    """Distinct bytes domain 0's first ``slots`` programs read in one loop step (step 0)."""
    first_wave = order[dom == 0][:slots]
    blocks = np.unique(trace.keys[first_wave, 0, :])
    blocks = blocks[blocks >= 0]
    return float(trace.block_bytes[blocks].sum())


def _wave_total_bytes(trace: TileTrace, wave_tiles: np.ndarray) -> float:
    blocks = np.unique(trace.keys[wave_tiles])
    return float(trace.block_bytes[blocks[blocks >= 0]].sum())


def _domains_per_block(trace: TileTrace, wave_tiles: np.ndarray, dom: np.ndarray) -> float:
    """Mean number of L2 domains over which the first wave's readers of a block are spread
    (``dom[i]``: the domain of the program computing ``wave_tiles[i]``)."""
    if np.unique(dom).size <= 1:
        return 1.0
    keys = trace.keys[wave_tiles, 0, :]  # [wave, accesses]
    pairs = np.unique(np.stack([keys.ravel(), np.repeat(dom, keys.shape[1])]), axis=1)
    pairs = pairs[:, pairs[0] >= 0]
    _, counts = np.unique(pairs[0], return_counts=True)
    return float(counts.mean()) if counts.size else 1.0


def render(figures: dict, hw, target_name: str = "swizzle") -> str:
    """The analysis as text for the prompt and ``swizzleperf analyze`` (prompts/analysis.j2)."""
    return prompts.render("analysis.j2", f=figures, hw=hw, target_name=target_name, math=math).strip()
