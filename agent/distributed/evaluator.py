"""Candidates of a distributed kernel and their evaluation: the seam between the loop
(agent/loop/graph.py) and a ``DistKernelSpec``, with the same methods as agent/verification/evaluate.py's
``Evaluator``.

A candidate is an *overlap configuration*, as JSON text (what a proposer writes and the history
shows)::

    {"pattern": "fused_sequential", "COMM_SMS": 16, "BLOCK_M": 128, "BLOCK_N": 128,
     "BLOCK_K": 64, "num_warps": 4, "num_stages": 4, "SCHEDULE": "persistent",
     "swizzle": "grouped-m:8"}

Every key but ``pattern`` and ``swizzle`` is a launch knob the spec declares (``spec.knobs``, each
with its allowed values); a knob left out keeps the kernel's default. ``swizzle`` is optional: a
catalog name the spec allows, or the full source of a new ``@triton.jit`` rewrite target (checked
statically, spliced into a copy of the module by AST, exactly as for single-GPU kernels).

Verification, always with the candidate's own knobs (tiles, COMM_SMS, CE_GROUPS, SPLITS, schedule):
the rewrite target a permutation of the per-rank tiles at the benchmark problem and at a check
problem sized for the candidate (agent/distributed/problems.py), in an interpreted worker
(agent/distributed/worker.py); then the numerics, outputs poisoned, every rank against the fp32
reference:

- simulated (fewer than W GPUs of the kind): all ranks in one process through the Triton
  interpreter at W = 2 and 3 on that check problem; a wait that never completes is a DEADLOCK
  naming the rank, the flag and the epoch;
- measured (W GPUs visible): on the ranks of the pool the optimizer starts (agent/distributed/rank_pool.py),
  at the check problem and at the benchmark problem; a rank that hangs or dies ends the candidate as
  DEADLOCK / RUNTIME_ERROR naming the rank, and the next candidate gets fresh ranks.

Measurement: measured, the candidate timed interleaved with torch + NCCL (the slowest rank's time,
median and spread, and the paired gain over torch + NCCL), the overlap model recalibrated on each
measurement (profiling/overlap_calibration.py); simulated, the model's prediction with its interval
(``simulated:<spec>xW``), beside the measurements committed under bench/results/ for the same kernel,
problem, W and GPU kind where they exist. The answer (agent/distributed/measured.py) is decided by
measurements only: the best configuration when it beats torch + NCCL beyond the paired spread,
else "use torch + NCCL".
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf.agent.distributed import worker as dist_worker
from swizzleperf.agent.distributed.session import REFERENCES as SESSION_REFERENCES
from swizzleperf.agent.verification.candidate import (CandidateError, canonical_target, check_candidate, splice,
                                                      target_args, unified_diff)
from swizzleperf.agent.verification.swizzles import UnknownSwizzleError, catalog_source
from swizzleperf.agent.verification.verify import Verdict, reference_module, run_worker
from swizzleperf.sandbox.write_back import replace_file, write_sealed

#: Relative gain of the predicted time below which two configurations count as equal: the overlap
#: model's resolution is far coarser (bench/results/overlap_model_validation.md).
PREDICTED_TIE = 0.01
CHECK_WORLD_SIZES = (2, 3)


class OutsideSpace(CandidateError):
    """A configuration outside the kernel's declared space; the message names the allowed values."""


@dataclass(frozen=True)
class DistCandidate:
    """A parsed configuration: ``pattern``, the knob values that differ from nothing (``meta``,
    only the keys given), and the swizzle (None: the kernel's own; else a catalog name or source)."""

    pattern: str
    meta: dict
    swizzle: str | None = None

    def to_json(self) -> str:
        """Canonical text: ``pattern`` first, knobs sorted, ``swizzle`` last (repeat detection
        compares these)."""
        body = {"pattern": self.pattern, **dict(sorted(self.meta.items()))}
        if self.swizzle is not None:
            body["swizzle"] = self.swizzle
        return json.dumps(body)

    def label(self) -> str:
        """A short name: the pattern and the knobs set, e.g. ``fused_sequential COMM_SMS=16``."""
        parts = [self.pattern] + [f"{k}={v}" for k, v in sorted(self.meta.items())]
        if self.swizzle is not None:
            parts.append(f"swizzle={self.swizzle}" if "def " not in self.swizzle else "swizzle=source")
        return " ".join(parts)


def parse_candidate(text: str, spec) -> DistCandidate:
    """Parse and check a configuration against ``spec.knobs`` (agent/distributed/config.py: its shape,
    within bounds, then its place in the space with exact types).

    Raises:
        CandidateError: not a JSON object within bounds, ``pattern`` missing, or a field of the
            wrong shape (a list for a pattern, a number for a swizzle); the message quotes the
            first 200 characters received.
        OutsideSpace: an unknown knob or a value outside the allowed ones, or of another type
            (message: the knob, the allowed values, the value found).
    """
    from swizzleperf.agent.distributed import config as dist_config
    try:
        pattern, meta, swizzle = dist_config.parse(text, spec)
    except dist_config.OutsideSpaceError as exc:
        raise OutsideSpace(str(exc)) from None
    except dist_config.ConfigError as exc:
        raise CandidateError(str(exc)) from None
    return DistCandidate(pattern, meta, swizzle)


@dataclass(frozen=True)
class DistTarget:
    """Where a distributed run's figures come from: the hardware spec, W ranks, the mode
    (``simulated``: the overlap model; ``measured``: W GPUs of that kind), one line for the user."""

    spec: object
    world_size: int
    mode: str
    message: str
    device: object = None


DEFAULT_SIMULATED_HW = "h200"   # the GPU the overlap model was fitted and validated on
DEFAULT_SIMULATED_WORLD_SIZE = 4


#: GPUs of one NVLink node (HGX H100 / H200 boards: 8): a world size above it spans nodes, whose
#: links the overlap model does not price.
GPUS_PER_NODE = 8


def resolve_target(hw: str | None, world_size: int | None) -> DistTarget:
    """The target of a distributed run: W = ``world_size``, else the visible GPUs (two or more),
    else 4. Measured when W GPUs of the spec's kind are visible (NVIDIA: the rank pool runs NCCL
    and symmetric memory); the overlap model stands in otherwise (``simulated:<spec>xW``), and the
    message says why. A W above ``GPUS_PER_NODE`` carries a caveat.

    Raises:
        UnknownHardwareError: ``hw`` names no spec, or ``world_size`` is below 2 (one line).
    """
    from swizzleperf import hwspecs
    if world_size is not None and world_size < 2:
        raise hwspecs.UnknownHardwareError(f"--world-size must be at least 2, got {world_size}")
    device = hwspecs.detect_device()
    gpus = _visible_gpus() if device is not None else 0
    world_size = world_size or (gpus if gpus >= 2 else DEFAULT_SIMULATED_WORLD_SIZE)
    detected = hwspecs.match_spec(device)[0] if device else None
    spec = hwspecs.load_spec(hw) if hw else detected
    spec = spec or hwspecs.load_spec(DEFAULT_SIMULATED_HW)
    caveat = (f"; caveat: W = {world_size} spans more than one node (a node has {GPUS_PER_NODE} GPUs): "
              f"the model prices NVLink between every pair of ranks, which no multi-node job has"
              if world_size > GPUS_PER_NODE else "")
    if (device is not None and device.vendor == "nvidia" and gpus >= world_size and detected is not None
            and detected.name == spec.name):
        return DistTarget(spec, world_size, "measured",
                          f"measured: {world_size} x {device.name} (rank processes started by the "
                          f"optimizer; every figure the slowest rank's, timed interleaved with torch + "
                          f"NCCL){caveat}", device)
    if gpus < world_size:
        why = f"{gpus} GPU(s) visible, {world_size} needed"
    elif detected is None or detected.name != spec.name:
        why = f"the visible GPUs are not {spec.display_name}"
    else:
        why = "the rank pool needs NVIDIA GPUs"
    return DistTarget(spec, world_size, "simulated",
                      f"simulated: the overlap model for {spec.display_name} x {world_size} "
                      f"(simulated:{spec.name}x{world_size}; {why}): predicted times with their "
                      f"intervals, no speedup claimed{caveat}")


def _visible_gpus() -> int:
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def default_candidate(spec) -> DistCandidate:
    """The kernel's default: its first pattern and default meta, its own swizzle."""
    return DistCandidate(spec.patterns[0], {})


@dataclass
class DistEvaluator:
    """Evaluates configurations of one distributed kernel at one problem and world size.

    Attributes:
        kernel_path / module_source: the user's kernel module (read, never written) and its text.
        spec: its ``DistKernelSpec`` (loaded with the rewrite target stood in: agent/verification/load.py).
        problem_name: the benchmark problem; ``world_size``: W ranks.
        target: the resolved ``hwspecs.Target``; ``mode`` is "simulated" (the overlap model) or
            "measured".
        candidates_dir: where each candidate's module copy, configuration and tile map go.
        timeout_s: limit per worker, seconds; ``dtype``: input dtype name.
        problem_sizes: the benchmark problem's sizes where it is the user's own shape (then
            ``problem_name`` is its ``K=V,...`` text); None for a named problem of the spec.
        pool_device: ``"cuda"``; ``"cpu"`` runs the measured mode's rank pool through the
            interpreter (the tests); ``max_spins``: the pool's spin-wait bound (None: default).
        calibration: the overlap model recalibrated on this run's measurements (measured mode) or
            on the committed measurements of this kernel, problem, W and GPU kind (simulated).
        gemm_config: measured mode: the per-rank GEMM configuration measured for this problem's
            shape on this GPU (agent/distributed/problems.tuned_gemm), which becomes the kernel's default
            here: ``{"knobs", "source"}`` (``knobs`` empty where none was measured).
    """

    kernel_path: Path
    module_source: str
    spec: object
    problem_name: str
    world_size: int
    target: object
    candidates_dir: Path
    timeout_s: float = 300.0
    dtype: str = "bfloat16"
    problem_sizes: dict | None = None
    pool_device: str = "cuda"
    max_spins: int | None = None
    calibration: object = None
    gemm_config: dict = field(default_factory=dict)
    _baseline_prediction: dict = field(default_factory=dict)
    _ranking: list | None = field(default=None, repr=False)
    _ranks: object = field(default=None, repr=False)
    _committed: list | None = field(default=None, repr=False)
    _confirmed_torch: dict | None = field(default=None, repr=False)
    _orders: dict = field(default_factory=dict, repr=False)   # verified tile orders (measured mode)
    time_account: list = field(default_factory=list)          # seconds per candidate (measured mode)

    def __post_init__(self) -> None:
        from swizzleperf.profiling.overlap_calibration import Calibration
        if self.problem_sizes is not None and self.spec.problems.get(self.problem_name) != self.problem_sizes:
            self.spec = dataclasses.replace(self.spec, problems={**self.spec.problems,
                                                                 self.problem_name: dict(self.problem_sizes)})
        if self.mode == "measured" and not self.gemm_config:
            self._use_tuned_gemm()
        if self.calibration is None:
            self.calibration = Calibration()
            if self.mode == "simulated":
                self._calibrate_on_committed()

    def _use_tuned_gemm(self) -> None:
        """Measured mode: the per-rank GEMM configuration measured for this problem's shape on this
        GPU becomes the kernel's default (its ``meta``) and the first of its tile configurations,
        so that the baseline, the pattern sweep and every knob a candidate leaves out start from
        the best configuration known for the shape. Where a pattern takes another one
        (``tuned_gemm``'s ``pattern``: its GEMM on fewer programs, or constraints that refuse the
        first), that one is a tile configuration next, so that the search measures it too."""
        from swizzleperf.agent.distributed.problems import tuned_gemm
        device = getattr(self.target.device, "name", None)
        sms = self.target.spec.compute_units
        knobs, source = tuned_gemm(self.spec, self.problem, self.world_size, self.dtype, device, sms)
        self.gemm_config = {"knobs": knobs, "source": source}
        if not knobs:
            return
        meta = {**self.spec.meta, **knobs}
        keys = {k for t in self.spec.tile_configs for k in t} | set(knobs)

        def tile(knobs_: dict) -> dict:
            full = {**self.spec.meta, **knobs_}
            return {k: full[k] for k in keys if k in full}
        chosen = [tile(knobs)]
        for pattern in self.spec.patterns:
            fewer, _ = tuned_gemm(self.spec, self.problem, self.world_size, self.dtype, device, sms,
                                  pattern=pattern)
            if fewer and tile(fewer) not in chosen:
                chosen.append(tile(fewer))
        others = tuple(t for t in self.spec.tile_configs
                       if all({k: t.get(k) for k in c} != c for c in chosen))
        self.spec = dataclasses.replace(self.spec, meta=meta, tile_configs=tuple(chosen) + others)

    @property
    def mode(self) -> str:
        return self.target.mode

    @property
    def arg_names(self) -> list:
        return target_args(self.module_source, self.spec.rewrite_target)

    @property
    def problem(self) -> dict:
        return dict(self.spec.problems[self.problem_name])

    def meta(self, candidate: DistCandidate) -> dict:
        """The launch meta of a candidate at the benchmark problem: the spec's, then its knobs."""
        return self.spec.meta_for(self.problem_name, candidate.meta)

    # -- what the loop starts from --------------------------------------------------------------

    def baseline(self) -> tuple:
        """``(name, text)`` of the kernel's default configuration."""
        return "default", default_candidate(self.spec).to_json()

    def expert(self) -> tuple | None:
        """``(name, text)`` of the default configuration with the spec's expert tile order; None
        where the spec has none or the kernel's own order is that order (nothing to measure twice)."""
        if not self.spec.expert or self.is_own_order(self.spec.expert):
            return None
        return f"default swizzle={self.spec.expert}", DistCandidate(self.spec.patterns[0], {},
                                                                    self.spec.expert).to_json()

    def canonical(self, candidate: DistCandidate) -> DistCandidate:
        """The candidate without the knobs that equal the kernel's default at this problem and
        without a tile order that is the kernel's own (so that the same configuration has one text);
        a tile-order source as agent/verification/candidate.canonical_target writes it (what is
        spliced, verified and reported, never the proposer's text).

        Raises:
            CandidateError: a tile-order source that fails the static check.
        """
        default = self.spec.meta_for(self.problem_name)
        swizzle = candidate.swizzle
        if swizzle is not None and "def " in swizzle:
            swizzle = canonical_target(swizzle, self.spec.rewrite_target, self.arg_names)
        if swizzle is not None and self.is_own_order(swizzle):
            swizzle = None
        return DistCandidate(candidate.pattern,
                             {k: v for k, v in candidate.meta.items() if default.get(k) != v}, swizzle)

    def may_be_best(self, attempt: dict) -> bool:
        """Every configuration measured in the run may be its best and its answer: the kernel's
        default, the expert order and every iteration (the loop's baseline node and head-to-head
        ask; a single-GPU run keeps its expert order as a reference only)."""
        return True

    def order_cannot_matter(self) -> str | None:
        """Never here: a configuration changes the overlap of communication, not only a tile order."""
        return None

    def analysis(self, baseline: dict) -> str:
        """What a proposer is told about the workload: per-rank GEMM shape and tiles against the
        SMs, the interconnect, the default's predicted breakdown and torch + NCCL's."""
        from swizzleperf.prompts import render
        meta = self.spec.meta_for(self.problem_name, {"NUM_SMS": self.target.spec.compute_units})
        grid = self._tile_order(meta)[0]
        return render("distributed_analysis.j2", kernel=self.spec.name, problem=self.problem_name,
                      sizes=self.problem, world_size=self.world_size, hw=self.target.spec,
                      grid=grid, tiles=math.prod(grid) if grid else None, meta=meta,
                      baseline=(baseline.get("metrics") or {}), torch_nccl=self.baseline_prediction(),
                      notes=self.spec.notes, interconnect=interconnect(self.target.spec),
                      references=self.ranks.references() if self.mode == "measured" else None)

    def context_fields(self) -> dict:
        """The workload a proposer is told about: problem, default meta, and the first tile grid
        the rewrite target walks (with its arguments) at the default configuration."""
        meta = self.spec.meta_for(self.problem_name)
        grid, args = self._tile_order({**meta, "NUM_SMS": self.target.spec.compute_units})
        return {"problem": self.problem, "meta": meta, "tile_grid": grid, "swizzle_args": args}

    def _tile_order(self, meta: dict) -> tuple:
        if self.spec.tile_orders is None:
            return (), ()
        grid, args = self.spec.tile_orders(self.problem, self.world_size, meta)[0]
        return tuple(grid), tuple(args)

    def report_extra(self, answer_file: str | None = None) -> dict:
        """report.json's ``distributed`` block (``answer_file``, the run's answer, is not needed:
        the confirmation rounds time the answer and its references already): problem, sizes, W, torch + NCCL predicted; measured:
        the references (torch + NCCL, torch's fused op, the GEMM alone, the communication alone,
        the perfect-overlap bound), the confirmation's torch + NCCL, the pool's starts (seconds each)
        and restarts, the GEMM configuration the run started from, where each candidate's time
        went (``time_account``: seconds of the permutation check and of the ranks' request);
        simulated: the committed measurements used; both: the model's calibration."""
        block = {"problem": self.problem_name, "sizes": self.problem, "world_size": self.world_size,
                 "torch_nccl": self.baseline_prediction(), "calibration": self.calibration.summary()}
        if self.mode == "measured":
            block["gemm_config"] = self.gemm_config
        if self.mode == "measured" and self._ranks is not None:
            block["references"] = self._ranks.measured_references()
            block["pool"] = {"starts": self._ranks.pool.starts, "restarts": self._ranks.restarts,
                             "device": self._ranks.pool.device_name,
                             "start_seconds": self._ranks.pool.start_seconds, "note": self._ranks.pool.note}
            block["confirmed_torch_nccl"] = self._confirmed_torch
            block["time_account"] = self.time_account
        else:
            block["committed"] = self.committed_measurements()
        block["check_world_sizes"] = list(self.check_world_sizes)
        return {"distributed": block}

    def precheck(self, text: str, history: list, baseline: dict) -> str | None:
        """Why a configuration is not worth an iteration, or None: outside the space or the
        constraints, or the same configuration as the baseline or an earlier attempt."""
        from swizzleperf.agent.verification.evaluate import repeat_of
        prepared = self.prepare("precheck", text, dry_run=True)
        if prepared["verdict"]:
            return prepared["reason"]
        return repeat_of(self._key(text), baseline, history, self._key)

    def _key(self, text: str) -> str:
        return self.canonical(parse_candidate(text, self.spec)).to_json()

    # -- evaluation -----------------------------------------------------------------------------

    def prepare(self, label: str, text: str, dry_run: bool = False) -> dict:
        """Parse, check against the space and the constraints, splice the swizzle. Returns
        ``{verdict, reason, kernel_file, diff}``; verdict OUTSIDE_SPACE or INVALID on rejection.
        ``dry_run``: the checks only, nothing written."""
        try:
            candidate = self.canonical(parse_candidate(text, self.spec))
            module = self.module_source
            if candidate.swizzle is not None:
                module = splice(module, self.spec.rewrite_target, self._swizzle_source(candidate.swizzle))
        except OutsideSpace as exc:
            return _rejected(Verdict.OUTSIDE_SPACE, str(exc))
        except CandidateError as exc:
            return _rejected(Verdict.INVALID, str(exc))
        why_not = self._constraint(candidate)
        if why_not:
            return _rejected(Verdict.OUTSIDE_SPACE, f"{candidate.label()}: {why_not}")
        if dry_run:
            return {"verdict": "", "reason": ""}
        self.candidates_dir.mkdir(parents=True, exist_ok=True)
        path = self.candidates_dir / f"{_slug(label)}_{self.kernel_path.name}"
        sealed = write_sealed(path, module)   # read-only, its digest kept: --in-place writes only this text
        replace_file(path.with_suffix(".config.json"), candidate.to_json().encode("utf-8"))   # a link there replaced
        diff = unified_diff(self.module_source, module, self.kernel_path.name) if module != self.module_source else ""
        return {"verdict": "", "reason": "", "kernel_file": str(path), "kernel_sha256": sealed, "diff": diff,
                "source": candidate.to_json(),
                "config": json.loads(candidate.to_json())}

    def is_own_order(self, swizzle: str) -> bool:
        """True when the catalog order ``swizzle`` is the kernel's own tile order (same source)."""
        from swizzleperf.agent.verification.candidate import target_source
        try:
            return _normalised(self._swizzle_source(swizzle)) == _normalised(
                target_source(self.module_source, self.spec.rewrite_target))
        except CandidateError:
            return False

    def _swizzle_source(self, swizzle: str) -> str:
        if "def " in swizzle:
            check_candidate(swizzle, self.spec.rewrite_target, self.arg_names)
            return swizzle
        allowed = self.spec.knobs.get("swizzle", ())
        if swizzle not in allowed:
            raise OutsideSpace(f"swizzle must be a rewrite-target source or one of "
                               f"{', '.join(allowed)}, got {swizzle!r}")
        try:
            return catalog_source(swizzle, self.arg_names)
        except UnknownSwizzleError as exc:
            raise OutsideSpace(str(exc)) from None

    def _constraint(self, candidate: DistCandidate) -> str | None:
        check = getattr(self.spec, "constraints", None)
        if check is None:
            return None
        meta = {"NUM_SMS": self.target.spec.compute_units, **self.meta(candidate)}
        return check(self.problem, self.world_size, candidate.pattern, meta)

    @property
    def check_world_sizes(self) -> tuple:
        """The world sizes of the numerics: W on the real ranks; 2 and 3 in the interpreter."""
        return (self.world_size,) if self.mode == "measured" else CHECK_WORLD_SIZES

    def check_sizes(self, candidate: DistCandidate) -> tuple:
        """``(sizes, note)`` of the check problem for the candidate's own knobs
        (agent/distributed/problems.py)."""
        from swizzleperf.agent.distributed import problems as dist_problems
        return dist_problems.check_problem(self.spec, candidate.pattern, self.meta(candidate),
                                           self.check_world_sizes, self.target.spec.compute_units)

    def verify(self, kernel_file: str, time_it: bool) -> dict:
        """Permutation in an interpreted worker, then the numerics with the candidate's own knobs:
        in the interpreter at W = 2 and 3 (simulated) or on the rank pool at the check and the
        benchmark problem, timed against torch + NCCL with ``time_it`` (measured). See the module
        docstring."""
        candidate = self._candidate_of(kernel_file)
        mapping = str(Path(kernel_file).with_suffix(".map.npy"))
        meta = self.meta(candidate)
        check, note = self.check_sizes(candidate)
        if self.mode == "measured":
            self.ranks.start_soon()    # the ranks start while the permutation worker runs
        started = time.monotonic()
        out, cached = self._permutation(kernel_file, candidate, meta, check, mapping)
        seconds = {"permutation": time.monotonic() - started, "permutation_cached": cached}
        out["details"]["seconds"] = seconds
        if out["verdict"] != Verdict.PASS.value:
            return out
        if self.mode != "measured":
            out["details"]["verified_at"] = self._verified_text(candidate, check, note, None)
            return out
        sites = None if cached else out["details"].get("dist_permutation", {}).get("sites")
        started = time.monotonic()
        answer = self.ranks.evaluate(kernel_file, candidate.pattern, self._rank_meta(meta), check, time_it,
                                     probe_sites=sites)
        seconds.update(ranks=time.monotonic() - started, ranks_inside=answer.get("seconds"),
                       pool_start=self.ranks.waited_s)
        self.time_account.append({"name": candidate.label(), **seconds})
        if answer.get("verdict") != Verdict.PASS.value:
            return {**out, "verdict": answer.get("verdict", Verdict.RUNTIME_ERROR.value),
                    "reason": answer.get("reason", "") + (" (the ranks were replaced)" if answer.get("broken") else "")}
        known = self._orders.get(self._order_key(kernel_file, meta, check)) if sites is not None else None
        if known is not None:
            known["ranks_checked"] = True
        out["details"]["ranks"] = answer
        out["details"]["verified_at"] = self._verified_text(candidate, check, note, self.ranks.pool.device_name)
        return out

    def _permutation(self, kernel_file: str, candidate: DistCandidate, meta: dict, check: dict | None,
                     mapping: str) -> tuple:
        """``(result, cached)``: the interpreted worker's permutation check of the candidate's tile
        order (every rank's tiles at the benchmark and check problems, then every small grid and a
        sample of larger ones), and in simulated mode its numerics at W = 2 and 3. In measured mode
        an order already verified on the same tile grids, here and on the ranks (compiled, on GPUs:
        agent/distributed/rank_worker.py), is not checked again: its result and tile map are reused
        (``cached``); most candidates change a pattern or a knob only, not the order or the tiles."""
        key = self._order_key(kernel_file, meta, check) if self.mode == "measured" else None
        known = self._orders.get(key) if key is not None else None
        if known is not None and known.get("ranks_checked"):
            shutil.copyfile(known["mapping"], mapping)
            return {"verdict": Verdict.PASS.value, "reason": "", "mapping": mapping,
                    "details": {"dist_permutation": {**known["details"], "cached_from": known["name"]}}}, True
        sms = self.target.spec.compute_units
        stages = ["dist_permutation"] if self.mode == "measured" else ["dist_permutation", "dist_numerics"]
        request = {"kernel_path": kernel_file, "stages": stages, "pattern": candidate.pattern,
                   "meta": {**meta, "NUM_SMS": sms}, "dtype": self.dtype, "problem": self.problem_name,
                   "problem_sizes": self.problem, "world_size": self.world_size, "num_sms": sms,
                   "check_sizes": check, "check_world_sizes": list(self.check_world_sizes),
                   "mapping_path": mapping, "reference_path": str(self.reference_file())}
        result = run_worker(request, self.timeout_s, interpret=True, worker=dist_worker.__name__)
        out = {"verdict": result.verdict.value, "reason": result.reason, "details": result.details,
               "mapping": mapping}
        if key is not None and result.verdict is Verdict.PASS and Path(mapping).exists():
            details = {k: v for k, v in result.details.get("dist_permutation", {}).items() if k != "sites"}
            self._orders[key] = {"details": details, "mapping": mapping, "name": candidate.label()}
        return out, False

    def _order_key(self, kernel_file: str, meta: dict, check: dict | None) -> str | None:
        """The candidate's tile order and the tile grids it walks (benchmark and check problems),
        as one text; None where the spec declares no tile grids."""
        if self.spec.tile_orders is None:
            return None
        from swizzleperf.agent.verification.candidate import target_source
        source = target_source(Path(kernel_file).read_text(), self.spec.rewrite_target)
        problems = [(self.problem, self.world_size)] + ([(check, w) for w in self.check_world_sizes] if check else [])
        grids = [[[int(x) for x in grid], [int(a) for a in args]]
                 for sizes, w in problems for grid, args in self.spec.tile_orders(sizes, w, meta)]
        return json.dumps([_normalised(source), grids])

    def reference_file(self) -> Path:
        """The kernel module as the run read it (``verify.reference_module``)."""
        return reference_module(self.candidates_dir, self.kernel_path, self.module_source)

    def _rank_meta(self, meta: dict) -> dict:
        """The launch meta the ranks get: on GPUs the device's own SM count decides; the CPU
        ranks of the tests run the target GPU's (the interpreter has no SMs)."""
        return meta if self.pool_device == "cuda" else {**meta, "NUM_SMS": self.target.spec.compute_units}

    @property
    def ranks(self):
        """The rank pool's requests of this run (measured mode; started on first use)."""
        if self._ranks is None:
            from swizzleperf.agent.distributed.measured import MAX_CONTENDERS, MeasuredRanks
            heap = (MAX_CONTENDERS + 1) * self.spec.heap_bytes(self.problem, self.world_size, self.dtype) + (64 << 20)
            self._ranks = MeasuredRanks(self.kernel_path, self.problem_name, self.problem, self.world_size,
                                        self.dtype, heap, self.candidates_dir.parent / "ranks",
                                        device=self.pool_device, max_spins=self.max_spins)
        return self._ranks

    def _verified_text(self, candidate: DistCandidate, check: dict | None, note: str, device: str | None) -> str:
        """What ran, in one line: world sizes, problems, knobs."""
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(self.meta(candidate).items()))
        sizes = lambda p: ",".join(f"{k}={v}" for k, v in p.items())
        check_text = (f"{note} {sizes(check)}" if check is not None else
                      f"no check problem ({note}): the benchmark problem only")
        if device is not None:
            return (f"numerics verified on every rank of {self.world_size} x {device} at {check_text} and the "
                    f"benchmark problem {sizes(self.problem)}, pattern {candidate.pattern}, knobs {knobs}")
        if check is None:
            return f"numerics not verified in the interpreter: {note}; permutation verified at the benchmark problem"
        return (f"numerics verified on every rank at W = {' and '.join(map(str, CHECK_WORLD_SIZES))} "
                f"(the Triton interpreter) at {check_text}, pattern {candidate.pattern}, knobs {knobs}; "
                f"tile order a permutation at the benchmark problem {sizes(self.problem)} on {self.world_size} ranks")

    def measure(self, kernel_file: str, mapping: str, details: dict) -> dict:
        """The candidate's figures: measured (the slowest rank, interleaved with torch + NCCL, the
        paired gain), the overlap model's raw prediction with its interval and the calibrated one
        made before this measurement (then the calibration learns from it); simulated: the
        prediction beside any committed measurement of this configuration."""
        from swizzleperf.agent.distributed import measured as dist_measured
        from swizzleperf.profiling.overlap_calibration import interval
        candidate = self._candidate_of(kernel_file)
        meta = self.meta(candidate)
        prediction = self._predict(candidate.pattern, meta)
        label = self.canonical(candidate).label()
        low, high = interval(prediction)
        out = {**{f"predicted_{k}": v for k, v in prediction.items() if k != "source"},
               "predicted_source": prediction["source"], "predicted_interval_ms": [low, high],
               "calibrated_predicted_ms": self.calibration.predict(prediction, candidate.pattern),
               "time_ms": None, "time_spread_ms": None, "time_source": None,
               "torch_nccl_predicted_ms": self.baseline_prediction()["time_ms"],
               "config": json.loads(candidate.to_json()), "verified_at": details.get("verified_at", ""),
               "seconds": details.get("seconds"), "setup_s": (details.get("seconds") or {}).get("pool_start"),
               **self._compute_l2(mapping, meta)}
        timing = (details.get("ranks") or {}).get("timing")
        if timing:
            figures = dist_measured.timing_figures(timing)
            device = self.ranks.pool.device_name or "GPU"
            out.update(figures, time_source=f"measured:events:{device} x{self.world_size} (slowest rank, "
                                            f"interleaved with torch + NCCL, {figures['timed_rounds']} rounds)",
                       notes="measured on the ranks")
            observation = self.calibration.add(label, candidate.pattern, prediction, figures["time_ms"])
            out["model_error_raw"] = abs(prediction["time_ms"] - figures["time_ms"]) / figures["time_ms"]
            out["model_error_calibrated_before"] = abs(observation.before_ms - figures["time_ms"]) / figures["time_ms"]
        else:
            out["notes"] = "overlap model: not measured in this run"
            known = self._committed_for(candidate)
            if known:
                out.update(committed_ms=known["time_ms"], committed_spread_ms=known.get("spread_ms"),
                           committed_source=f"measured earlier on {known['device']} ({known['source']}"
                                            + (f", {known['date']}" if known.get("date") else "") + ")")
        return out

    def _compute_l2(self, mapping: str, meta: dict) -> dict:
        """The L2 simulator's hit rate of the per-rank GEMM under the candidate's tiles and tile
        order (``l2_hit_rate`` with ``l2_source`` ``simulated:<spec>``), where the kernel declares
        that GEMM and its grid is the tile order's; else nothing."""
        if self.spec.compute_shape is None or not Path(mapping).exists():
            return {}
        import numpy as np
        from swizzleperf.kernels.gemm import trace as gemm_trace
        from swizzleperf.profiling import l2sim
        shape = self.spec.compute_shape(self.problem, self.world_size)
        trace = gemm_trace(shape, meta).with_l1(meta)
        order = np.load(mapping)
        if order.size != trace.keys.shape[0]:
            return {}
        result = l2sim.simulate(trace, order, self.target.spec)
        return {"l2_hit_rate": result.l2_hit_rate, "l2_source": f"{result.source} (the per-rank GEMM)",
                "dram_bytes": result.dram_read_bytes + result.dram_write_bytes, "dram_source": result.source}

    def compare(self, kernel_files: list) -> dict:
        """Head-to-head timing of verified configurations with torch + NCCL on the rank pool
        (measured mode; interleaved rounds); not available in simulated mode."""
        if self.mode != "measured":
            return {"verdict": Verdict.RUNTIME_ERROR.value,
                    "reason": f"no head-to-head timing without {self.world_size} GPUs"}
        items = []
        for path in kernel_files:
            candidate = self._candidate_of(path)
            items.append({"kernel_path": str(path), "pattern": candidate.pattern,
                          "meta": self._rank_meta(self.meta(candidate))})
        answer = self.ranks.compare(items, references=self._session_references())
        if answer.get("verdict") != Verdict.PASS.value:
            return {"verdict": answer.get("verdict", Verdict.RUNTIME_ERROR.value), "reason": answer.get("reason", "")}
        contenders = answer["timing"]["contenders"]
        names = [f"c{i}" for i in range(len(items))]
        torch_rounds = contenders["torch_nccl"]["rounds_ms"]
        self._confirmed_torch = {"torch_nccl_ms": contenders["torch_nccl"]["median_ms"],
                                 "torch_nccl_spread_ms": contenders["torch_nccl"]["iqr_ms"],
                                 "rounds_ms": torch_rounds, "names": {},
                                 "references": {k: {"median_ms": v["median_ms"], "iqr_ms": v["iqr_ms"],
                                                    "rounds_ms": v["rounds_ms"]}
                                                for k, v in contenders.items() if k in SESSION_REFERENCES}}
        return {"verdict": Verdict.PASS.value, "reason": "", "rounds": answer["timing"]["rounds"],
                "time_ms": [contenders[n]["median_ms"] for n in names],
                "time_spread_ms": [contenders[n]["iqr_ms"] for n in names],
                "round_medians_ms": [contenders[n]["rounds_ms"] for n in names]}

    def _session_references(self) -> list:
        """The references the head-to-head times beside its contenders: those the run's references
        checked and timed (torch's fused op only where it agreed with the reference on every rank),
        the communication alone only where the kernel gives that part (else it is derived)."""
        refs = self.ranks.measured_references()
        return [k for k in SESSION_REFERENCES if refs.get(f"{k}_ms") is not None
                and not (k == "comm_alone" and refs.get("comm_alone_source"))]

    def ranked_space(self) -> list:
        """Every configuration of the space with the overlap model's prediction, best first (ties:
        the order the space lists them in, the default first), computed once:
        ``[{name, source, pattern, meta, predicted: {predicted_time_ms, ...}, rank}]``. The policy
        re-orders it by the calibrated prediction (``rank_configurations``)."""
        if self._ranking is None:
            space = self.spec.space(self.problem_name, self.world_size, self.target.spec.compute_units)
            configs = [(c["pattern"], {k: v for k, v in c.items() if k != "pattern"}) for c in space]
            predictions = self.predict_many(configs)
            ranked = sorted(((p["time_ms"], i, pattern, knobs, p)
                             for i, ((pattern, knobs), p) in enumerate(zip(configs, predictions)) if p),
                            key=lambda e: (e[0], e[1]))
            self._ranking = []
            for _, _, pattern, knobs, prediction in ranked:
                candidate = self.canonical(DistCandidate(pattern, knobs))
                self._ranking.append({"name": candidate.label(), "source": candidate.to_json(),
                                      "pattern": pattern, "meta": dict(knobs), "raw": prediction,
                                      "predicted": {f"predicted_{k}": v for k, v in prediction.items()},
                                      "rank": len(self._ranking) + 1})
        return self._ranking

    def rank_configurations(self) -> list:
        """The space ordered as the run knows it now: a committed measurement where one exists
        (simulated mode), else the calibrated prediction; each entry with ``calibrated_ms`` and
        ``key`` (the time it is ordered by) and ``committed_ms`` where known."""
        entries = []
        for entry in self.ranked_space():
            calibrated = self.calibration.predict(entry["raw"], entry["pattern"])
            known = self._committed_for(DistCandidate(entry["pattern"], entry["meta"])) if self.mode != "measured" else None
            entries.append({**entry, "calibrated_ms": calibrated,
                            "committed_ms": known["time_ms"] if known else None,
                            "key": known["time_ms"] if known else calibrated})
        return sorted(entries, key=lambda e: (e["key"], e["rank"]))

    def committed_measurements(self) -> list:
        """Measurements committed under bench/results/ for this kernel, problem, W and GPU kind
        (agent/distributed/measured.committed), read once."""
        if self._committed is None:
            from swizzleperf.agent.distributed.measured import committed
            self._committed = committed(self.spec.name, self.problem, self.world_size, self.target.spec)
        return self._committed

    def _committed_for(self, candidate: DistCandidate) -> dict | None:
        """The committed measurement of exactly this configuration (pattern and launch knobs), or None."""
        meta = self.meta(candidate)
        for known in self.committed_measurements():
            if known.get("pattern") != candidate.pattern:
                continue
            if known.get("meta") is None:   # recorded at the kernel's default knobs of its day
                if not self.canonical(candidate).meta and candidate.swizzle is None:
                    return known
                continue
            if all(meta.get(k) == v for k, v in known["meta"].items() if k in meta) and \
                    all(known["meta"].get(k) == v for k, v in candidate.meta.items()):
                return known
        return None

    def _calibrate_on_committed(self) -> None:
        """Simulated mode: the calibration learns from the committed measurements of this kernel,
        problem, W and GPU kind (configurations the model can price)."""
        for known in self.committed_measurements():
            if known.get("pattern") not in self.spec.patterns:
                continue
            knobs = {k: v for k, v in (known.get("meta") or {}).items() if k in self.spec.knobs}
            prediction = self.predict_many([(known["pattern"], knobs)])[0]
            if prediction:
                self.calibration.add(f"{known['pattern']} ({known['source']})", known["pattern"], prediction,
                                     known["time_ms"])

    def evidence(self, history: list | None = None, baseline: dict | None = None) -> list:
        """The space as the run ranks it now (best first: committed measurements, else the
        calibrated prediction): ``[{name, source, predicted_*, calibrated_ms, committed_ms,
        tried}]``; ``tried`` names the baseline or attempt that evaluated that configuration."""
        tried = {}
        for label, attempt in [("the baseline", baseline)] + [
                (f"attempt {h.get('iteration')}", h) for h in history or []]:
            try:
                if attempt and attempt.get("source"):
                    tried.setdefault(self._key(attempt["source"]), label)
            except (CandidateError, ValueError):
                continue
        return [{"name": e["name"], "source": e["source"], "tried": tried.get(self._key(e["source"]), ""),
                 **e["predicted"], "calibrated_ms": e["calibrated_ms"], "committed_ms": e["committed_ms"]}
                for e in self.rank_configurations()]

    def simulate(self, text: str) -> dict:
        """The overlap model's figures for a proposed configuration (JSON text), or
        ``{"error": reason}`` when it does not parse or lies outside the space."""
        try:
            candidate = parse_candidate(text, self.spec)
        except CandidateError as exc:
            return {"error": str(exc)}
        problem = self._constraint(candidate)
        if problem:
            return {"error": problem}
        predictions = self.predict_many([(candidate.pattern, candidate.meta)])
        if predictions[0] is None:
            return {"error": "the overlap model cannot price this configuration"}
        return {f"predicted_{k}": v for k, v in predictions[0].items()}

    def predict_many(self, configs: list) -> list:
        """The overlap model's prediction (a dict, ``time_ms`` and the breakdown) for each
        ``(pattern, knobs)``, or None where the model cannot price it (the reason is logged in the
        prediction's absence)."""
        from swizzleperf.profiling.overlap_model import OverlapModelError
        out = []
        for pattern, knobs in configs:
            try:
                out.append(self._predict(pattern, self.spec.meta_for(self.problem_name, knobs)))
            except OverlapModelError:
                out.append(None)
        return out

    def _predict(self, pattern: str, meta: dict) -> dict:
        """The model's prediction as a dict. Measured mode: ``time_ms`` (and its interval) is the
        GPUs' time with the launches queued ahead, what the ranks time (``eager_time_ms``: with
        the host's pace, the model's ``time_ms``), so that a pattern whose host time exceeds its
        GPU time (GEMM + RS push_copy_engine: eight copies a launch) is ranked, calibrated and
        pruned on what is measured."""
        from swizzleperf.profiling.overlap_model import predict
        prediction = predict(self.spec.name, self.problem, self.world_size, pattern, meta,
                             self.target.spec, self.dtype).to_dict()
        if self.mode == "measured":
            prediction.update(eager_time_ms=prediction["time_ms"], time_ms=prediction["gpu_ms"],
                              interval_ms=prediction["gpu_interval_ms"])
        return prediction

    def baseline_prediction(self) -> dict:
        """The overlap model's torch + NCCL figures at this problem and W (computed once)."""
        if not self._baseline_prediction:
            from swizzleperf.profiling.overlap_model import predict_baseline
            self._baseline_prediction.update(predict_baseline(
                self.spec.name, self.problem, self.world_size, self.target.spec, self.dtype).to_dict())
        return self._baseline_prediction

    def _candidate_of(self, kernel_file: str) -> DistCandidate:
        text = Path(kernel_file).with_suffix(".config.json").read_text()
        return parse_candidate(text, self.spec)

    # -- judging (what lessons.py does for single-GPU kernels) ------------------------------------

    def better(self, attempt: dict, best: dict) -> bool:
        return _time(attempt) < _time(best)

    def beyond_noise(self, attempt: dict, best: dict) -> bool:
        """Measured: the gain exceeds the larger spread; simulated: over ``PREDICTED_TIE``."""
        a, b = attempt.get("metrics") or {}, best.get("metrics") or {}
        if a.get("time_ms") is not None and b.get("time_ms") is not None:
            from swizzleperf.agent.verification import lessons
            return lessons.beyond_noise(attempt, best, "measured")
        return _time(best) - _time(attempt) > PREDICTED_TIE * _time(best)

    def lesson(self, attempt: dict, best: dict, baseline: dict) -> str:
        """One sentence for the history: why it was rejected, or its time (measured, or predicted
        with its interval), the model's error where measured, and its standing against the best,
        torch + NCCL and the kernel's default."""
        name, verdict = attempt["name"], attempt["verdict"]
        if verdict == Verdict.NO_CANDIDATE.value:   # nothing was proposed: no verdict, no endpoint in the prompt
            from swizzleperf.agent.verification import lessons
            return lessons.no_candidate(str(attempt.get("reason") or ""))
        if verdict != Verdict.PASS.value:
            return f"{name} was rejected ({verdict}): {_ADVICE.get(verdict, 'see the reason')}."
        m = attempt["metrics"]
        t, base, best_t = _time(attempt), _time(baseline), _time(best)
        standing = ("better than the best" if self.better(attempt, best) and self.beyond_noise(attempt, best)
                    else "within the spread of the best" if not self.beyond_noise(best, attempt)
                    else "worse than the best")
        if m.get("time_ms") is not None:
            return (f"{name}: {m['time_ms']:.3f} ± {m['time_spread_ms']:.3f} ms ({m['time_source']}); torch + NCCL "
                    f"{m['torch_nccl_ms']:.3f} ms in the same rounds ({m['torch_nccl_ms'] / m['time_ms']:.2f}x, "
                    f"paired gain {m['paired_gain_ms']:+.3f} ± {m['paired_spread_ms']:.3f} ms); the model predicted "
                    f"{m['predicted_time_ms']:.3f} ms raw ({100 * m['model_error_raw']:.0f} % off), "
                    f"{m['calibrated_predicted_ms']:.3f} calibrated ({100 * m['model_error_calibrated_before']:.0f} % off); "
                    f"{standing} ({best_t:.3f} ms); {base / t:.2f}x the kernel's default.")
        low, high = m.get("predicted_interval_ms") or (t, t)
        known = (f"; measured earlier {m['committed_ms']:.3f} ms ({m['committed_source']})"
                 if m.get("committed_ms") is not None else "")
        return (f"{name}: predicted {m['predicted_time_ms']:.3f} ms ({low:.3f}-{high:.3f}; {m['predicted_source']}): "
                f"compute {m.get('predicted_compute_ms', 0):.3f}, communication {m.get('predicted_comm_ms', 0):.3f}, "
                f"{100 * (m.get('predicted_hidden_share') or 0):.0f} % of it hidden{known}; {standing} "
                f"({best_t:.3f} ms); not measured in this run.")

    def target_reached(self, best: dict, baseline: dict, target_speedup, target_l2) -> str | None:
        m, base = best.get("metrics") or {}, baseline.get("metrics") or {}
        if target_speedup and m.get("time_ms") and base.get("time_ms"):
            if base["time_ms"] / m["time_ms"] >= target_speedup:
                return f"target reached: {base['time_ms'] / m['time_ms']:.2f}x >= {target_speedup}x"
        return None

    def contenders(self, state: dict) -> list:
        """Measured mode: the best, those within its spread, the expert and the kernel's default
        (lessons.contenders), re-timed head to head with torch + NCCL at the end."""
        from swizzleperf.agent.verification import lessons
        return lessons.contenders(state, self.mode)

_ADVICE = {
    Verdict.OUTSIDE_SPACE.value: "use only the knobs and values the kernel declares, within its constraints",
    Verdict.INVALID.value: "write JSON with the declared knobs; a swizzle source only with the allowed operations",
    Verdict.NOT_PERMUTATION.value: "every rank's tile order must compute each of its tiles exactly once, "
                                   "remainders included",
    Verdict.MISMATCH.value: "the configuration must not change what is computed",
    Verdict.DEADLOCK.value: "a wait on a flag that no earlier step sets: the pattern and its order "
                            "must let every producer run before its consumer waits",
    Verdict.TIMEOUT.value: "keep the swizzle cheap and the configuration small enough to verify",
}


def _normalised(source: str) -> str:
    """The statements of a function's body, docstring and formatting aside."""
    import ast
    func = ast.parse(source).body[0]
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    return "\n".join(ast.unparse(node) for node in body)


def interconnect(hw) -> dict:
    """The hardware spec's interconnect fields (links, copy engines), name -> value, as the
    spec gives them."""
    words = ("link", "nvlink", "xgmi", "copy_engine", "interconnect", "peer")
    return {name: value for name, value in vars(hw).items()
            if any(w in name for w in words) and value not in (None, 0)}


def _time(attempt: dict) -> float:
    """The time an attempt is ranked by: measured in this run, else measured earlier on the same
    GPU kind (committed), else the calibrated prediction, else the raw prediction."""
    m = attempt.get("metrics") or {}
    for key in ("time_ms", "committed_ms", "calibrated_predicted_ms", "predicted_time_ms"):
        if m.get(key) is not None:
            return float(m[key])
    return math.inf


def _rejected(verdict: Verdict, reason: str) -> dict:
    return {"verdict": verdict.value, "reason": reason, "kernel_file": "", "diff": ""}


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_")[:80] or "candidate"
