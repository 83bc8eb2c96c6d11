"""The problems of a distributed run: the user's own shape (``--problem M=8192,N=29568,K=8192``),
whether it splits over W ranks, and the check problem sized for a candidate's own knobs.

A ``DistKernelSpec`` names its problems (global sizes; each rank's shard derives from W) and a
small ``check`` problem for the Triton interpreter with its own small tiles. A candidate's numerics
must run with *its* knobs (tiles, COMM_SMS, CE_GROUPS, SPLITS, schedule), so its check problem is
the spec's ``check`` grown until the candidate's configuration is valid at every checked W: each
size ``X`` with a tile knob ``BLOCK_X`` is scaled by the ratio of the candidate's tile to the
check's (which keeps the check's ragged edges: a rank's rows are 1.5 tiles at W = 2), then sizes
are doubled, fewest doublings first, until ``spec.constraints`` accepts the configuration at every
W (flash decode's SPLITS x BLOCK_N keys per rank, for example).

The per-rank GEMM's configuration at a problem is the one measured for its shape on the run's GPU
where one was measured (``tuned_gemm``: kernels/schedule/gemm_tuning.py's cache, then the committed
bench/results/gemm_configs_hopper.json, shipped as this package's data/gemm_configs_hopper.json), else
the spec's default.
"""
from __future__ import annotations

import itertools
import math
from importlib import resources
from pathlib import Path

#: The per-rank GEMM configurations measured per shape and committed (an H100 on 2026-11-25 and an
#: H200 on 2026-11-26, triton 3.6; bench/results/rank_gemm_hopper.md): looked up after the user's own cache.
#: Package data, a copy of bench/results/gemm_configs_hopper.json (bench/package_data.py).
COMMITTED_GEMM_CONFIGS = Path(str(resources.files(__package__) / "data" / "gemm_configs_hopper.json"))

#: Doublings of the check problem's sizes tried at most (2^6 = 64x a size): beyond that the
#: configuration is checked at the benchmark problem only, and the report says so.
MAX_DOUBLINGS = 6


class ProblemError(ValueError):
    """A problem that cannot run: an unknown name, a malformed or incomplete shape, a shape that
    does not split over W. One line: what was expected, what was found."""


def resolve(spec, text: str | None, world_size: int, num_sms: int) -> tuple:
    """``(name, sizes)`` of the problem a run is asked for: a named problem of the spec, or the
    user's sizes ``K=V,...`` (every key of the spec's problems, positive integers; named
    ``K=V,...`` in reports). None gives the spec's first benchmark problem.

    Raises:
        ProblemError: an unknown name or ``check``; a shape with missing, unknown, repeated or
            non-positive sizes; a shape the kernel cannot run at W (it does not split over W: the
            spec's constraints refuse its default configuration).
    """
    if text is None:
        name = spec.bench_problems[0]
        sizes = dict(spec.problems[name])
    elif "=" in text:
        sizes = parse_sizes(text, spec)
        name = ",".join(f"{k}={v}" for k, v in sizes.items())
    elif text in spec.problems and text != "check":
        name, sizes = text, dict(spec.problems[text])
    else:
        named = ", ".join(p for p in spec.problems if p != "check")
        keys = ",".join(f"{k}=..." for k in spec.problems["check"])
        raise ProblemError(f"--problem must be one of {named}, or sizes {keys}; got {text}")
    why = splits(spec, sizes, world_size, num_sms)
    if why:
        raise ProblemError(f"{spec.name} cannot run problem {name} on {world_size} ranks: {why}")
    return name, sizes


def parse_sizes(text: str, spec) -> dict:
    """``{"M": 8192, ...}`` from ``"M=8192,N=29568,K=8192"``, in the spec's key order.

    Raises:
        ProblemError: a part without ``=``, an unknown or repeated key, a missing key, a value
            that is not a positive integer.
    """
    keys = list(spec.problems["check"])
    sizes = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in keys:
            raise ProblemError(f"--problem sizes of {spec.name} are {', '.join(keys)} (K=V,...), got {part!r}")
        if key in sizes:
            raise ProblemError(f"--problem gives {key} twice")
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number <= 0 or str(number) != value.lstrip("+"):
            raise ProblemError(f"--problem {key} must be a positive integer, got {value!r}")
        sizes[key] = number
    missing = [k for k in keys if k not in sizes]
    if missing:
        raise ProblemError(f"--problem must give {', '.join(keys)}; missing {', '.join(missing)}")
    return {k: sizes[k] for k in keys}


def splits(spec, sizes: dict, world_size: int, num_sms: int) -> str | None:
    """Why the kernel's default configuration cannot run ``sizes`` on ``world_size`` ranks (the
    spec's constraints, then its input maker, which refuses shapes that do not split), or None."""
    meta = {**spec.meta, "NUM_SMS": num_sms}
    if spec.constraints is not None:
        why = spec.constraints(sizes, world_size, spec.patterns[0], meta)
        if why:
            return why
    return _input_refusal(spec, sizes, world_size)


def _input_refusal(spec, sizes: dict, world_size: int) -> str | None:
    """The ValueError of the spec's input maker for ``sizes`` at W (shapes that do not split),
    tried on PyTorch's meta device (no memory), or None."""
    try:
        spec.make_inputs(dict(sizes), 0, world_size, 0, "meta", spec.dtypes[0])
    except ValueError as exc:
        return str(exc)
    except Exception:  # the input maker cannot run on the meta device: the constraints decided
        return None
    return None


def check_problem(spec, pattern: str, meta: dict, world_sizes, num_sms: int) -> tuple:
    """``(sizes, note)``: the smallest growth of the spec's ``check`` problem (module docstring) at
    which the configuration ``pattern`` + ``meta`` (the candidate's full launch meta) is valid at
    every W of ``world_sizes``; ``note`` says how it was sized. ``(None, why)`` where no growth
    within ``MAX_DOUBLINGS`` is valid."""
    base = dict(spec.problems["check"])
    check_meta = spec.check_meta
    for key in base:
        tile = f"BLOCK_{key}"
        if tile in meta and check_meta.get(tile):
            base[key] *= math.ceil(meta[tile] / check_meta[tile])
    full_meta = {**meta, "NUM_SMS": num_sms}
    keys = list(base)
    for total in range(MAX_DOUBLINGS + 1):
        for counts in _compositions(total, len(keys)):
            sizes = {k: base[k] << c for k, c in zip(keys, counts)}
            if all(_valid(spec, sizes, w, pattern, full_meta) for w in world_sizes):
                scaled = [k for k in keys if sizes[k] != spec.problems["check"][k]]
                note = ("the check problem" if not scaled else
                        f"the check problem grown for this configuration ({', '.join(scaled)})")
                return sizes, note
    return None, (f"no check problem up to {1 << MAX_DOUBLINGS}x the spec's is valid for this "
                  f"configuration at W = {', '.join(map(str, world_sizes))}")


def _valid(spec, sizes: dict, world_size: int, pattern: str, meta: dict) -> bool:
    if spec.constraints is not None and spec.constraints(sizes, world_size, pattern, meta) is not None:
        return False
    return _input_refusal(spec, sizes, world_size) is None


def _compositions(total: int, parts: int):
    """Every tuple of ``parts`` non-negative integers summing to ``total``."""
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1,) + cuts + (total + parts - 1,)
        yield tuple(bounds[i + 1] - bounds[i] - 1 for i in range(parts))


def tuned_gemm(spec, sizes: dict, world_size: int, dtype: str, device_name: str | None, num_sms: int,
               caches: tuple | None = None, pattern: str | None = None) -> tuple:
    """``(knobs, source)``: the per-rank GEMM configuration measured for this problem's per-rank
    shape (``spec.compute_shape``) on the GPU named ``device_name``, as knobs of the spec, from
    the first cache of ``caches`` that has one (default: kernels/schedule/gemm_tuning.py's cache,
    then ``COMMITTED_GEMM_CONFIGS``); ``source`` names the file and the shape. The first of
    ``gemm_tuning.ranked_configs`` that is inside the spec's knobs and that ``pattern``'s
    constraints take (default: the spec's first pattern), ranked for the programs ``pattern``
    gives its GEMM (``spec.gemm_programs``, with the spec's default COMM_SMS; without
    ``pattern``, as measured). ``({}, why)`` where none applies: no device (a simulated run), no
    GEMM, nothing measured for the shape there, a cache file that cannot be read, or no
    configuration that fits. Switches an entry leaves out are off, as in the tuning run."""
    if not device_name or spec.compute_shape is None:
        return {}, "no tuned GEMM configuration: " + ("no GPU (simulated)" if not device_name
                                                      else "the kernel declares no per-rank GEMM")
    from swizzleperf.kernels.schedule import gemm_tuning
    shape = spec.compute_shape(sizes, world_size)
    text = f"{shape['M']}x{shape['N']}x{shape['K']}"
    programs = spec.gemm_programs(pattern, {**spec.meta, "NUM_SMS": num_sms}) if pattern else None
    pattern = pattern or spec.patterns[0]
    unreadable = []
    for path in caches if caches is not None else (gemm_tuning.cache_path(), COMMITTED_GEMM_CONFIGS):
        try:
            ranked = gemm_tuning.ranked_configs(shape["M"], shape["N"], shape["K"], dtype, device_name, programs,
                                                path=Path(path))
        except ValueError as exc:   # a cache that is not JSON: said, and the next one tried
            ranked = unreadable.append(str(exc)) or []
        if not ranked:
            continue
        refusals = []
        for found in ranked:
            # a switch the kernel lacks is dropped where it is off, and does not fit where it is on
            knobs = {k: v for k, v in found.items() if k in spec.knobs or k not in gemm_tuning.SWITCHES or v}
            outside = [f"{k}={v}" for k, v in knobs.items() if k not in spec.knobs or v not in spec.knobs[k]]
            meta = {**spec.meta, **knobs, "NUM_SMS": num_sms}
            why = ", ".join(outside) or (spec.constraints(sizes, world_size, pattern, meta)
                                         if spec.constraints is not None else None)
            if why:
                refusals.append(why)
                continue
            chosen = (f", for {pattern}'s {programs} programs" if programs and programs < num_sms else "") + \
                (f" (the schedule timed beside it; the first does not fit: {refusals[0]})" if refusals else "")
            return knobs, f"measured for the per-rank GEMM {text} on {device_name} ({path}){chosen}"
        return {}, f"the GEMM configuration measured for {text} on {device_name} ({path}) does not fit: {refusals[0]}"
    return {}, (f"no GEMM configuration measured for {text} on {device_name}: the kernel's defaults"
                + "".join(f"; {u}" for u in unreadable))
