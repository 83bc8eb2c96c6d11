"""One configuration of a distributed kernel verified on W visible GPUs and timed against torch +
NCCL, from the command line (what a distributed run's ``best_command.sh`` runs)::

    python -m swizzleperf.agent.distributed run --kernel kernels/distributed/K.py \
        --config '{"pattern": ...}' --problem NAME|K=V,... [--world-size W] [--dtype D]

Exit status 0 when the configuration passed, 1 when it was rejected, 2 on bad input (one line).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from swizzleperf.agent.distributed.evaluator import DistEvaluator, resolve_target
from swizzleperf.agent.distributed.measured import answer
from swizzleperf.agent.distributed.problems import ProblemError, resolve
from swizzleperf.agent.distributed.rank_pool import PoolError
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.sandbox.untrusted import read_source

PROG = "python -m swizzleperf.agent.distributed run"


def run_configuration(kernel: str, config: str, problem: str, world_size: int | None,
                      dtype: str | None) -> dict:
    """Verify one configuration of a distributed kernel on W visible GPUs and time it against
    torch + NCCL (the module docstring: what a report says to run next).

    Returns ``{"verdict", "reason", "verified_at", "time_ms", "torch_nccl_ms", ..., "answer"}``.

    Raises:
        ValueError: fewer than W GPUs of a kind the pool runs on, a configuration outside the
            kernel's space, a dtype it does not support.
        ProblemError: a problem it cannot run (agent/distributed/problems.py).
    """
    path = Path(kernel).resolve()
    spec = load_spec(path)
    target = resolve_target(None, world_size)
    if target.mode != "measured":
        raise ValueError(f"cannot run on this machine: {target.message}")
    name, sizes = resolve(spec, problem, target.world_size, target.spec.compute_units)
    dtype = dtype or spec.dtypes[0]
    if dtype not in spec.dtypes:
        raise ValueError(f"--dtype must be one of {', '.join(spec.dtypes)}, got {dtype}")
    with tempfile.TemporaryDirectory(prefix="swizzleperf-run-") as folder:
        evaluator = DistEvaluator(
            kernel_path=path, module_source=read_source(path), spec=spec, problem_name=name,
            world_size=target.world_size, target=target, candidates_dir=Path(folder) / "candidates",
            dtype=dtype, problem_sizes=sizes)
        try:
            prepared = evaluator.prepare("run", config)
            if prepared["verdict"]:
                raise ValueError(prepared["reason"])
            checked = evaluator.verify(prepared["kernel_file"], time_it=True)
            summary = {"verdict": checked["verdict"], "reason": checked["reason"], "problem": name,
                       "world_size": target.world_size, "config": prepared["config"]}
            if checked["verdict"] == "PASS":
                metrics = evaluator.measure(prepared["kernel_file"], checked["mapping"], checked["details"])
                summary.update({k: metrics.get(k) for k in (
                    "verified_at", "time_ms", "time_spread_ms", "time_source", "torch_nccl_ms",
                    "torch_nccl_spread_ms", "paired_gain_ms", "paired_spread_ms")})
                summary["references"] = evaluator.ranks.references()
                summary["answer"] = answer({**metrics, "name": json.dumps(prepared["config"])}, "measured",
                                           summary["references"])["line"]
        finally:
            if evaluator._ranks is not None:
                evaluator.ranks.close()
    return summary


def main(argv: list[str]) -> int:
    """``run ...`` (``--help`` for its options)."""
    if argv[:1] != ["run"]:
        print(f"usage: {PROG} --kernel FILE --config JSON --problem NAME|K=V,... [--world-size W]",
              file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog=PROG,
                                     description="Verify one configuration of a distributed kernel on "
                                                 "W GPUs and time it against torch + NCCL.")
    parser.add_argument("--kernel", required=True, help="the kernel module (kernels/distributed/K.py)")
    parser.add_argument("--config", required=True, help="the configuration, JSON (report.json's best config)")
    parser.add_argument("--problem", required=True, help="a named problem or K=V,... sizes")
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--dtype", default=None)
    args = parser.parse_args(argv[1:])
    try:
        summary = run_configuration(args.kernel, args.config, args.problem, args.world_size, args.dtype)
    except (ProblemError, PoolError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1, default=float))
    return 0 if summary.get("verdict") == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
