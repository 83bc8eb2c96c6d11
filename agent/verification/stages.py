"""What every worker shares (agent/verification/worker.py for a single-GPU kernel,
agent/distributed/worker.py for a distributed one): the request loop (load the kernel module,
run the requested stages in order, stop at the first that fails, turn what went wrong into a
verdict and one line), the stage's failure (``StageFailure``), and the output checks of the
numerics stages (``poison``, ``compare_output``).

A worker's entry point is ``main(argv, run)`` with its own table of stages. The caller chooses
the worker module (``verify.run_worker``'s ``worker``), so that verification never imports the
stages of a room above it.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Callable

import numpy as np

from swizzleperf.agent.verification import probe
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.kernels.spec import KernelLoadError


#: What a mismatch says where two runs of the same launch on the same inputs disagree
#: (agent/verification/worker.py): the kernel, not an order, is at fault.
NOT_REPRODUCIBLE = ("the kernel's output is not a function of its inputs (it reads memory outside its "
                    "tensors or not yet written, or its programs race)")


class StageFailure(Exception):
    """A stage rejected the candidate: ``verdict`` (a Verdict value) and a one-line reason."""

    def __init__(self, verdict: str, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


def main(argv: list[str], run: Callable[[dict], dict]) -> int:
    """``REQUEST OUT``: read the JSON request, answer it with ``run`` (a worker's request ->
    result), write the JSON result."""
    request = json.loads(Path(argv[0]).read_text())
    result = run(request)
    Path(argv[1]).write_text(json.dumps(result))
    return 0


def run_stages(request: dict, stages: dict) -> dict:
    """Load ``request["kernel_path"]`` and run ``request["stages"]`` in order, each looked up in
    ``stages`` (name -> ``(module, spec, request) -> dict``); returns ``{"verdict", "reason",
    "details"}`` (and ``traceback`` where a stage failed in a way no stage foresaw). A module that
    does not load is COMPILE_ERROR; a stage not in ``stages`` is RUNTIME_ERROR."""
    details: dict = {}
    try:
        module, spec = load_kernel(request["kernel_path"])
    except KernelLoadError as exc:
        return {"verdict": "COMPILE_ERROR", "reason": str(exc), "details": details}
    try:
        for stage in request["stages"]:
            if request.get("gpu_turn") and stage in GPU_ALONE_STAGES:
                _wait_for_the_gpu(request)
            details[stage] = stages[stage](module, spec, request)
    except StageFailure as failure:
        return {"verdict": failure.verdict, "reason": failure.reason, "details": details}
    except Exception as exc:  # candidate code failed in a way we did not foresee: record it
        return {"verdict": classify(exc), "reason": one_line(exc), "details": details,
                "traceback": traceback.format_exc(limit=8)}
    return {"verdict": "PASS", "reason": "", "details": details}


#: The stages that read the GPU's clock: with ``request["gpu_turn"]`` (several workers share the
#: GPU) the worker asks for it before the first of them (sandbox.run_gpu_turn).
GPU_ALONE_STAGES = frozenset({"timing", "compare", "tune_launch"})


def _wait_for_the_gpu(request: dict) -> None:
    """Ask the agent for the GPU alone (one line on stdout) and wait for its answer (one line on
    stdin), once per worker; everything before ran side by side with the other workers."""
    if request.pop("gpu_turn", None):
        from swizzleperf.sandbox import GPU_TURN_ASK
        print(GPU_TURN_ASK, flush=True)
        sys.stdin.readline()


def classify(exc: Exception) -> str:
    name = type(exc).__name__
    return "COMPILE_ERROR" if "Compil" in name or "Unsupported" in name else "RUNTIME_ERROR"


def one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


# -- numerics ------------------------------------------------------------------------------------

def poison_value(dtype):
    """The value ``poison`` fills an integer output of ``dtype`` with: the most negative value of a
    signed type, the largest of an unsigned one (an unsigned type's minimum is 0, which kernels write
    and caches start from: a uint8 KV cache filled from zeros read as never written)."""
    import torch
    info = torch.iinfo(dtype)
    return info.min if info.min < 0 else info.max


def poison(out):
    """Fill ``out`` with a value no kernel writes (NaN; for integer outputs :func:`poison_value`)
    and return the function that finds the elements still holding it."""
    import torch
    if out.dtype.is_floating_point:
        out.fill_(float("nan"))
        return torch.isnan
    sentinel = poison_value(out.dtype)
    out.fill_(sentinel)
    return lambda t: t == sentinel


def compare_output(out, unwritten, expected, spec, problem, meta, dtype: str, where: str) -> float:
    """``||out - ref|| / ||ref||`` (float64), after checking that nothing is left unwritten
    (``unwritten``: the boolean mask ``poison`` returned, applied to ``out``).

    Raises:
        StageFailure: MISMATCH, naming the unwritten tiles or the error against the tolerance.
    """
    import torch
    if bool(unwritten.any()):
        raise StageFailure("MISMATCH", f"output never written (still poisoned) at "
                                       f"{int(unwritten.sum())} elements, {where}: "
                                       f"{_unwritten_tiles(unwritten, spec, problem, meta)}")
    diff = torch.linalg.vector_norm((out.double() - expected.double()).flatten())
    rel = float(diff / torch.linalg.vector_norm(expected.double().flatten()).clamp_min(1e-30))
    tol = spec.tolerance[dtype]
    if not rel <= tol:
        raise StageFailure("MISMATCH", f"output differs from the reference: relative error "
                                       f"{rel:.3e} > tolerance {tol:.1e} ({where}, {dtype})")
    return rel


def _unwritten_tiles(unwritten, spec, problem, meta) -> str:
    """Name the logical tiles holding unwritten elements, when the spec says how the output is
    tiled; otherwise the first unwritten index."""
    grid = spec.tile_grid(problem, meta)
    if spec.output_tile is None or unwritten.dim() != len(grid):
        return f"first at index {tuple(int(i) for i in unwritten.nonzero()[0])}"
    tile = tuple(spec.output_tile(problem, meta))
    idx = unwritten.nonzero().cpu().numpy() // np.asarray(tile)
    flat = np.unique(np.ravel_multi_index(tuple(idx.T), grid))
    return f"{probe.tiles_text(flat, grid)} (tiles of {'x'.join(map(str, tile))} elements)"
