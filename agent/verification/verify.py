"""Verification of a candidate: static check here, then permutation and numerics in a worker
subprocess with a timeout (model-written code never runs in the agent's process)."""
from __future__ import annotations

import enum
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf import sandbox
from swizzleperf.agent.verification.bounds import OUTSIDE_ITS_TENSORS
from swizzleperf.agent.verification.stages import GPU_ALONE_STAGES
from swizzleperf.profiling.profiler import WORKER
from swizzleperf.sandbox import gpu_lock, untrusted
from swizzleperf.sandbox.paths import absolute_paths
from swizzleperf.sandbox.write_back import write_sealed


class Verdict(str, enum.Enum):
    """What became of a candidate; the reason beside it says why in one line."""

    PASS = "PASS"
    INVALID = "INVALID"                  # static check: not an acceptable rewrite target
    NOT_PERMUTATION = "NOT_PERMUTATION"  # some tile missing, repeated or out of range
    MISMATCH = "MISMATCH"                # output differs from the reference, or left unwritten
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    CRASH = "CRASH"                      # the worker died without a result
    NO_CANDIDATE = "NO_CANDIDATE"        # the proposer produced nothing (endpoint down, garbage)
    OUTSIDE_SPACE = "OUTSIDE_SPACE"      # a distributed configuration outside the kernel's declared space
    DEADLOCK = "DEADLOCK"                # a rank waited on a flag that was never set


@dataclass
class WorkerResult:
    """A worker's answer: verdict, one-line reason, per-stage details."""

    verdict: Verdict
    reason: str
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS


def run_worker(request: dict, timeout_s: float, interpret: bool, worker: str = WORKER) -> WorkerResult:
    """Run the worker module ``worker`` on ``request`` in a subprocess, in the box of
    sandbox/__init__.py: minimal environment (no keys, no proxies), an empty working directory of
    its own (removed afterwards), resource limits, no network where the OS allows, its own process
    group (killed on timeout or interrupt, and when the agent dies), and a file system it can
    write only in its temporary folder: the mapping it saves (``mapping_path``, also of
    ``items``) goes there and is copied to where the request asked once the worker is done.

    Args:
        request: the worker request (see agent/verification/worker.py); its paths are made
            absolute here.
        timeout_s: wall-clock limit in seconds; past it the worker is killed (verdict TIMEOUT).
        interpret: run Triton through its interpreter (``TRITON_INTERPRET=1``, CPU tensors).
        worker: the module run as ``python -m WORKER REQUEST OUT``: agent/verification/worker.py
            (the single-GPU stages) by default; a distributed kernel's evaluator passes
            agent/distributed/worker.py.
    """
    with tempfile.TemporaryDirectory(prefix="swizzleperf-") as folder:
        folder = Path(folder)
        request_path, out_path, cwd = folder / "request.json", folder / "result.json", folder / "cwd"
        cwd.mkdir()
        boxed, outputs = _outputs_into(absolute_paths(request), folder)
        # several workers share the GPU: this one compiles and checks beside them and asks for the
        # GPU alone only for its timing stages; else the lock (a no-op without sharing) is not needed
        turn = not interpret and gpu_lock.shared() and bool(GPU_ALONE_STAGES & set(request.get("stages", ())))
        if turn:
            boxed["gpu_turn"] = True
        request_path.write_text(json.dumps(boxed))
        command = sandbox.python_command("-m", worker, str(request_path), str(out_path))
        env = sandbox.worker_env(TRITON_INTERPRET="1" if interpret else "0", PYTHONUNBUFFERED="1",
                                 PYTHONDONTWRITEBYTECODE="1",
                                 TMPDIR=str(cwd))
        if interpret:   # a CPU worker: no GPU in sight, so nothing in it starts CUDA (its driver
            env["CUDA_VISIBLE_DEVICES"] = ""   # reserves more address space than the limit)
        try:
            limits = sandbox.worker_limits(timeout_s, interpret, (folder,))
            proc = (sandbox.run_gpu_turn if turn else sandbox.run)(command, cwd, env, timeout_s, limits)
        except subprocess.TimeoutExpired:
            stages = "+".join(request["stages"])
            return WorkerResult(Verdict.TIMEOUT, f"{stages} did not finish within {timeout_s:.0f} s "
                                                 f"(a hang, or a loop without bound?)")
        except sandbox.Unboxed as exc:
            return WorkerResult(Verdict.CRASH, str(exc))
        if not out_path.exists():
            return WorkerResult(Verdict.CRASH, f"worker exited with code {proc.returncode} and no "
                                               f"result: {_last_line(proc.stderr)}")
        try:
            result = _read_result(out_path)
        except (OSError, ValueError, untrusted.UntrustedInput) as exc:   # the folder was the worker's to write
            return WorkerResult(Verdict.CRASH, f"the worker's result is not one the worker writes: "
                                               f"{' '.join(str(exc).split())[:300]}")
        for scratch, wanted in outputs:
            if scratch.exists():
                why = _not_a_mapping(scratch)
                if why:   # the folder was the code's to write: nothing of it reaches the run
                    return WorkerResult(Verdict.CRASH, f"the mapping the worker left is not one it writes: {why}")
                shutil.copyfile(scratch, wanted)
    return result


#: The largest mapping file (program -> tile, int64): 2^27 programs, far above any launch here.
MAX_MAPPING_BYTES = 1 << 30


def _not_a_mapping(path: Path) -> str | None:
    """Why the ``.npy`` file a worker left is not a program -> tile mapping as the worker writes one
    (np.save of a 1-D integer array that is a permutation of 0..n-1), or None. Read without
    pickle, bounded in size, only a regular file (a named pipe, or a link to the agent's stdin, left
    there would block the agent): the agent and the simulator load it afterwards."""
    import stat

    import numpy as np
    try:
        found = path.lstat()
        if not stat.S_ISREG(found.st_mode):
            return "not a regular file"
        if found.st_size > MAX_MAPPING_BYTES:
            return f"{found.st_size} bytes, more than {MAX_MAPPING_BYTES}"
        order = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        return f"not a NumPy array file ({' '.join(str(exc).split())[:200]})"
    if not isinstance(order, np.ndarray) or order.ndim != 1 or order.dtype.kind not in "iu":
        return f"a {getattr(order, 'dtype', type(order).__name__)} array of shape {getattr(order, 'shape', '?')}"
    from swizzleperf.agent.verification.probe import is_permutation
    return None if is_permutation(order.reshape(-1, 1), (order.size,)) else "not a permutation of the tiles"


#: The largest result file a worker writes (its items' figures included): far above any real one.
MAX_RESULT_BYTES = 64 << 20


def _read_result(path: Path) -> WorkerResult:
    """A worker's ``result.json``, read as data: it lies in the folder the worker (and so the code
    under test) may write. Bounded in size and depth, UTF-8, its verdict one of ours.

    Raises:
        ValueError: not UTF-8, not JSON, or not shaped as a result; UntrustedInput: too big or deep, or a
            symbolic link (the worker's code may have left one to any file the agent can read).
    """
    raw = untrusted.read_json(path, MAX_RESULT_BYTES, path.name, 2 * untrusted.MAX_JSON_DEPTH,   # NaN kept
                             follow_links=False)
    if (not isinstance(raw, dict) or not isinstance(raw.get("verdict"), str) or not isinstance(raw.get("reason"), str)
            or not isinstance(raw.get("details"), dict)):
        raise ValueError(f"{path.name} is not a worker's result (a verdict, a reason, details)")
    return WorkerResult(Verdict(raw["verdict"]), raw["reason"], raw["details"])


def _outputs_into(request: dict, folder: Path) -> tuple:
    """``request`` with the files the worker writes (``mapping_path``, also of its ``items``)
    moved into ``folder``, the one place it may write; and the ``(there, wanted)`` pairs to copy
    back (``wanted`` as ``np.save`` names it: ``.npy`` added where missing)."""
    outputs = []

    def moved(part: dict) -> dict:
        if not part.get("mapping_path"):
            return part
        wanted = Path(part["mapping_path"])
        outputs.append((folder / f"mapping{len(outputs)}.npy",
                        wanted if wanted.suffix == ".npy" else wanted.with_name(wanted.name + ".npy")))
        return {**part, "mapping_path": str(outputs[-1][0])}

    boxed = moved(request)
    if "items" in boxed:
        boxed["items"] = [moved(item) for item in boxed["items"]]
    return boxed, outputs


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else "(nothing on stderr)"


@dataclass
class VerifyConfig:
    """How candidates are verified.

    Attributes:
        device: ``"cpu"`` (numerics through the interpreter at the ``check`` problem) or
            ``"cuda"`` (numerics compiled at ``check`` and ``default``).
        dtype: input dtype name.
        seeds: fresh input sets per numerics check.
        timeout_s: limit per worker, seconds.
    """

    device: str = "cpu"
    dtype: str = "bfloat16"
    seeds: tuple = (1, 2)
    timeout_s: float = 300.0


def numerics_problems(device: str) -> list:
    """The problems whose outputs :func:`verify` compares with the reference: ``check`` (edge
    tiles, through the interpreter) on a CPU; ``check`` and ``default`` compiled on a GPU."""
    return ["check"] if device == "cpu" else ["check", "default"]


def reference_module(candidates_dir: Path, kernel_path: Path, module_source: str) -> Path:
    """The kernel module as the run read it (``module_source``), written into the run's candidates
    folder as ``reference_<kernel file name>``: the ``reference_path`` of :func:`verify`, whose
    permutation check counts a synthetic grid only where this module's own target is a permutation
    too. Written anew at each call, read-only, as the candidates are (``write_sealed``: a new file
    renamed over the name): whatever was planted there (a link, to be written through or read as
    the reference; a named pipe, for the worker to wait on) is replaced.

    Raises:
        OSError: it cannot be written (``write_sealed``)."""
    path = Path(candidates_dir) / f"reference_{Path(kernel_path).name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_sealed(path, module_source)
    return path


def verify(kernel_path: Path, mapping_path: Path, config: VerifyConfig, time_it: bool = False,
           reference_path: Path | None = None, prove: bool = True) -> WorkerResult:
    """Permutation (default and check grids, every small grid and a sample of larger ones), then
    numerics, of the kernel module at ``kernel_path``.

    Saves the default problem's program -> tile map to ``mapping_path``. ``reference_path``: the
    kernel module as the user wrote it (agent/verification/probe.py: a synthetic grid counts where its own
    target is a permutation too; without it, grids are synthesised only for a target whose
    arguments are all the grid's extents). On CPU both stages run in one interpreted worker,
    numerics at ``check``. On a GPU the permutation runs interpreted, then again on the target as
    Triton compiles it (``compiled_permutation``: what only the interpreter does cannot pass), and
    numerics, in a second worker, at ``check`` (edge tiles) and at ``default``; with ``time_it``
    that worker then times the default problem (``details["timing"]``), which saves a process
    start and a compilation per candidate.
    """
    base = {"kernel_path": str(kernel_path), "dtype": config.dtype, "seeds": list(config.seeds),
            "problems": ["default", "check"], "mapping_path": str(mapping_path),
            "device": config.device, "timing_problem": "default",
            "reference_path": str(reference_path) if reference_path else None,
            "prove": prove}   # False: a guarded kernel, its order already checked (agent/verification/prove.py)
    if config.device == "cpu":
        result = run_worker({**base, "stages": ["permutation", "all_grids", "numerics"],
                             "numerics_problems": numerics_problems("cpu")}, config.timeout_s, interpret=True)
        return with_bounds_finding(result, "all_grids", base, config)
    result = run_worker({**base, "stages": ["permutation", "all_grids"]}, config.timeout_s, interpret=True)
    if not result.passed:
        return result
    stages = ["compiled_permutation", "numerics"] + (["timing"] if time_it else [])
    compiled = run_worker({**base, "stages": stages, "numerics_problems": numerics_problems(config.device)},
                          config.timeout_s, interpret=False)
    compiled = with_bounds_finding(compiled, "compiled_permutation", base, config)
    return WorkerResult(compiled.verdict, compiled.reason, {**result.details, **compiled.details})


#: The most a bounds check after a numerics failure may take (s): a diagnosis, not a stage of its own.
BOUNDS_TIMEOUT_S = 120.0


def with_bounds_finding(result: WorkerResult, before: str, base: dict, config: VerifyConfig) -> WorkerResult:
    """``result`` of a worker whose numerics failed (the stage ``before`` it passed, numerics did
    not; or the worker died) with, where the ``check`` launch reaches outside its tensors under
    the interpreter's checked accesses (the worker's ``bounds`` stage), that finding appended: the
    kernel, not the order, is then at fault (a GPU replay faulted or read other bytes than the app's
    run). Unchanged otherwise, or where the check itself fails or takes over BOUNDS_TIMEOUT_S."""
    died = result.verdict is Verdict.CRASH
    numerics_failed = (result.verdict in (Verdict.MISMATCH, Verdict.RUNTIME_ERROR) and before in result.details
                       and "numerics" not in result.details)
    if not (died or numerics_failed):
        return result
    checked = run_worker({**base, "stages": ["bounds"]}, min(config.timeout_s, BOUNDS_TIMEOUT_S), interpret=True)
    if checked.verdict is Verdict.MISMATCH and OUTSIDE_ITS_TENSORS in checked.reason:
        return WorkerResult(result.verdict, f"{result.reason}; under Triton's interpreter with every access "
                                            f"checked: {checked.reason}", result.details)
    return result
