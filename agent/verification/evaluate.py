"""One candidate from source to figures: splice into a copy of the kernel module, verify in a worker,
measure. Shared by the baseline, the expert order and every proposal of the loop."""
from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swizzleperf.agent.verification import lessons
from swizzleperf.agent.verification.candidate import (CandidateError, canonical_target, check_candidate, splice,
                                                      target_source, unified_diff)
from swizzleperf.agent.verification.measure import Measurer
from swizzleperf.agent.verification.swizzles import expert_source
from swizzleperf.agent.verification.verify import (MAX_MAPPING_BYTES, Verdict, VerifyConfig, numerics_problems,
                                                   reference_module, run_worker, verify)
from swizzleperf.profiling import analysis
from swizzleperf.sandbox.write_back import source_text, write_sealed


@dataclass
class Evaluator:
    """Evaluates rewrite-target sources for one kernel module.

    Attributes:
        kernel_path: the user's kernel module (read, never written).
        module_source: its text at the start of the run.
        target_name / arg_names: the rewrite target and its parameters.
        candidates_dir: where each candidate's spliced module and program -> tile map are written.
        verify_config: how to verify; ``measurer``: how to measure.
    """

    kernel_path: Path
    module_source: str
    target_name: str
    arg_names: list
    candidates_dir: Path
    verify_config: VerifyConfig
    measurer: Measurer
    _ranking: list | None = field(default=None, init=False, repr=False)
    _timed: dict = field(default_factory=dict, init=False, repr=False)   # kernel file -> ms

    @property
    def spec(self):
        return self.measurer.spec

    @property
    def mode(self) -> str:
        return self.measurer.target.mode

    # -- what the loop starts from --------------------------------------------------------------

    def baseline(self) -> tuple:
        """``(name, source)`` of the kernel's own rewrite target."""
        return "baseline", target_source(self.module_source, self.target_name)

    def expert(self) -> tuple | None:
        """``(name, source)`` of the spec's hand-written order, or None."""
        return expert_source(self.spec.expert, self.arg_names) if self.spec.expert else None

    def analysis(self, baseline: dict) -> str:
        """The memory-access analysis of the baseline's order, as the proposer reads it."""
        problem, meta = self.spec.problems["default"], self.spec.meta_for("default")
        order, why = load_tile_map(baseline["mapping"])
        if order is None:
            return f"(no memory-access analysis: {why})"
        figures = analysis.analyze(self.measurer.trace, order,
                                   self.spec.tile_grid(problem, meta), self.measurer.target.spec,
                                   self.measurer.probe)
        return analysis.render(figures, self.measurer.target.spec, self.target_name)

    def context_fields(self) -> dict:
        """The workload a proposer is told about: problem, meta, tile grid, target arguments."""
        problem, meta = self.spec.problems["default"], self.spec.meta_for("default")
        return {"problem": dict(problem), "meta": dict(meta),
                "tile_grid": tuple(self.spec.tile_grid(problem, meta)),
                "swizzle_args": tuple(self.spec.swizzle_args(problem, meta))}

    def report_extra(self, answer_file: str | None = None) -> dict:
        """report.json's ``workload``: problem, dtype, meta, tile grid, programs per wave; in
        measured mode, ``library``: the launch configurations of the run's answer (``answer_file``,
        the best order's kernel file) against the vendor library (``tune_launch``), where the spec
        declares either."""
        fields, hw = self.context_fields(), self.measurer.target.spec
        occupancy = self.measurer.trace.programs_per_cu
        numerics = {name: dict(self.spec.problems[name]) for name in numerics_problems(self.verify_config.device)}
        extra = {"workload": {**{k: fields[k] for k in ("problem", "meta")}, "dtype": self.verify_config.dtype,
                              "numerics_problems": numerics,
                              "tile_grid": list(fields["tile_grid"]), "programs": math.prod(fields["tile_grid"]),
                              "programs_per_wave": hw.compute_units * occupancy,
                              "wave_note": f"{hw.compute_units} {hw.compute_unit_label}s x {occupancy} "
                                           f"resident per {hw.compute_unit_label} ({hw.name})"}}
        library = self.tune_launch(answer_file)
        return {**extra, "library": library} if library else extra

    def tune_launch(self, answer_file: str | None = None) -> dict | None:
        """Measured mode: the spec's launch configurations (``launch_configs``) of the run's answer
        (``answer_file``, where this run timed it; else the order it timed fastest, the
        head-to-head's figures where it ran), each checked, timed interleaved with the spec's
        ``library`` launch (agent/verification/tune_worker.py). ``{kernel_file, verdict, reason,
        ...the stage's figures}``, or None (simulated, nothing timed, or a spec with neither)."""
        if self.mode != "measured" or not self._timed or not (
                self.spec.launch_configs or self.spec.library is not None):
            return None
        order = answer_file if answer_file in self._timed else min(self._timed, key=self._timed.get)
        request = {"kernel_path": order, "stages": ["tune_launch"], "dtype": self.verify_config.dtype}
        result = run_worker(request, self.verify_config.timeout_s, interpret=False)
        selection = {"kernel_file": order, "verdict": result.verdict.value, "reason": result.reason,
                     **result.details.get("tune_launch", {})}
        if not result.passed:
            return selection
        return confirmed_launch(selection, run_worker({**request, "configs": [selection["best_meta"]]},
                                                      self.verify_config.timeout_s, interpret=False))

    # -- judging (agent/verification/lessons.py, in this run's mode) ----------------------------

    def better(self, attempt: dict, best: dict) -> bool:
        return lessons.better(attempt, best, self.mode)

    def beyond_noise(self, attempt: dict, best: dict) -> bool:
        return lessons.beyond_noise(attempt, best, self.mode)

    def lesson(self, attempt: dict, best: dict, baseline: dict) -> str:
        return lessons.lesson(attempt, best, baseline, self.mode)

    def target_reached(self, best: dict, baseline: dict, target_speedup, target_l2) -> str | None:
        return lessons.target_reached(best, baseline, self.mode, target_speedup, target_l2)

    def contenders(self, state: dict) -> list:
        return lessons.contenders(state, self.mode)

    def may_be_best(self, attempt: dict) -> bool:
        """The kernel's own order and the proposals may be the run's best; the expert order is a
        reference the best is compared with (``speedup_vs_expert``), not an answer."""
        return attempt.get("kind") != "expert"

    def order_cannot_matter(self) -> str | None:
        """Why no tile order can change anything at this launch, or None. A launch whose programs
        all run at once (programs <= SMs or CUs x programs resident on each, one wave) on a GPU of
        one L2 domain reads every tile in the same window whatever the order. On several domains
        (an MI300X's 8 XCDs, an H100's two modelled L2 partitions) the order still decides which
        tiles share each domain's L2 even in one wave: None there."""
        hw, occupancy = self.measurer.target.spec, self.measurer.trace.programs_per_cu
        problem, meta = self.spec.problems["default"], self.spec.meta_for("default")
        programs, wave = math.prod(self.spec.tile_grid(problem, meta)), hw.compute_units * occupancy
        if programs > wave or hw.l2_domains > 1:
            return None
        where = f"{hw.name}, simulated: no GPU here" if self.mode == "simulated" and \
            self.measurer.target.device is None else f"{hw.name}, {self.mode}"
        return (f"no order can matter at this size: {programs} programs run in one wave ({wave} at once: "
                f"{hw.compute_units} {hw.compute_unit_label}s x {occupancy} resident per {hw.compute_unit_label}, "
                f"{where}) on one L2, so every order reads the same tiles in the same window")

    def precheck(self, source: str, history: list, baseline: dict) -> str | None:
        """Why ``source`` is not worth an iteration, or None: it fails the static check, or it is
        the baseline's order or an earlier attempt's: written the same (statement for statement),
        or written otherwise but mapping every program to the same tile (its tile map, computed in
        an interpreted worker that runs only the permutation stage, against the maps of the
        baseline and of every verified attempt). A source whose map cannot be computed passes
        here: verification then records why."""
        try:
            check_candidate(source, self.target_name, self.arg_names)
        except CandidateError as exc:
            return str(exc)
        same = repeat_of(_statements(source), baseline, history, _statements)
        if same:
            return same + self._untried(history, baseline)
        order, _ = self.tile_maps([source])[0]
        if order is None:
            return None
        label = self._tried_orders(history, baseline).get(_sha1(order))
        if label:
            return (f"this maps every program to the same tile as {label}, already evaluated "
                    f"(the same tile order written differently): propose a different order"
                    + self._untried(history, baseline))
        return None

    def _untried(self, history: list, baseline: dict) -> str:
        """'; orders the simulator ranks high that nobody tried yet: ...' (from the evidence, when
        it was computed), for the reason of a repeat."""
        if self._ranking is None:
            return ""
        left = [e for e in self.evidence(history, baseline) if not e["tried"]][:3]
        listed = ", ".join(f"{e['name']} ({e['predicted_l2_hit_rate']:.1%} predicted)" for e in left)
        return f"; known orders not tried yet, best first: {listed}" if listed else ""

    def catalog_shape(self) -> tuple:
        """``(wave, aspect)`` for the catalog's group sizes: programs running at once per L2 domain
        (SMs or CUs per domain x programs resident per SM, from the trace), and the bytes of the
        kernel's second read block over its first (B over A for a GEMM)."""
        trace = self.measurer.trace
        first = trace.keys[0, 0]
        reads = first[first >= 0]
        aspect = float(trace.block_bytes[reads[1]] / trace.block_bytes[reads[0]]) if reads.size > 1 else 1.0
        return self.measurer.target.spec.compute_units_per_domain * trace.programs_per_cu, aspect

    def evidence(self, history: list | None = None, baseline: dict | None = None) -> list:
        """The catalog ranked by the L2 simulator for this problem and GPU (computed once):
        ``[{name, source, predicted_l2_hit_rate, predicted_dram_bytes, predicted_source, tried}]``,
        best first; ``tried`` names the baseline or the attempt whose tile map is that order
        ('' when none): what a proposer can act on before spending an iteration."""
        if self._ranking is None:
            from swizzleperf.agent.verification.swizzles import rank_catalog
            wave, aspect = self.catalog_shape()
            fields = self.context_fields()
            self._ranking = rank_catalog(self.predict_many, self.arg_names, wave, aspect, fields["tile_grid"],
                                         self.measurer.target.spec, self.baseline()[1])
        tried = self._tried_orders(history or [], baseline)
        return [{"name": e["name"], "source": e["source"],
                 "tried": tried.get(e["predicted"]["order_sha1"], ""),
                 **{k: v for k, v in e["predicted"].items() if k != "order_sha1"}} for e in self._ranking]

    def catalog_twin(self, mapping: str | Path | None) -> str:
        """The catalog order whose tile map at the default problem is the one saved at ``mapping``
        (a verified candidate's), where the catalog was ranked for a prompt this run (``evidence``),
        else "": a proposal that is a known order, whatever its code looks like, is credited to
        the catalog, not to the proposer (DEVELOPERS.md: an LLM's result is credited to it only
        for what the prompt did not hand it)."""
        if self._ranking is None or not mapping:
            return ""
        order, _ = load_tile_map(mapping)
        if order is None:
            return ""
        sha = _sha1(order)
        return next((e["name"] for e in self._ranking if e["predicted"].get("order_sha1") == sha), "")

    def _tried_orders(self, history: list, baseline: dict | None) -> dict:
        """Tile-map hash -> who evaluated that order first (the baseline, attempt N (name))."""
        tried = {}
        for label, attempt in [("the baseline", baseline)] + [
                (f"attempt {h.get('iteration')} ({h.get('name')})", h) for h in history]:
            mapping = attempt.get("mapping") if attempt else None
            if mapping and os.path.lexists(mapping):
                order, _ = load_tile_map(mapping)   # a file planted where the record points: skipped
                if order is not None:
                    tried.setdefault(_sha1(order), label)
        return tried

    def simulate(self, source: str) -> dict:
        """What the simulator predicts for a proposed rewrite target, without spending an
        iteration: ``{"error": reason}`` when it fails the static check or the permutation check,
        else the predicted metrics (hit rate 0..1, DRAM bytes, source)."""
        try:
            check_candidate(source, self.target_name, self.arg_names)
        except CandidateError as exc:
            return {"error": str(exc)}
        order, reason = self.tile_maps([source])[0]
        if order is None:
            return {"error": reason}
        return self.measurer.predict(order)

    # -- evaluation -----------------------------------------------------------------------------

    def prepare(self, label: str, source: str, folder: Path | None = None) -> dict:
        """Static check and splice into ``folder`` (the run's candidates folder by default).
        Returns ``{verdict, reason, source, kernel_file, diff}``: ``source`` is the canonical text
        (agent/verification/candidate.py) that the kernel file, the diff, the report and ``--in-place`` carry
        from here on, never the reply's; the verdict is INVALID (with the reason, and no
        ``source``) when the source is not an acceptable rewrite target."""
        try:
            canonical = canonical_target(source, self.target_name, self.arg_names)
            module = splice(self.module_source, self.target_name, canonical)
        except CandidateError as exc:
            return {"verdict": Verdict.INVALID.value, "reason": str(exc), "kernel_file": "", "diff": ""}
        folder = folder or self.candidates_dir
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_slug(label)}_{self.kernel_path.name}"
        sealed = write_sealed(path, module)   # read-only, its digest kept: --in-place writes only this text
        return {"verdict": "", "reason": "", "source": canonical, "kernel_file": str(path), "kernel_sha256": sealed,
                "diff": unified_diff(self.module_source, module, self.kernel_path.name)}

    def reference_file(self) -> Path:
        """The kernel module as the run read it (``verify.reference_module``)."""
        return reference_module(self.candidates_dir, self.kernel_path, self.module_source)

    def verify(self, kernel_file: str, time_it: bool) -> dict:
        """Permutation (proven on every grid, or guarded: ``_guarded``) and numerics in workers.
        Returns ``{verdict, reason, details, mapping, permutation_scope}`` (the scope: proven for all
        grids, or checked up to a box and guarded; and, guarded, the guarded kernel's ``source``,
        ``kernel_file``, ``kernel_sha256`` and ``diff``)."""
        checked = self.verify_unguarded(kernel_file, time_it)
        all_grids = checked["details"].get("all_grids") or {}
        if checked["verdict"] == Verdict.PASS.value and all_grids.get("guard"):
            checked = self._guarded(kernel_file, all_grids["guard"], time_it, checked)
        return {**checked, "permutation_scope": all_grids.get("scope")}

    def _guarded(self, kernel_file: str, guard: dict, time_it: bool, checked: dict) -> dict:
        """A candidate verified but not proven a permutation on every grid (agent/verification/prove.py)
        becomes the kernel that guards itself: its order on the grids checked (every grid up to the
        box, and the kernel's problems), the kernel's own order elsewhere. That kernel is verified
        in turn and replaces the candidate's file, source and diff, so that what is measured,
        reported and written (``--in-place``, ``user.diff``) is the guarded kernel. The kernel's
        own order needs no guard; a candidate that cannot be guarded is refused."""
        from swizzleperf.agent.verification import prove
        new = target_source(source_text(Path(kernel_file).read_bytes()), self.target_name)
        own = target_source(self.module_source, self.target_name)
        if _statements(new) == _statements(own):
            return checked
        scope = checked["details"]["all_grids"].get("scope", "")
        try:
            roles = [prove.Role(kind, value) for kind, value in guard["roles"]]
            if not any(r.kind == "extent" for r in roles):
                raise prove.Unsupported("the target's arguments that are the grid's extents cannot be told apart")
            condition = prove.guard_condition(self.arg_names, roles, guard["box"], guard["real_grids"])
            source = prove.guarded_source(new, own, self.target_name, condition,
                                          "The order below on the grids checked, the kernel's own elsewhere (not "
                                          "proven a permutation on every grid).")
        except prove.Unsupported as exc:
            return {**checked, "verdict": Verdict.NOT_PERMUTATION.value,
                    "reason": f"{scope}; and no guard can be written ({exc}): refused"}
        prepared = self.prepare(f"{Path(kernel_file).stem}-guarded", source, Path(kernel_file).parent)
        if prepared["verdict"]:
            return {**checked, "verdict": prepared["verdict"], "reason": f"the guarded kernel: {prepared['reason']}"}
        again = self.verify_unguarded(prepared["kernel_file"], time_it, prove=False)
        again["details"].setdefault("all_grids", {}).update(scope=scope, guard=guard)
        return {**again, **{k: prepared[k] for k in ("source", "kernel_file", "kernel_sha256", "diff") if k in prepared}}

    def verify_unguarded(self, kernel_file: str, time_it: bool, prove: bool = True) -> dict:
        """``verify`` without the guard (``prove=False``: nor the proof, for the guarded kernel,
        whose new order was checked on the grids it runs on before it was written)."""
        mapping = str(Path(kernel_file).with_suffix(".map.npy"))
        result = verify(Path(kernel_file), Path(mapping), self.verify_config, time_it=time_it,
                        reference_path=self.reference_file(), prove=prove)
        return {"verdict": result.verdict.value, "reason": result.reason, "details": result.details,
                "mapping": mapping}

    def measure(self, kernel_file: str, mapping: str, details: dict) -> dict:
        metrics = self.measurer.measure(Path(kernel_file), Path(mapping), details)
        if metrics.get("time_ms") is not None:
            self._timed[kernel_file] = metrics["time_ms"]
        return metrics

    def compare(self, kernel_files: list) -> dict:
        """Head-to-head timing of verified kernel files (GPU): ``{verdict, reason, time_ms: [...],
        time_spread_ms: [...], rounds}``."""
        request = {"kernel_path": kernel_files[0], "compare_paths": list(kernel_files),
                   "stages": ["compare"], "dtype": self.verify_config.dtype}
        result = run_worker(request, self.verify_config.timeout_s, interpret=False)
        times = result.details.get("compare", {}).get("time_ms")
        if result.passed and times:   # the head-to-head's figures replace the first ones
            self._timed.update(zip(kernel_files, times))
        return {"verdict": result.verdict.value, "reason": result.reason,
                **result.details.get("compare", {})}

    def predict_many(self, members: list) -> list:
        """Simulator figures for ``[(name, source)]`` (our catalog), or None for a member that does
        not pass the permutation check; ``order_sha1`` identifies the program -> tile order, so that
        members that are the same order under two names can be told apart."""
        predictions = []
        for order, _ in self.tile_maps([source for _, source in members]):
            predictions.append(None if order is None else
                               {**self.measurer.predict(order), "order_sha1": _sha1(order)})
        return predictions

    def tile_maps(self, sources: list) -> list:
        """``[(program -> tile map of the default problem, or None; the reason when None)]`` for
        rewrite-target sources, all mapped in one interpreted worker (permutation stage only, at
        the default and check problems), in a folder of their own that is removed afterwards (the
        run's candidates folder keeps only what was proposed)."""
        with tempfile.TemporaryDirectory(prefix="swizzleperf-maps-") as folder:
            items, prepared = [], []
            for i, source in enumerate(sources):
                p = self.prepare(f"map-{i}", source, Path(folder))
                prepared.append(p)
                if p["kernel_file"]:
                    items.append({"kernel_path": p["kernel_file"],
                                  "mapping_path": str(Path(p["kernel_file"]).with_suffix(".map.npy"))})
            request = {"items": items, "problems": ["default", "check"], "stages": ["permutation"]}
            result = run_worker(request, self.verify_config.timeout_s, interpret=True)
            outcomes = iter(result.details.get("items", []))
            maps = []
            for p in prepared:
                outcome = next(outcomes, None) if p["kernel_file"] else None
                if outcome is not None and outcome["verdict"] == "PASS":
                    maps.append(load_tile_map(Path(p["kernel_file"]).with_suffix(".map.npy")))
                else:
                    reason = (p["reason"] if not p["kernel_file"] else
                              f"{outcome['verdict']}: {outcome['reason']}" if outcome else
                              f"{result.verdict.value}: {result.reason}")
                    maps.append((None, reason))
            return maps


def load_tile_map(path: str | Path) -> tuple:
    """``(order, "")``: the program -> tile map saved at ``path``; or ``(None, why)`` in one line.
    Read as ``verify._not_a_mapping`` reads a worker's map: a regular file only (a named pipe, or a
    link to ``/dev/zero`` or to the agent's stdin, planted there is refused, opened without blocking
    and without following a link: never waited on nor read without end), at most
    ``MAX_MAPPING_BYTES`` (checked before it is read), without pickle, a 1-D integer array."""
    what = f"the tile map {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{what} is not a regular file (a link)"
        return None, f"{what} cannot be read ({exc.strerror or exc})"
    with open(fd, "rb") as handle:
        try:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode):
                return None, f"{what} is not a regular file"
            if found.st_size > MAX_MAPPING_BYTES:
                return None, f"{what} is {found.st_size} bytes, more than {MAX_MAPPING_BYTES}"
            order = np.load(handle, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            return None, f"{what} is not a NumPy array file ({' '.join(str(exc).split())[:200]})"
    if not isinstance(order, np.ndarray) or order.ndim != 1 or order.dtype.kind not in "iu":
        return None, (f"{what} is not a program -> tile map (a {getattr(order, 'dtype', type(order).__name__)} "
                      f"array of shape {getattr(order, 'shape', '?')})")
    return order, ""


def _sha1(order: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(order, dtype=np.int64).tobytes()).hexdigest()


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "candidate"


def _statements(source: str) -> str:
    """A rewrite target's body statement for statement, docstring and formatting aside."""
    import ast
    import textwrap
    func = ast.parse(textwrap.dedent(source)).body[0]
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    return "\n".join(ast.unparse(node) for node in body)


def repeat_of(key: str, baseline: dict, history: list, key_of) -> str | None:
    """"same as ..." when ``key`` equals the baseline's or an earlier attempt's (``key_of`` maps
    their text to a key; texts that do not parse are skipped)."""
    for label, attempt in [("the baseline", baseline)] + [(f"attempt {h.get('iteration')} "
                                                           f"({h.get('name')})", h) for h in history]:
        try:
            if attempt and attempt.get("source") and key_of(attempt["source"]) == key:
                return (f"this is the same as {label}, already evaluated: propose a different one "
                        f"(the history says how each attempt did)")
        except (SyntaxError, ValueError, IndexError, AttributeError):
            continue
    return None


#: The fields of a tune_launch answer that the confirmation run gives (the figures reported).
CONFIRMED_FIELDS = ("best_ms", "best_spread_ms", "default_ms", "default_spread_ms", "library_ms",
                    "library_spread_ms", "rounds", "configs")


def confirmed_launch(selection: dict, confirmation) -> dict:
    """The library row as reported: the configuration ``selection`` chose (its rounds timed every
    configuration: the minimum of many, optimistic) confirmed in fresh rounds of another process
    (``confirmation``, a WorkerResult of the tune_launch stage given that configuration and the
    kernel's own): the reported figures are the confirmation's, the selection's kept under
    ``selection``. Where the confirmation failed, the selection's figures stay, and
    ``confirmation`` says why (they are then not confirmed)."""
    chosen = {k: selection.get(k) for k in (*CONFIRMED_FIELDS, "best_meta", "rejected")}
    if not confirmation.passed:
        return {**selection, "selection": chosen,
                "confirmation": f"not confirmed: {confirmation.verdict.value}: {confirmation.reason}"}
    figures = confirmation.details.get("tune_launch", {})
    confirmed = {k: figures.get(k) for k in CONFIRMED_FIELDS}
    row = next((r for r in figures.get("configs") or () if r["meta"] == selection["best_meta"]), None)
    if row is None:   # the chosen configuration failed its check this time
        return {**selection, "selection": chosen,
                "confirmation": f"not confirmed: the chosen configuration did not pass again: "
                                f"{figures.get('rejected')}"}
    confirmed.update(best_ms=row["time_ms"], best_spread_ms=row["time_spread_ms"])   # the chosen one's, not a new minimum
    return {**selection, **confirmed, "best_meta": selection["best_meta"], "selection": chosen,
            "confirmation": "confirmed: the chosen configuration and the kernel's own timed again with the "
                            "library in fresh rounds of another process"}