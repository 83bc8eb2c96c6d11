"""Measurements of a distributed run: the rank pool's requests for one kernel and problem, the
measurements already committed under bench/results/ (shown beside the model's predictions in a
simulated run; package data, ``data/measured_refs.json``), and the run's answer: the best configuration, or torch + NCCL.

The answer is decided by measurements only. A configuration is recommended over torch + NCCL
when, timed interleaved with it round by round on the same ranks, the median of the per-round
differences is a gain larger than their interquartile range: the fastest by median, else the
fastest of the final head-to-head's contenders that does; otherwise the answer is "use torch
+ NCCL", with both figures. A simulated run answers nothing: its figures are predictions (with
their intervals) or measurements committed earlier on the same GPU kind (with their source).
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from swizzleperf.agent.distributed.rank_pool import PoolError, RankPool
from swizzleperf.sandbox import untrusted

#: Configurations one compare request may time together (their states share the heap).
MAX_CONTENDERS = 5
#: Per-request deadline: seconds for the ranks to verify (check and benchmark problem, compiling
#: the candidate) and time one candidate.
REQUEST_TIMEOUT_S = 240.0
#: The committed measurements of the bundled distributed kernels, package data extracted from the
#: repository's bench/results/ by bench/package_data.py (each file's rows with its path as ``source``).
MEASURED_REFS = Path(str(resources.files(__package__) / "data" / "measured_refs.json"))
#: Bytes of the committed measurements read (a few hundred KB).
RESULTS_MAX_BYTES = 16 << 20
#: Timing of one request: rounds at most, and the launches per sample (enough for ~``SAMPLE_MS``).
ROUNDS = 15
SAMPLE_MS = 20.0
#: Timing ends after ``MIN_ROUNDS`` rounds or later (agent/distributed/rank_worker.py's ``SETTLE_EVERY``) once
#: every contender's interquartile range is within ``SETTLE`` of its median. 3 %: a third of the
#: smallest gain over torch + NCCL measured beyond its spread on two H100s (2.878 against 3.145 ms,
#: 8.5 %, bench/results/dist_optimize_h100x2/ at commit 2f3ed18); the paired comparison uses every round timed.
MIN_ROUNDS = 6
SETTLE = 0.03


@dataclass
class MeasuredRanks:
    """The rank pool of one measured run and the requests the evaluator makes of it.

    Attributes:
        kernel_path: the user's kernel module (its torch baselines are the references).
        spec_name, problem_name, sizes, world_size, dtype: what is run.
        heap_bytes: one rank's heap (``MAX_CONTENDERS + 1`` states of the benchmark problem).
        folder: the pool's files (in the run folder).
        device: ``"cuda"``, or ``"cpu"`` for the tests (the interpreter).
        max_spins: the spin-wait bound (None: the heap's default).
        timeout_s: one request's deadline; rounds, sample_ms, warmup: its timing (rank_worker);
            min_rounds, settle: when it may end early (``MIN_ROUNDS``, ``SETTLE``; settle 0: never).
        paired: the final head-to-head times each contender in a pair with torch + NCCL
            (rank_worker.time_interleaved's ``pair_with``), each pair from its own barrier, rather
            than all back to back. On by default: on two H100s (2026-11-25,
            bench/results/h2h_bias_h100x2.md) four copies of one configuration and torch + NCCL
            back to back timed every figure 3-8 % above the pair timing a candidate gets (and the
            hand bench uses) at two of three problems; in pairs 0-4 % above it (about half the
            shift at GEMM + RS llama70b-o-4k, within the noise at the others); the ratio to torch +
            NCCL in the same rounds moved in neither. The references (torch + NCCL, the GEMM
            alone, ...) are still timed back to back.
    """

    kernel_path: Path
    problem_name: str
    sizes: dict
    world_size: int
    dtype: str
    heap_bytes: int
    folder: Path
    device: str = "cuda"
    max_spins: int | None = None
    timeout_s: float = REQUEST_TIMEOUT_S
    rounds: int = ROUNDS
    sample_ms: float = SAMPLE_MS
    warmup: int = 3
    min_rounds: int = MIN_ROUNDS
    settle: float = SETTLE
    paired: bool = True
    _pool: RankPool | None = field(default=None, repr=False)
    _references: dict | None = field(default=None, repr=False)
    _references_error: str = field(default="", repr=False)
    restarts: list = field(default_factory=list)
    waited_s: float = 0.0     # seconds the last request waited for ranks begun by ``start_soon``

    @property
    def pool(self) -> RankPool:
        if self._pool is None:
            import atexit
            self._pool = RankPool(self.world_size, self.device, self.heap_bytes, self.folder,
                                  max_spins=self.max_spins)
            atexit.register(self._pool.close)   # the ranks also die with this process (PDEATHSIG)
        return self._pool

    def start_soon(self) -> None:
        """Start the ranks now without waiting for them (they come up while the agent runs the
        interpreted permutation check); the next request waits for them. Nothing where they run."""
        pool = self.pool
        if not pool.alive:
            pool.begin()

    def _request(self, body: dict) -> dict:
        """One request on a live pool; a pool that cannot start is a RUNTIME_ERROR answer."""
        try:
            began = time.monotonic()
            self.pool.ready()         # ranks begun by start_soon: up first (the seconds kept apart)
            self.waited_s = time.monotonic() - began
            answer = self.pool.request({"bench": self.problem_name, "dtype": self.dtype, "rounds": self.rounds,
                                        "sample_ms": self.sample_ms, "warmup": self.warmup,
                                        "min_rounds": self.min_rounds, "settle": self.settle, **body,
                                        "problems": {self.problem_name: self.sizes, **body.get("problems", {})}},
                                       self.timeout_s)
        except PoolError as exc:
            return {"verdict": "RUNTIME_ERROR", "reason": str(exc), "broken": True}
        if answer.get("broken"):
            self.restarts.append(answer.get("reason", ""))
        return answer

    def evaluate(self, kernel_file: str, pattern: str, meta: dict, check_sizes: dict | None,
                 time_it: bool, probe_sites: list | None = None) -> dict:
        """Verify a candidate at its check problem (when given) and the benchmark problem, every
        rank, with its own knobs; time it against torch + NCCL with ``time_it``. ``probe_sites``
        (``[grid, args, label, real]``, the interpreted permutation check's): the tile order
        checked there first through the target as Triton compiles it (GPUs)."""
        problems, verify, metas = {}, [], {}
        if check_sizes is not None:
            problems["check@candidate"] = check_sizes
            verify.append("check@candidate")
            metas["check@candidate"] = meta
        verify.append(self.problem_name)
        metas[self.problem_name] = meta
        return self._request({"op": "evaluate", "kernel_path": str(kernel_file), "pattern": pattern,
                              "problems": problems, "verify": verify, "metas": metas, "time": time_it,
                              "probe_sites": probe_sites or []})

    def references(self) -> dict:
        """torch + NCCL, torch's fused op, the GEMM alone, the communication alone (computed once
        per pool that answers)."""
        if self._references is None:
            answer = self._request({"op": "references", "kernel_path": str(self.kernel_path)})
            if answer.get("verdict") != "PASS":
                self._references_error = f"{answer.get('verdict')}: {answer.get('reason')}"
                return {"error": self._references_error}
            self._references = summarize_references(answer)
        return self._references

    def measured_references(self) -> dict:
        """The references measured so far in this session (no request: the report is written
        in every case, an interrupted run's too), or why there are none."""
        if self._references is not None:
            return self._references
        return {"error": self._references_error or "not measured in this session"}

    def compare(self, items: list, paired: bool | None = None, references: list | None = None) -> dict:
        """Several verified configurations (``[{kernel_path, pattern, meta}]``) and torch + NCCL
        timed interleaved (each in a pair with torch + NCCL where ``paired``, default ``self.paired``),
        with ``references`` (names of ``session.REFERENCES``) timed in the same rounds."""
        return self._request({"op": "compare", "candidates": items[:MAX_CONTENDERS],
                              "paired": self.paired if paired is None else paired,
                              "references": list(references or [])})

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


#: Where queueing one launch takes the host at least this share of the launch's GPU time, the
#: figure is said to be the GPUs' and the host's pace named beside it (``host_note``; the bench's
#: report lists such rows too).
HOST_PACED = 0.9


def summarize_references(answer: dict) -> dict:
    """The reference figures of a ``references`` answer: medians and spreads (ms), the derived
    communication where the spec gives no comm part, the perfect-overlap bound and its source."""
    timing = answer["timing"]["contenders"]
    out = {"notes": answer.get("notes", {}), "checks": answer.get("checks", {}),
           "rounds": answer["timing"]["rounds"]}
    for name in ("torch_nccl", "torch_fused", "gemm_alone", "comm_alone"):
        if name in timing:
            out[f"{name}_ms"] = timing[name]["median_ms"]
            out[f"{name}_spread_ms"] = timing[name]["iqr_ms"]
    if "comm_alone_ms" not in out and "gemm_alone_ms" in out and "torch_nccl_ms" in out:
        diffs = [t - g for t, g in zip(timing["torch_nccl"]["rounds_ms"], timing["gemm_alone"]["rounds_ms"])]
        out["comm_alone_ms"] = max(0.0, statistics.median(diffs))
        out["comm_alone_source"] = "derived: torch + NCCL minus its GEMM, round by round"
    if "gemm_alone_ms" in out and "comm_alone_ms" in out:
        out["overlap_bound_ms"] = max(out["gemm_alone_ms"], out["comm_alone_ms"])
    return out


def timing_figures(timing: dict, name: str = "candidate") -> dict:
    """A candidate's figures from an ``evaluate`` answer's timing: its median and spread, torch +
    NCCL's in the same rounds, and the paired comparison (per-round differences)."""
    c, t = timing["contenders"][name], timing["contenders"]["torch_nccl"]
    diffs = [b - a for a, b in zip(c["rounds_ms"], t["rounds_ms"])]     # > 0: the candidate faster
    return {"time_ms": c["median_ms"], "time_spread_ms": c["iqr_ms"], "torch_nccl_ms": t["median_ms"],
            "torch_nccl_spread_ms": t["iqr_ms"], "paired_gain_ms": statistics.median(diffs),
            "paired_spread_ms": _iqr(diffs), "timed_rounds": timing["rounds"],
            "launches_per_sample": timing["per_sample"], "host_ms": c.get("host_ms")}


def beats_torch(figures: dict) -> bool:
    """True when the paired gain over torch + NCCL is positive and beyond its spread."""
    gain, spread = figures.get("paired_gain_ms"), figures.get("paired_spread_ms")
    return gain is not None and gain > 0 and gain > (spread or 0.0)


def answer(best: dict | None, mode: str, references: dict | None, others: list | None = None) -> dict:
    """What the run recommends: ``{"use", "line"}`` and, when a configuration is recommended,
    its ``name`` and ``config`` (None where the figures carry none). Measured: the best
    configuration (the fastest by median) when it beats torch + NCCL beyond the paired spread;
    else the fastest of ``others`` (the head-to-head's other contenders, with their paired
    figures: ``name, config, time_ms, time_spread_ms, torch_nccl_ms, torch_nccl_spread_ms,
    paired_gain_ms, paired_spread_ms``) that does, the line saying why the fastest was passed
    over; else torch + NCCL, with the numbers. A fastest whose rounds scatter widely (a pattern
    that times bimodally) is not a reliable gain, while a slower contender's may be (2 x H200,
    2026-11-26, AG + GEMM llama8b-up-4k: push_copy_engine 0.362 ± 0.229 ms, the kernel's default
    push +0.025 ± 0.021 ms over torch + NCCL in the same rounds; bench/results/dist_optimize_h100x2.md).
    Simulated: nothing is recommended from predictions."""
    if mode != "measured":
        return {"use": None, "line": "simulated: predictions only, nothing measured in this run, so "
                                     "nothing is recommended; run it on the GPUs to decide"}
    if not best or best.get("time_ms") is None or best.get("torch_nccl_ms") is None:
        torch_ms = (references or {}).get("torch_nccl_ms")
        return {"use": "torch + NCCL", "line": "use torch + NCCL: no configuration was measured against it"
                + (f" (torch + NCCL {torch_ms:.3f} ms)" if torch_ms else "")}
    figures = _figures(best)
    if beats_torch(best):
        return {"use": "configuration", "name": best["name"], "config": best.get("config"),
                "line": f"use {_called(best)}: {best['torch_nccl_ms'] / best['time_ms']:.2f}x torch + NCCL, "
                        f"measured: {figures}{_fused_note(references, best['time_ms'])}"}
    reliable = [o for o in others or [] if o.get("time_ms") is not None and o.get("torch_nccl_ms") is not None
                and beats_torch(o)]
    if reliable:
        chosen = min(reliable, key=lambda o: o["time_ms"])
        return {"use": "configuration", "name": chosen["name"], "config": chosen.get("config"),
                "line": f"use {_called(chosen)}: {chosen['torch_nccl_ms'] / chosen['time_ms']:.2f}x torch + NCCL, "
                        f"measured: {_figures(chosen)}; the fastest by median, {_called(best)}, does not beat "
                        f"torch + NCCL beyond its spread: {figures}{_fused_note(references, chosen['time_ms'])}"}
    return {"use": "torch + NCCL", "line": f"use torch + NCCL: the best configuration found, {_called(best)}, "
                                            f"does not beat it beyond the spread: {figures}"
                                            f"{_fused_note(references, best['time_ms'])}"}


def _called(f: dict) -> str:
    """A configuration as the answer names it: its run's name, or for the run's baseline
    (``default``) the kernel's default with its configuration, so the line says what to run."""
    if f.get("name") == "default" and f.get("config"):
        return f"the kernel's default {json.dumps(f['config'])}"
    return f["name"]


def _figures(f: dict) -> str:
    return (f"{f['time_ms']:.3f} ± {f['time_spread_ms']:.3f} ms against torch + NCCL's "
            f"{f['torch_nccl_ms']:.3f} ± {f['torch_nccl_spread_ms']:.3f} ms in the same rounds "
            f"(paired gain {f['paired_gain_ms']:+.3f} ± {f['paired_spread_ms']:.3f} ms){host_note(f)}")


def host_note(f: dict) -> str:
    """A sentence where queueing one launch took the host at least ``HOST_PACED`` of the
    launch's GPU time (``host_ms``, rank_worker's timer, which lets the host queue ahead): the
    time stands for the GPUs' work; launched one by one, as an eager application does, the
    configuration runs at the host's pace instead."""
    host, gpu = f.get("host_ms"), f.get("time_ms")
    if host is None or not gpu or host < HOST_PACED * gpu:
        return ""
    return (f"; queueing one launch took the host {host:.3f} ms, against the GPUs' {gpu:.3f}: launched "
            f"one by one it runs at the host's pace (queued ahead of the GPUs, at theirs; capture in a "
            f"CUDA graph is not tried here)")


def _fused_note(references: dict | None, best_ms: float) -> str:
    """A sentence when torch's fused op beat torch + NCCL beyond both spreads in the references'
    rounds: the user may have a faster library call. Whether it is faster than the configuration
    is not said here: the two were not timed in the same rounds (the report's figures of one
    session say it where the head-to-head timed both; issue #44)."""
    refs = references or {}
    fused, torch_ms = refs.get("torch_fused_ms"), refs.get("torch_nccl_ms")
    if fused is None or torch_ms is None:
        return ""
    noise = max(refs.get("torch_fused_spread_ms") or 0.0, refs.get("torch_nccl_spread_ms") or 0.0)
    if torch_ms - fused > noise:
        return (f"; note: torch's fused op ({refs['notes'].get('torch_fused')}) measured {fused:.3f} ± "
                f"{refs['torch_fused_spread_ms']:.3f} ms against torch + NCCL's {torch_ms:.3f} in the references' "
                f"rounds, faster than torch + NCCL; against this configuration ({best_ms:.3f} ms) it was timed in "
                f"other rounds, so this line gives no verdict between them")
    return ""


# --------------------------------------------------------------------------- committed figures
def committed(kernel: str, sizes: dict, world_size: int, hw) -> list:
    """Measurements committed under bench/results/ for this kernel, problem sizes, W and GPU kind:
    ``[{"pattern", "meta" (or None), "time_ms", "spread_ms", "torch_nccl_ms", "source", "device",
    "date"}]``. Read from ``MEASURED_REFS``: per results file, the bench's rows (pattern, meta,
    time_ms, baseline_ms), the hand-transcribed tables of the same shape (``rows`` with
    ``best_pattern_ms``, ``patterns``) and this module's own bench/results/dist_optimize_*.json
    (``best_config``, ``best_ms``). A file or row that does not fit is skipped.

    Raises:
        OSError: ``MEASURED_REFS`` cannot be read (an install without its package data).
    """
    try:   # within bounds of size and depth (#41); UntrustedInput is a ValueError
        refs = untrusted.loads(untrusted.read_bounded(MEASURED_REFS, RESULTS_MAX_BYTES, str(MEASURED_REFS)),
                               str(MEASURED_REFS))
    except ValueError:
        return []
    out = []
    for data in refs.get("files") if isinstance(refs, dict) and isinstance(refs.get("files"), list) else []:
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            continue
        source, device = str(data.get("source") or MEASURED_REFS.name), str(data.get("device") or "")
        for row in data["rows"] + (data["patterns"] if isinstance(data.get("patterns"), list) else []):
            if not isinstance(row, dict) or row.get("kernel") != kernel:
                continue
            try:
                entry = _matching_entry(row, source, device, data, sizes, world_size, hw)
            except (TypeError, ValueError, AttributeError):
                continue   # a row of another shape (text for a size, a list for a configuration)
            if entry:
                out.append(entry)
    return out


def _matching_entry(row: dict, source: str, device: str, data: dict, sizes: dict, world_size: int, hw) -> dict | None:
    row_device = str(row.get("device") or device)
    if not same_gpu(hw, row_device) or int(row.get("world_size") or data.get("world_size") or 0) != world_size:
        return None
    if not _same_sizes(row, sizes):
        return None
    return _entry(row, source, row_device, data.get("date"))


def _entry(row: dict, source: str, device: str, date) -> dict | None:
    common = {"source": source, "device": device, "date": date,
              "torch_nccl_ms": row.get("baseline_ms", row.get("torch_nccl_ms"))}
    if row.get("best_config") is not None and row.get("best_ms") is not None:
        config = row["best_config"] if isinstance(row["best_config"], dict) else untrusted.loads(
            str(row["best_config"]), f"{source}: best_config")
        return {**common, "pattern": config.get("pattern"), "meta": {k: v for k, v in config.items() if k != "pattern"},
                "time_ms": row["best_ms"], "spread_ms": row.get("spread_ms")}
    if row.get("pattern") and row.get("time_ms") is not None and row.get("verified", True):
        return {**common, "pattern": row["pattern"], "meta": row.get("meta"), "time_ms": row["time_ms"],
                "spread_ms": row.get("iqr_ms")}
    if row.get("best_pattern_ms") is not None:
        return {**common, "pattern": None, "meta": None, "time_ms": row["best_pattern_ms"], "spread_ms": None,
                "note": "the best pattern at the default knobs; which one was not recorded"}
    return None


def _same_sizes(row: dict, sizes: dict) -> bool:
    if all(k in row for k in sizes):
        return all(int(row[k]) == int(v) for k, v in sizes.items())
    return False


def same_gpu(hw, device_name: str) -> bool:
    """True when the device's name (``"NVIDIA H100 80GB HBM3"``) is the spec's GPU kind (``h100``)."""
    key = hw.name.lower().replace("-", "")
    words = device_name.lower().replace("-", " ").split()
    return any(w == key or w.startswith(key) for w in words)


def _iqr(values: list) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]
