"""The worker stages of a distributed kernel's candidate (run by agent/worker.py, in its box).

Request keys: ``pattern``, ``meta`` (the candidate's full launch meta at the benchmark problem,
its own knobs and tiles, with ``NUM_SMS`` of the target GPU), ``problem`` (the benchmark problem's
name) and ``problem_sizes`` (its sizes: the user's own shape is no problem of the module's spec),
``world_size``, ``check_sizes`` (the check problem sized for the candidate's knobs by
agent/dist_problems.py, or None where none is valid), ``check_world_sizes``, ``dtype``,
``mapping_path``.

- ``dist_permutation``: the rewrite target evaluated for every tile index of one rank at the
  benchmark problem (W ranks) and at the check problem for each checked W, with the candidate's
  tiles: every tile of the rank exactly once. The tile order is the same on every rank (the
  target takes no rank), so one rank's check is every rank's. Saves the benchmark problem's order.
- ``dist_numerics``: every rank of the kernel in this process through the Triton interpreter
  (kernels/distributed/runner.run_group) at the check problem with the candidate's own knobs
  (COMM_SMS, CE_GROUPS, SPLITS, tiles, schedule), for each checked W: two launches
  (epoch-counted flags reused), outputs poisoned before each, each rank compared with the fp32
  reference of every rank's inputs. A wait that gives up is DEADLOCK (rank, flag, epoch).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from swizzleperf.agent.worker import StageFailure, permutation_errors, probe_target

_BENCH, _CHECK = "bench@candidate", "check@candidate"


def stage_permutation(module, spec, request: dict) -> dict:
    spec = _with_problems(spec, request)
    checks = [(_BENCH, request["world_size"], request["meta"])]
    if request.get("check_sizes") is not None:
        checks += [(_CHECK, w, request["meta"]) for w in request["check_world_sizes"]]
    summary = {}
    for i, (name, world_size, meta) in enumerate(checks):
        for site, (grid, args) in enumerate(spec.tile_orders(spec.problems[name], world_size, meta)):
            grid, args = tuple(int(g) for g in grid), tuple(int(a) for a in args)
            coords = probe_target(module, spec, args, math.prod(grid), len(grid))
            message = permutation_errors(coords, grid)
            where = (f"{_label(name, request)} problem, W = {world_size} "
                     f"({'x'.join(map(str, grid))} tiles per rank)")
            if message:
                raise StageFailure("NOT_PERMUTATION", f"the tile order is not a permutation of each "
                                                      f"rank's tiles at the {where}: {message}")
            if i == 0 and site == 0 and request.get("mapping_path"):
                np.save(request["mapping_path"], np.ravel_multi_index(tuple(coords.T), grid))
            summary[f"{_label(name, request)}@{world_size}#{site}"] = {"grid": list(grid), "tiles": math.prod(grid)}
    return summary


def stage_numerics(module, spec, request: dict) -> dict:
    from swizzleperf.kernels.distributed.heap import SpinTimeout
    from swizzleperf.kernels.distributed.runner import run_group
    if request.get("check_sizes") is None:
        return {"skipped": "no check problem is valid for this configuration", "dtype": request["dtype"]}
    spec = _with_problems(spec, request)
    sizes = ",".join(f"{k}={v}" for k, v in request["check_sizes"].items())
    errors = {}
    for world_size in request["check_world_sizes"]:
        where = f"check problem {sizes}, W = {world_size}, pattern {request['pattern']}"
        try:
            checks = run_group(spec, world_size, request["pattern"], _CHECK, meta=request["meta"],
                               seed=world_size, dtype=request["dtype"], launches=2)
        except SpinTimeout as exc:
            raise StageFailure("DEADLOCK", f"{where}: {exc}") from None
        for check in checks:
            if not check.ok:
                raise StageFailure("MISMATCH", f"{where}: rank {check.rank}'s output differs from the "
                                               f"fp32 reference: relative error {check.error:.3e} > "
                                               f"tolerance {check.tolerance:.1e}"
                                               + (" (NaN: never written)" if math.isinf(check.error) else "")
                                               + (f"; {check.message}" if check.message else ""))
        errors[str(world_size)] = [c.error for c in checks]
    return {"rel_errors": errors, "dtype": request["dtype"], "check_sizes": request["check_sizes"],
            "meta": request["meta"]}


def _with_problems(spec, request: dict):
    """The module's spec with the benchmark problem's and the candidate's check problem's sizes."""
    problems = {_BENCH: dict(request["problem_sizes"])}
    if request.get("check_sizes") is not None:
        problems[_CHECK] = dict(request["check_sizes"])
    return dataclasses.replace(spec, problems={**spec.problems, **problems})


def _label(name: str, request: dict) -> str:
    return request["problem"] if name == _BENCH else "check"
