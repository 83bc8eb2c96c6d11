"""Where programs land on a live NVIDIA GPU, and which L2 partition each SM reads through, for
``swizzleperf hw --probe``; the simulator's partition model reads the stored result
(:func:`program_partitions`).

* **Placement.** Every program of a launch records its SM (``%smid``) and start time
  (``%globaltimer``) and spins for ``spin_ns``, so that a whole wave is resident at once. The
  probe runs at one and at two programs per SM (1024 threads each; at one, a 32768-element
  fp32 vector held live across the spin needs more than half the register file), since the
  hardware's order of filling SMs depends on how many fit.
* **Partitions.** A pointer chase over ``lines`` L2 lines (128 B apart, random cyclic order,
  ``ld.global.cg``: L2 only) is timed with ``%clock64`` by one program pinned to SM ``s``, after
  caches are flushed and the same lines were read by a program on a reference SM. Where the two
  SMs read through the same partition, ``s`` hits what the reference brought in; otherwise it
  misses in its own partition. Cycles per load split the SMs into two groups (the largest gap
  in the sorted latencies); a second reference, taken from the other group, must give the same
  split.

A stored probe (``load``) is data (#41): read within ``MAX_PROBE_BYTES`` from a regular file only,
its nesting measured before it is parsed, then checked against ``StoredProbe`` (what the simulator
and ``describe`` read, each field's type and range); whatever does not fit is one ``ProbeError``
naming the file and the field, never a traceback from deep inside ``json`` or numpy.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import pydantic

from swizzleperf.sandbox import untrusted

#: Bytes of a stored probe read: ``hw --probe`` writes about 200 KB on an H200 (8192 programs at two
#: occupancies, 132 SMs); 16 MiB holds 80 times that.
MAX_PROBE_BYTES = 16 << 20
#: JSON nesting of a stored probe: 5 levels (the probe, ``placement``, a level, its ``summary``, a list).
MAX_PROBE_DEPTH = 8
#: SMs of a partition map, partitions, programs of a level's placement: far above any GPU's (132
#: SMs and 2 partitions on an H100) and the probe's 8192 programs, small enough for numpy at once.
MAX_SMS = 1 << 16
MAX_PARTITIONS = 1024
MAX_PROBE_PROGRAMS = 1 << 20


class ProbeError(Exception):
    """A probe that cannot run or a stored probe the simulator cannot use; one line."""


def placement(num_programs: int = 8192, spin_ns: int = 20_000, programs_per_sm: int = 1) -> dict:
    """SM and start time of every program id of one launch at ``programs_per_sm`` (1 or 2).

    Returns ``{sm_of_program: [num_programs], start_ns: [num_programs], summary}``.
    Raises ProbeError: ``programs_per_sm`` not 1 or 2."""
    import torch
    if programs_per_sm not in (1, 2):
        raise ProbeError(f"programs_per_sm must be 1 or 2, got {programs_per_sm}")
    from swizzleperf.profiling.probe_kernels import placement_kernel
    hold = 32768 if programs_per_sm == 1 else 0
    smid = torch.full((num_programs,), -1, dtype=torch.int32, device="cuda")
    start = torch.zeros(num_programs, dtype=torch.int64, device="cuda")
    held = torch.rand(max(hold, 1), device="cuda")
    for _ in range(2):  # the first launch compiles and warms up
        placement_kernel[(num_programs,)](smid, start, held, spin_ns, HOLD=hold, num_warps=32)
    torch.cuda.synchronize()
    sm, t = smid.cpu().numpy(), start.cpu().numpy()
    summary = summarize(sm, t, spin_ns)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    if summary["first_wave_programs"] > num_sms * programs_per_sm:
        raise ProbeError(f"{summary['first_wave_programs']} programs started in the first wave on "
                         f"{num_sms} SMs: the probe did not hold {programs_per_sm} program(s) per SM")
    return {"sm_of_program": sm.tolist(), "start_ns": (t - t.min()).tolist(),
            "summary": summary}


class _Chaser:
    """One pointer chase pinned to an SM: ``cycles_per_load(sm, warm_sm)``."""

    def __init__(self, lines: int, num_sms: int, seed: int = 0):
        import torch
        from swizzleperf.profiling.probe_kernels import chase_kernel
        self.kernel = chase_kernel
        perm = np.random.default_rng(seed).permutation(lines)
        chain = np.zeros(lines * 32, dtype=np.int32)              # 32 int32 = one 128-B line
        chain[perm * 32] = np.roll(perm, -1) * 32
        self.chain, self.start, self.steps = torch.from_numpy(chain).cuda(), int(perm[0] * 32), lines
        self.claim = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.out = torch.zeros(2, dtype=torch.int64, device="cuda")
        self.flush = torch.empty(256 * 2**20, dtype=torch.int32, device="cuda")  # 1 GiB > any L2
        self.grid = (num_sms * 32,)

    def _run(self, sm: int) -> int:
        self.claim.zero_()
        self.out.fill_(-1)
        self.kernel[self.grid](self.claim, self.chain, self.out, sm, self.start, self.steps, num_warps=1)
        cycles = int(self.out[0].item())
        if cycles < 0:
            raise ProbeError(f"no program of the chase landed on SM {sm}")
        return cycles

    def cycles_per_load(self, sm: int, warm: tuple = ()) -> float:
        """Flush, let the SMs in ``warm`` read the lines in turn (none: cold), then time the chase
        on ``sm``."""
        self.flush.add_(1)
        for warm_sm in warm:
            self._run(warm_sm)
        return self._run(sm) / self.steps


def split_two(latency: np.ndarray) -> np.ndarray:
    """Group labels (0 = the faster group) at the largest gap of the sorted latencies.

    Args: latency: float ``[num_sms]`` cycles per load. Returns int64 ``[num_sms]``."""
    order = np.argsort(latency)
    cut = int(np.argmax(np.diff(latency[order]))) + 1
    labels = np.ones(len(latency), dtype=np.int64)
    labels[order[:cut]] = 0
    return labels


def partitions(num_sms: int, lines: int = 2048, repeats: int = 3) -> dict:
    """Which L2 partition each SM reads through (see the module docstring).

    Returns ``{partition_of_sm: [num_sms], references_agree: bool, cycles_after_reference:
    {ref: [num_sms]}, cycles_cold, cycles_self_warm, cycles_after_own_far_read: [num_sms]}``;
    cycles per load, medians of ``repeats``. Partition 0 is the first reference's (SM 0's).
    ``cycles_after_own_far_read``: the reference read the lines, then SM s, then s again: near
    (as its own re-read) where a line served by the other partition is also kept in s's own."""
    chaser = _Chaser(lines, num_sms)
    med = lambda sm, warm=(): float(np.median([chaser.cycles_per_load(sm, warm) for _ in range(repeats)]))
    sms = range(num_sms)
    after = {0: np.array([med(s, (0,)) for s in sms])}
    labels = split_two(after[0])                                 # 0: SM 0's partition (it hits)
    other = int(np.flatnonzero(labels == 1)[np.argmin(after[0][labels == 1])]) if labels.any() else 0
    after[other] = np.array([med(s, (other,)) for s in sms])
    second = 1 - split_two(after[other])                         # relabel: SM 0's group is 0
    rounded = lambda values: [round(v, 1) for v in values]
    return {"partition_of_sm": labels.tolist(),
            "references_agree": bool(np.array_equal(labels, second)),
            "cycles_after_reference": {str(r): rounded(v) for r, v in after.items()},
            "cycles_cold": rounded(med(s) for s in sms),
            "cycles_self_warm": rounded(med(s, (s,)) for s in sms),
            "cycles_after_own_far_read": rounded(med(s, (0 if labels[s] else other, s)) for s in sms),
            "lines": lines, "repeats": repeats}


def probe(num_programs: int = 8192, spin_ns: int = 20_000) -> dict:
    """The whole probe: placement at one and two programs per SM, and the partition map.

    Returns ``{device, num_sms, spin_ns, placement: {"1": ..., "2": ...}, partitions: ...}``.
    Raises ProbeError: no CUDA device."""
    import torch
    if not torch.cuda.is_available():
        raise ProbeError("no CUDA GPU to probe")
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    return {"device": torch.cuda.get_device_name(), "num_sms": num_sms, "spin_ns": spin_ns,
            "placement": {str(k): placement(num_programs, spin_ns, k) for k in (1, 2)},
            "partitions": partitions(num_sms)}


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


def stored_path(folder: Path, spec_name: str) -> Path:
    """Where the probe of a GPU described by hardware spec ``spec_name`` is kept in a workdir."""
    return Path(folder) / f"probe_{spec_name}.json"


def save(result: dict, folder: Path, spec_name: str) -> Path:
    """Write the probe next to the run records: ``<folder>/probe_<spec_name>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = stored_path(folder, spec_name)
    path.write_text(json.dumps(result))
    return path


def _require_partition_map(stored, what: str) -> None:
    """Raise ProbeError unless ``stored`` holds a placement and the partition map."""
    if not isinstance(stored, dict) or "partitions" not in stored or "placement" not in stored:
        raise ProbeError(f"{what} has no partition map (an older probe?); run `swizzleperf hw --probe` again")


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must be printable text (no newline or escape code)")
    return text


_SM = Annotated[int, pydantic.Field(strict=True, ge=0, lt=MAX_SMS)]
_Partition = Annotated[int, pydantic.Field(strict=True, ge=0, lt=MAX_PARTITIONS)]
_Count = Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 62)]
_Cycles = Annotated[float, pydantic.Field(strict=True, ge=0.0, allow_inf_nan=False)]
_PerSM = Annotated[list[_Cycles], pydantic.Field(min_length=1, max_length=MAX_SMS)]
#: A level of the placement: programs per SM, written as JSON keys are ("1", "2").
_Level = Annotated[str, pydantic.Field(strict=True, pattern=r"^[1-9][0-9]{0,2}$")]
#: A reference SM of ``cycles_after_reference`` ("0", "95").
_Reference = Annotated[str, pydantic.Field(strict=True, pattern=r"^(0|[1-9][0-9]{0,4})$")]
_Device = Annotated[str, pydantic.Field(strict=True, min_length=1, max_length=200),
                    pydantic.AfterValidator(_printable)]


class _Summary(pydantic.BaseModel):
    """What ``summarize`` wrote of one level, as ``describe`` reads it."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    first_programs_sm: Annotated[list[_SM], pydantic.Field(max_length=64)]
    started_in_id_order: bool | None = None
    first_wave_programs: _Count
    distinct_sms: _Count
    neighbours_on_same_sm: Annotated[float, pydantic.Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]


class _Placement(pydantic.BaseModel):
    """One level of the placement: the SM of every program id of the probe's launch."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    sm_of_program: Annotated[list[_SM], pydantic.Field(min_length=1, max_length=MAX_PROBE_PROGRAMS)]
    start_ns: Annotated[list[_Count], pydantic.Field(max_length=MAX_PROBE_PROGRAMS)] | None = None
    summary: _Summary | None = None


class _Partitions(pydantic.BaseModel):
    """The partition of every SM, and the pointer-chase cycles (one value per SM) it came from."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    partition_of_sm: Annotated[list[_Partition], pydantic.Field(min_length=1, max_length=MAX_SMS)]
    references_agree: bool | None = None
    cycles_after_reference: Annotated[dict[_Reference, _PerSM], pydantic.Field(min_length=1, max_length=16)] | None = None
    cycles_cold: _PerSM | None = None
    cycles_self_warm: _PerSM | None = None
    cycles_after_own_far_read: _PerSM | None = None
    lines: _Count | None = None
    repeats: _Count | None = None

    @pydantic.model_validator(mode="after")
    def _one_value_per_sm(self):
        sms = len(self.partition_of_sm)
        lists = {f"cycles_after_reference.{r}": v for r, v in (self.cycles_after_reference or {}).items()}
        lists.update(cycles_cold=self.cycles_cold, cycles_self_warm=self.cycles_self_warm,
                     cycles_after_own_far_read=self.cycles_after_own_far_read)
        for name, values in lists.items():
            if values is not None and len(values) != sms:
                raise ValueError(f"{name} has {len(values)} values for the {sms} SMs of the partition map")
        outside = [r for r in self.cycles_after_reference or {} if int(r) >= sms]
        if outside:
            raise ValueError(f"the reference SM {outside[0]} is outside the partition map of {sms} SMs")
        return self


class StoredProbe(pydantic.BaseModel):
    """A stored probe as :func:`load` believes it: what the simulator reads (the device's name, the
    SM of every program at each level, the partition of every SM, every SM named inside the map)
    required; what ``describe`` reads checked where present (a probe written by hand may hold only
    the former); other fields kept, bounded by the file's size and depth."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    device: _Device
    num_sms: _Count | None = None
    spin_ns: _Count | None = None
    placement: Annotated[dict[_Level, _Placement], pydantic.Field(min_length=1, max_length=16)]
    partitions: _Partitions

    @pydantic.model_validator(mode="after")
    def _sms_inside_the_map(self):
        sms = len(self.partitions.partition_of_sm)
        for level, run in self.placement.items():
            named = max(run.sm_of_program + (run.summary.first_programs_sm if run.summary else []))
            if named >= sms:
                raise ValueError(f"placement {level} names SM {named}, outside the partition map of {sms} SMs")
        return self


def load(path: Path) -> dict:
    """A stored probe (``hw --probe``'s JSON), as it was written, once it fits ``StoredProbe``.

    Raises:
        ProbeError: one line naming the file: it cannot be read, is not a regular file, is longer
            than ``MAX_PROBE_BYTES``, is not UTF-8 or not JSON, nests deeper than
            ``MAX_PROBE_DEPTH``, has no partition map (an older probe), or a field that does not
            fit (its path, what it must be and what was found).
    """
    what = f"the probe {untrusted.shown(str(path))}"
    try:
        data = untrusted.read_bounded(path, MAX_PROBE_BYTES, what)
        stored = untrusted.loads(data, what, max_depth=MAX_PROBE_DEPTH)
    except OSError as exc:
        raise ProbeError(f"cannot read {what}: {exc.strerror or exc}") from None
    except untrusted.UntrustedInput as exc:
        raise ProbeError(str(exc)) from None
    _require_partition_map(stored, what)
    try:
        untrusted.validated(StoredProbe, stored, what, data)
    except untrusted.UntrustedInput as exc:
        raise ProbeError(str(exc)) from None
    return stored


def describe(stored: dict) -> str:
    """A few lines for an engineer: where the first programs land, the waves, the partitions.

    Args:
        stored: a :func:`probe` result, or a :func:`load` one; a figure a probe written by hand
            leaves out (a level's ``summary``, the cycles) is left out of the lines."""
    lines = []
    for level, run in sorted(stored["placement"].items()):
        s = run.get("summary")
        if s is None:
            continue
        lines.append(f"{level} program(s) per SM: programs 0-15 on SMs {s['first_programs_sm']}; "
                     f"{s['first_wave_programs']} programs in the first wave on {s['distinct_sms']} SMs; "
                     f"neighbouring ids on the same SM: {s['neighbours_on_same_sm']:.0%}")
    p = stored["partitions"]
    labels = np.asarray(p["partition_of_sm"])
    line = f"L2 partitions: {np.bincount(labels).tolist()} SMs"
    if p.get("cycles_after_reference") and p.get("cycles_cold") and p.get("cycles_self_warm"):
        cycles = {int(r): np.asarray(v) for r, v in p["cycles_after_reference"].items()}
        near = np.median(np.concatenate([v[labels == labels[r]] for r, v in cycles.items()]))
        far = np.median(np.concatenate([v[labels != labels[r]] for r, v in cycles.items()]))
        line += (f" (the two references {'agree' if p.get('references_agree') else 'DISAGREE'}); a pointer "
                 f"chase after a reference SM read the lines: {near:.0f} cycles/load on its partition's SMs, "
                 f"{far:.0f} on the others'; cold {np.median(p['cycles_cold']):.0f}, own re-read "
                 f"{np.median(p['cycles_self_warm']):.0f}")
    lines.append(line)
    if p.get("cycles_after_own_far_read"):
        lines.append(f"a line the other partition served, read again: "
                     f"{np.median(p['cycles_after_own_far_read']):.0f} cycles/load (kept in the near "
                     f"partition where this equals the own re-read)")
    return "\n".join(lines)


def program_partitions(stored: dict, num_programs: int, programs_per_sm: int) -> tuple:
    """The L2 partition of every program id, from a stored probe.

    Program ``p`` runs on the SM that program ``p mod n`` of the probe's launch at the nearest
    occupancy landed on (``n`` its programs: later programs cycle through the probe's measured
    placement, which already holds the hardware's later waves), and reads through that SM's
    partition.

    Args:
        stored: a :func:`probe` result (JSON-loaded).
        num_programs: the kernel's grid size.
        programs_per_sm: its occupancy.

    Returns:
        ``(partition [num_programs] int64, sms_per_partition [P] int64)``.

    Raises:
        ProbeError: a probe without the partition map (an older format) or placement.
    """
    _require_partition_map(stored, "the stored probe")
    part_of_sm = np.asarray(stored["partitions"]["partition_of_sm"], dtype=np.int64)
    level = min(stored["placement"], key=lambda k: abs(int(k) - programs_per_sm))
    sm = np.asarray(stored["placement"][level]["sm_of_program"], dtype=np.int64)
    if (sm < 0).any() or sm.max() >= len(part_of_sm):
        raise ProbeError("the stored placement names SMs outside the partition map")
    part = part_of_sm[sm[np.arange(num_programs) % len(sm)]]
    return part, np.bincount(part_of_sm, minlength=int(part_of_sm.max()) + 1)
