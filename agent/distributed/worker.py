"""The worker of a distributed kernel's candidate: ``python -m swizzleperf.agent.distributed.worker
REQUEST OUT``, in the box, as agent/verification/worker.py is for a single-GPU kernel (the
request loop is agent/verification/stages.py's; the distributed evaluator chooses this worker).

Request keys: ``pattern``, ``meta`` (the candidate's full launch meta at the benchmark problem,
its own knobs and tiles, with ``NUM_SMS`` of the target GPU), ``problem`` (the benchmark problem's
name) and ``problem_sizes`` (its sizes: the user's own shape is no problem of the module's spec),
``world_size``, ``check_sizes`` (the check problem sized for the candidate's knobs by
agent/distributed/problems.py, or None where none is valid), ``check_world_sizes``, ``dtype``,
``mapping_path``, ``reference_path`` (the kernel module as the user wrote it, for the probe's
synthetic grids).

- ``dist_permutation``: the rewrite target evaluated for every tile index of one rank at the
  benchmark problem (W ranks) and at the check problem for each checked W, with the candidate's
  tiles: every tile of the rank exactly once. The tile order is the same on every rank (the target
  takes no rank), so one rank's check is every rank's. Then the same on every small grid and a
  sample of larger ones, as agent/verification/worker.py's ``all_grids`` stage does
  (agent/verification/probe.py's ``synthetic_sites`` and ``probe_sites``, a grid counted where the
  reference's own target is a permutation too). Saves the benchmark problem's order, and returns
  every site it checked (``sites``: ``[grid, args, label, real]``) for the compiled probe on the
  ranks' GPUs (agent/distributed/rank_worker.py).
- ``dist_numerics``: every rank of the kernel in this process through the Triton interpreter
  (kernels/distributed/runner.run_group) at the check problem with the candidate's own knobs
  (COMM_SMS, CE_GROUPS, SPLITS, tiles, schedule), for each checked W: two launches
  (epoch-counted flags reused), outputs poisoned before each, each rank compared with the fp32
  reference of every rank's inputs. A wait that gives up is DEADLOCK (rank, flag, epoch).
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

from swizzleperf.agent.verification import probe, prove, stages
from swizzleperf.agent.verification.candidate import target_source
from swizzleperf.agent.verification.probe import permutation_errors, probe_target
from swizzleperf.agent.verification.stages import StageFailure

_BENCH, _CHECK = "bench@candidate", "check@candidate"


def stage_permutation(module, spec, request: dict) -> dict:
    spec = _with_problems(spec, request)
    checks = [(_BENCH, request["world_size"], request["meta"])]
    if request.get("check_sizes") is not None:
        checks += [(_CHECK, w, request["meta"]) for w in request["check_world_sizes"]]
    summary, real = {}, []
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
            if (grid, args) not in {(r.grid, r.args) for r in real}:
                real.append(probe.Site(grid, args, f"{where}"))
    sites, summary["all_grids"] = _all_grids(module, spec, request, real)
    summary["all_grids"].update(_every_grid(module, spec, request, real))
    summary["sites"] = [[list(s.grid), list(s.args), s.label, s.real] for s in real + sites]
    return summary


def _every_grid(module, spec, request: dict, real: list) -> dict:
    """The proof that the tile order is a permutation on every grid, so at every W and problem the
    kernel accepts (agent/verification/prove.py): ``{proof, scope}``. A counterexample the target
    reproduces is NOT_PERMUTATION; an order the proof does not settle is refused too (checked
    exhaustively up to a box, but the distributed kernels write no guard).

    Raises:
        StageFailure: NOT_PERMUTATION as above.
    """
    source = target_source(Path(request["kernel_path"]).read_text(), spec.rewrite_target)
    checked = prove.every_grid(module, spec.rewrite_target, source, real, request.get("reference_path"),
                               what="the tile order")
    if checked["guard"] is not None and _statements(source) != _own_statements(request, spec):
        raise StageFailure("NOT_PERMUTATION", f"the tile order is {checked['scope']}: a distributed kernel's "
                                              f"tile order must be proven a permutation on every grid (every W "
                                              f"and problem it accepts); refused")
    return {k: v for k, v in checked.items() if k != "guard"}


def _statements(source: str) -> str:
    import ast
    import textwrap
    func = ast.parse(textwrap.dedent(source)).body[0]
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    return "\n".join(ast.unparse(node) for node in body)


def _own_statements(request: dict, spec) -> str | None:
    """The kernel's own tile order (the module at ``reference_path``), statement by statement:
    the kernel as the user wrote it needs no proof to run as it always has."""
    reference = request.get("reference_path")
    if not reference:
        return None
    return _statements(target_source(Path(reference).read_text(), spec.rewrite_target))


def _all_grids(module, spec, request: dict, real: list) -> tuple:
    """``(sites, summary)``: every small grid and a sample of larger ones for the real sites
    (agent/verification/probe.py's ``synthetic_sites``), kept where the reference's own target (the module at
    ``reference_path``) is a permutation too, each checked through the target under the
    interpreter: what agent/verification/worker.py's ``all_grids`` stage does for a single-GPU kernel.

    Raises:
        StageFailure: NOT_PERMUTATION at a grid (named, with its tiles), RUNTIME_ERROR where the
            target raised there.
    """
    sites, note = probe.guarded_sites(module, spec.rewrite_target, real, request.get("reference_path"))
    try:
        coords = probe.probe_sites(module, spec.rewrite_target, sites)
    except probe.ProbeError as exc:
        raise StageFailure("RUNTIME_ERROR", str(exc)) from None
    for site, c in zip(sites, coords):
        message = permutation_errors(c, site.grid)
        if message:
            raise StageFailure("NOT_PERMUTATION", f"the tile order is not a permutation at {site.label} "
                                                  f"({math.prod(site.grid)} tiles), a grid the kernel may be "
                                                  f"launched with (every small grid and a sample of larger ones "
                                                  f"are checked, not only the run's problems): {message}")
    return sites, {"sites": len(sites), "tiles": int(sum(math.prod(s.grid) for s in sites)), "note": note}


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


#: The stages this worker runs (the module docstring), by request name.
STAGES = {"dist_permutation": stage_permutation, "dist_numerics": stage_numerics}


def main(argv: list[str]) -> int:
    return stages.main(argv, run_request)


def run_request(request: dict) -> dict:
    """Run the requested stages; returns ``{"verdict", "reason", "details"}``."""
    return stages.run_stages(request, STAGES)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
