"""Measurement of a verified candidate: the simulator's prediction always; on a matching GPU the
timing taken by the verification worker and the vendor's profiler (ncu on NVIDIA, rocprofv3 on
AMD: profiling/profiler.py) on exactly this kernel's dispatches.

Every figure carries its source: ``measured:ncu``, ``measured:rocprofv3``, ``measured:events:<GPU>``,
``simulated:<spec>``. ``profile`` holds the filtered profile (profiling/profiler.py's ``filtered``):
the measured figures, and the simulator's for what was not measured.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from swizzleperf.profiling import backends, l2sim, ncu, profiler, roof
from swizzleperf.profiling.ncu import NcuError, find_ncu, profile_launch
from swizzleperf.sandbox.untrusted import read_source
from swizzleperf.sandbox.write_back import replace_file


def plain(value):
    """``value`` with numpy scalars and arrays turned into Python numbers and lists (the run record
    and the checkpointer store plain JSON-like data)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


@dataclass
class Measurer:
    """Measures candidates of one kernel on one target.

    Attributes:
        spec: the KernelSpec; ``target``: the resolved ``hwspecs.Target`` (spec, mode, device).
        dtype: input dtype name; ``use_ncu``: profile with ncu when it is installed.
        probe: a stored dispatch probe of the target GPU, given to the simulator (or None).
    """

    spec: object
    target: object
    dtype: str = "bfloat16"
    use_ncu: bool = True
    probe: dict | None = None

    @cached_property
    def trace(self):
        """The default problem's access trace, built once per run: the spec's access model when
        it has one, else the generic tracer's (a worker, about 10 s for the default GEMM)."""
        from swizzleperf.agent.verification.simulate import kernel_trace
        return kernel_trace(Path(self.spec.source_path), self.spec, {}, traced=False,
                            hardware=self.target.spec)

    @cached_property
    def schedule(self):
        """The schedule model the simulator times this kernel's programs with
        (``simulate.schedule_for``: a ``tl.dot`` kernel on an NVIDIA GPU), or None (lockstep)."""
        from swizzleperf.agent.verification.simulate import schedule_for
        return schedule_for(self.spec, self.trace, self.target.spec, self.spec.meta_for("default"))

    @cached_property
    def ncu_path(self) -> str | None:
        return find_ncu() if (self.use_ncu and self.target.mode == "measured"
                              and self.target.spec.vendor == "nvidia") else None

    def measure(self, kernel_path: Path, mapping_path: Path, details: dict) -> dict:
        """Metrics of a verified candidate (flat dict, see module docstring), given the verifier's
        ``details`` (which hold the timing on a GPU) and the saved program -> tile map."""
        metrics = self.predict(np.load(mapping_path))
        metrics.update(l2_hit_rate=metrics["predicted_l2_hit_rate"], l2_source=metrics["predicted_source"],
                       dram_bytes=metrics["predicted_dram_bytes"], dram_source=metrics["predicted_source"],
                       time_ms=None, time_spread_ms=None, time_source=None, notes="",
                       profile=profiler.from_prediction(metrics))
        if self.target.mode == "measured":
            metrics.update(self._timing(details.get("timing")))
            measured = self._profile(Path(kernel_path))
            measured["profile"] = _merged(measured.get("profile", []), metrics["profile"])
            metrics.update(measured)
        metrics["roof"] = self.roof(metrics)
        return plain(metrics)

    def roof(self, metrics: dict) -> dict | None:
        """The candidate's roof (profiling/roof.py) from its metrics: measured where it was timed
        (the DRAM bytes ncu's or rocprof's, else the simulator's, labelled predicted; the L2 bytes
        the profiler's L2 requests x the spec's sector size), else predicted; None for a spec
        without ``flops`` and ``min_bytes``."""
        spec, hw = self.spec, self.target.spec
        if not callable(getattr(spec, "flops", None)) or not callable(getattr(spec, "min_bytes", None)):
            return None
        problem = spec.problems["default"]
        common = {"programs": spec.num_programs("default"),
                  "wave": hw.compute_units * self.trace.programs_per_cu}
        args = (float(spec.flops(problem)), float(spec.min_bytes(problem, self.dtype)), hw, self.dtype,
                getattr(spec, "compute", "vector"))
        if metrics.get("time_ms") is None:
            return roof.predicted(*args, dram_bytes=metrics.get("predicted_dram_bytes"),
                                  dram_source=metrics.get("predicted_source") or "", **common)
        dram_source = metrics.get("dram_source") or ""
        requests = next((e for e in metrics.get("profile") or [] if e.get("name") == "l2_requests"
                         and str(e.get("source", "")).startswith("measured")), None)
        return roof.measured(*args, time_ms=metrics["time_ms"], dram_bytes=metrics.get("dram_bytes"),
                             dram_source=dram_source + (" (predicted)" if dram_source.startswith("simulated") else ""),
                             l2_bytes=None if requests is None else requests["value"] * hw.l2_sector_bytes,
                             l2_source="" if requests is None else
                             f"{requests['source']}: L2 requests x {hw.l2_sector_bytes} B", **common)

    def predict(self, order: np.ndarray) -> dict:
        """The simulator's figures for a program -> tile order (``order[p]`` = flat tile index)."""
        result = l2sim.simulate(self.trace, order, self.target.spec, probe=self.probe, schedule=self.schedule)
        return plain({"predicted_l2_hit_rate": result.l2_hit_rate,
                "predicted_dram_bytes": result.dram_read_bytes + result.dram_write_bytes,
                "predicted_per_domain_hit_rate": list(result.per_domain_hit_rate),
                "predicted_cross_domain_bytes": result.cross_domain_bytes,
                "predicted_source": result.source, "simulator_model": result.model})

    def _timing(self, timing: dict | None) -> dict:
        if not timing:
            return {"notes": "no timing returned by the worker"}
        device = self.target.device.name if self.target.device else "GPU"
        return {"time_ms": timing["time_ms"], "time_spread_ms": timing["time_spread_ms"],
                "time_source": f"measured:events:{device}", "tflops": timing["tflops"],
                "repetitions": timing["repetitions"]}

    def _profile(self, kernel_path: Path) -> dict:
        """The profiler's figures of the target's vendor: ncu's (``_ncu``) or an AMD profiler's."""
        if self.target.spec.vendor == "nvidia":
            return self._ncu(kernel_path)
        return self._amd(kernel_path)

    def _amd(self, kernel_path: Path) -> dict:
        """rocprofv3 (or rocprof-compute) on the AMD device; its raw output is kept beside the
        candidate's module (``<module>.rocprofv3/``, in the run's folder)."""
        tool = backends.profiler_for(self.target.spec)
        fallback = ": L2 hit rate and DRAM bytes are the simulator's"
        if not self.use_ncu:
            return {"notes": f"profiling switched off{fallback}"}
        if not tool.available():
            return {"notes": f"{tool.name} not available{fallback}"}
        try:
            measured = tool.profile(kernel_path, self.spec.kernel_name, self.dtype,
                                    kernel_path.parent / f"{kernel_path.stem}.{tool.name}")
        except profiler.ProfilerError as exc:
            return {"notes": f"{tool.name} failed ({exc}){fallback}"}
        figures, notes = measured.figures, list(measured.notes)
        out = {"profile": measured.filtered(), "profile_dir": str(measured.raw_dir), tool.name: measured.raw,
               "profile_time_ms": figures.get("time_ms"), "l2_hit_rate": figures["l2_hit_rate"],
               "l2_source": measured.source}
        if figures.get("dram_bytes") is not None:
            out.update(dram_bytes=figures["dram_bytes"], dram_source=measured.source)
        else:
            notes.append("DRAM bytes are the simulator's")
        return {**out, "notes": "; ".join(notes)}

    def _ncu(self, kernel_path: Path) -> dict:
        if self.ncu_path is None:
            return {"notes": "ncu not available: L2 hit rate and DRAM bytes are the simulator's"}
        try:
            raw = profile_launch(kernel_path, self.spec.kernel_name, self.dtype)
        except NcuError as exc:
            return {"notes": f"ncu failed ({exc}): L2 hit rate and DRAM bytes are the simulator's"}
        hits = raw.get("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", 0.0)
        misses = raw.get("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", 0.0)
        read_hit_rate = hits / (hits + misses) if hits + misses else None
        l2 = {"l2_hit_rate": raw["lts__t_sector_hit_rate.pct"] / 100.0, "l2_source": "measured:ncu"}
        if l2["l2_hit_rate"] > 1.0:
            # seen on an H200 (2026-11-22) for smith_waterman's tiny launches: 122 %. Not a
            # rate; the SM read lookups (hits / (hits + misses)) are, where ncu gave them.
            note = f"ncu's lts__t_sector_hit_rate.pct read {100 * l2['l2_hit_rate']:.1f} % (> 100 %)"
            if read_hit_rate is None:
                return {"notes": f"{note}: L2 hit rate and DRAM bytes are the simulator's"}
            l2 = {"l2_hit_rate": read_hit_rate, "l2_source": "measured:ncu:read-lookups",
                  "notes": f"{note}: the L2 hit rate is the SM read lookups' instead"}
        figures = {**ncu.figures(raw), "l2_hit_rate": l2["l2_hit_rate"]}
        return {**l2, "l2_read_hit_rate": read_hit_rate,
                "dram_bytes": raw.get("dram__bytes_read.sum", 0.0) + raw.get("dram__bytes_write.sum", 0.0),
                "dram_source": "measured:ncu", "ncu_time_ms": raw.get("gpu__time_duration.sum", 0.0) / 1e6,
                "ncu": raw, "profile": profiler.filtered(figures, "measured:ncu",
                                                         sources={"l2_hit_rate": l2["l2_source"]})}


def _merged(measured: list, simulated: list) -> list:
    """The measured entries of a filtered profile, and the simulator's for the figures not measured."""
    names = {e["name"] for e in measured}
    return sorted(measured + [e for e in simulated if e["name"] not in names], key=lambda e: e["rank"])


def profile_kernel(kernel_path: Path, hw: str | None = None, swizzle: str | None = None,
                   dtype: str | None = None, workdir: Path = Path(".swizzleperf"), target=None) -> dict:
    """``swizzleperf profile``: the filtered profile of a kernel module's default problem under its
    own order and, with ``swizzle`` (a catalog order), under that order too, with its changes
    against the kernel's own. Measured by the vendor's profiler on a matching GPU, else the
    simulator's figures for ``hw`` (each entry names its source). Each order's module, program ->
    tile map and the profiler's raw output are kept under ``workdir/profiles/<kernel>-<time>/``.

    Returns ``{"kernel", "hardware", "mode", "message", "folder", "orders": [{"label", "profile",
    "notes"}]}``, each profile with ``vs_baseline`` per entry (profiling/profiler.py's
    ``with_changes``).

    Raises:
        SimulateError: a swizzle that is not in the catalog or not a permutation;
        KernelLoadError / UnknownHardwareError: as ``optimize``.
    """
    import time

    from swizzleperf import hwspecs
    from swizzleperf.agent.verification.candidate import CandidateError, splice, target_args, target_source
    from swizzleperf.agent.verification.simulate import SimulateError, program_order
    from swizzleperf.agent.verification.load import load_spec
    from swizzleperf.agent.verification.swizzles import catalog_source, coordinates_of
    kernel_path = Path(kernel_path)
    spec = load_spec(kernel_path)
    target = target or hwspecs.resolve_target(hw)
    source = read_source(kernel_path)
    folder = Path(workdir) / "profiles" / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    orders = []
    for label in ["kernel's own"] + ([swizzle] if swizzle else []):
        try:
            own = label == "kernel's own"
            target_src = (target_source(source, spec.rewrite_target) if own
                          else catalog_source(label, target_args(source, spec.rewrite_target),
                                              coordinates_of(target_source(source, spec.rewrite_target))))
            module = splice(source, spec.rewrite_target, target_src)
        except (CandidateError, ValueError) as exc:
            raise SimulateError(str(exc)) from None
        path = folder / f"{'own' if own else label.replace(':', '_')}_{kernel_path.name}"
        replace_file(path, module.encode())   # new files renamed over their names, as in a run folder
        _, order, _ = program_order(path, None, None, {})
        tile_map = io.BytesIO()
        np.save(tile_map, order)
        replace_file(path.with_suffix(".map.npy"), tile_map.getvalue())
        measurer = Measurer(load_spec(path), target, dtype or spec.dtypes[0])
        metrics = measurer.measure(path, path.with_suffix(".map.npy"), {})
        orders.append({"label": label, "profile": metrics["profile"], "notes": metrics.get("notes", "")})
    for entry in orders:
        entry["profile"] = profiler.with_changes(entry["profile"], baseline=orders[0]["profile"])
    return {"kernel": spec.name, "hardware": target.spec.name, "mode": target.mode, "message": target.message,
            "folder": str(folder), "orders": orders}
