"""The worker stages of a distributed kernel's candidate (run by agent/worker.py, in its box).

Request keys: ``pattern``, ``meta`` (the candidate's knobs), ``problem`` (the benchmark problem),
``world_size``, ``num_sms`` (of the target GPU), ``check_world_sizes``, ``dtype``,
``mapping_path``.

- ``dist_permutation``: the rewrite target evaluated for every tile index of one rank at the
  benchmark problem (the candidate's tiles, W ranks) and at the check problem for each checked
  W: every tile of the rank exactly once. The tile order is the same on every rank (the target
  takes no rank), so one rank's check is every rank's. Saves the benchmark problem's order.
- ``dist_numerics``: every rank of the kernel in this process through the Triton interpreter
  (kernels/distributed/runner.run_group) at the check problem, for each checked W: two launches
  (epoch-counted flags reused), outputs poisoned before each, each rank compared with the fp32
  reference of every rank's inputs. A wait that gives up is DEADLOCK (rank, flag, epoch).
"""
from __future__ import annotations

import math

import numpy as np

from swizzleperf.agent.worker import StageFailure, permutation_errors, probe_target


def stage_permutation(module, spec, request: dict) -> dict:
    checks = [(request["problem"], request["world_size"],
               spec.meta_for(request["problem"], {**request["meta"], "NUM_SMS": request["num_sms"]}))]
    checks += [("check", w, _check_meta(spec, request)) for w in request["check_world_sizes"]]
    summary = {}
    for i, (name, world_size, meta) in enumerate(checks):
        for site, (grid, args) in enumerate(spec.tile_orders(spec.problems[name], world_size, meta)):
            grid, args = tuple(int(g) for g in grid), tuple(int(a) for a in args)
            coords = probe_target(module, spec, args, math.prod(grid), len(grid))
            message = permutation_errors(coords, grid)
            where = f"{name} problem, W = {world_size} ({'x'.join(map(str, grid))} tiles per rank)"
            if message:
                raise StageFailure("NOT_PERMUTATION", f"the tile order is not a permutation of each "
                                                      f"rank's tiles at the {where}: {message}")
            if i == 0 and site == 0 and request.get("mapping_path"):
                np.save(request["mapping_path"], np.ravel_multi_index(tuple(coords.T), grid))
            summary[f"{name}@{world_size}#{site}"] = {"grid": list(grid), "tiles": math.prod(grid)}
    return summary


def stage_numerics(module, spec, request: dict) -> dict:
    from swizzleperf.kernels.distributed.heap import SpinTimeout
    from swizzleperf.kernels.distributed.runner import run_group
    errors = {}
    for world_size in request["check_world_sizes"]:
        where = f"check problem, W = {world_size}, pattern {request['pattern']}"
        try:
            checks = run_group(spec, world_size, request["pattern"], "check",
                               meta=_check_meta(spec, request), seed=world_size,
                               dtype=request["dtype"], launches=2)
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
    return {"rel_errors": errors, "dtype": request["dtype"]}


def _check_meta(spec, request: dict) -> dict:
    """The check problem's meta: its own small tiles, with the candidate's check knobs."""
    carried = {k: v for k, v in request["meta"].items() if k in getattr(spec, "check_knobs", ())}
    return spec.meta_for("check", carried)
