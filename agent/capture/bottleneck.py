"""The bottleneck, found (issue #42): ``swizzleperf optimize --app CMD`` without ``--kernel`` and
``swizzleperf profile --app CMD``.

The user's command runs once under a kernel trace: the capture hook in its profile mode
(agent/capture/capture_hook.py, ``SWIZZLEPERF_PROFILE``) counts every Triton kernel's launches,
keeps each one's largest grid with the scalar arguments the lift needs, and times it: torch.profiler's
CUPTI activity on an NVIDIA GPU (``measured:cupti``), rocprofv3 ``--kernel-trace`` around the
app on an AMD GPU where the tool is installed (``measured:rocprofv3``), and on a CPU the wall time
of each interpreted launch (``measured:interpreter-wall``: a CPU figure, which says nothing of
GPU time). ``profile_app`` returns the kernels ranked by time (``KernelProfile``).

``choose`` walks them hottest first and takes the first whose tile order can matter: more than one
program; the lift (agent/capture/lift.py) can reorder it at its largest profiled launch (a lifted
mapping or remapped program ids); where a profiler measured its L2 hit rate, below 95 %. Each
hotter kernel passed over gets its one-line reason (the lift's own refusal where it refused).

A run then ends after its baseline's verification where the launch is one wave on a GPU of one
L2 domain (agent/verification/evaluate.py's ``order_cannot_matter``).
"""
from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from swizzleperf.agent.capture import capture_hook
from swizzleperf.agent.capture.capture import APP_TIMEOUT_S, CaptureError, run_app
from swizzleperf.agent.capture.lift import Launch, LiftError, lift
from swizzleperf.agent.capture.schema import MAX_FILE_BYTES, ProfileFile
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox import gpu_lock
from swizzleperf.sandbox.write_back import source_text

L2_HIT_ENOUGH = 0.95   # SwizzlePerf's bottleneck rule: a kernel already hitting this in L2 has little to win
SOURCE_NOTES = {
    "measured:interpreter-wall": "wall time of each launch under Triton's interpreter on the CPU: it says "
                                 "nothing of GPU time",
    "measured:cupti": "GPU time of each kernel from torch.profiler's CUPTI activity",
    "measured:roctracer": "GPU time of each kernel from torch.profiler's device activity (ROCm)",
    "measured:rocprofv3": "GPU time of each dispatch from rocprofv3 --kernel-trace",
    "measured:cuda-synchronized-wall": "each launch timed between torch.cuda.synchronize() calls (torch.profiler "
                                       "did not start)",
    "measured:launch-wall": "the host's time in each launch call (asynchronous on a GPU: not the kernel's time)",
}


@dataclass(frozen=True)
class KernelRow:
    """One Triton kernel of the app: its launches, largest grid, time and share of the Triton time."""

    kernel: str
    file: str
    line: int
    calls: int
    grid: tuple
    programs: int
    time_s: float | None
    share: float | None
    source: str
    waves: float | None = None
    l2_hit_rate: float | None = None        # where a profiler measured it (not on the CPU path)
    values: dict = field(default_factory=dict)
    pointers: tuple = ()
    globals: dict = field(default_factory=dict)

    def launch(self) -> Launch:
        """The largest profiled launch as the lift takes it."""
        return Launch(grid=tuple(self.grid), values=dict(self.values), pointers=frozenset(self.pointers),
                      globals=dict(self.globals))

    def label(self) -> str:
        share = f"{self.share:.0%} of the time" if self.share is not None else "time unmeasured"
        return f"{self.kernel} ({share})"


@dataclass(frozen=True)
class KernelProfile:
    """The app's Triton kernels, hottest first, with where their times come from."""

    app: str
    rows: tuple
    source: str
    note: str
    wave: int                # programs in one wave: SMs / CUs x 1 program each (an upper bound on waves)
    wave_note: str
    folder: Path

    def as_json(self) -> list:
        """Every row with every field (``--json``)."""
        return [{**asdict(r), "grid": list(r.grid), "pointers": list(r.pointers), "file": r.file,
                 "source_note": SOURCE_NOTES.get(r.source.split(" ")[0], "")} for r in self.rows]


@dataclass(frozen=True)
class Choice:
    """The kernels ``choose`` took (hottest first) and each hotter one it passed over, with why."""

    chosen: tuple
    passed_over: tuple       # (KernelRow, reason)
    kinds: dict              # kernel -> "lifted" / "remapped"

    def lines(self) -> list[str]:
        out = [f"passed over {row.label()}: {why}" for row, why in self.passed_over]
        for row in self.chosen:
            how = "mapping lifted" if self.kinds.get(row.kernel) == "lifted" else "program ids remapped"
            out.append(f"chose {row.label()}: grid {_grid(row.grid)} ({row.programs} programs), its tile order "
                       f"can be changed ({how})")
        return out


def profile_app(app: str, workdir: Path, timeout_s: float = APP_TIMEOUT_S, hw: str | None = None,
                cwd: Path | None = None) -> KernelProfile:
    """Run ``app`` once under a kernel trace (see the module docstring); the kernels ranked.

    Raises:
        CaptureError: the app failed, timed out, or launched no Triton kernel (one line).
    """
    from swizzleperf.hwspecs import resolve_target
    target = resolve_target(hw)
    root = Path(workdir).resolve() / "profiles"
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="app-", dir=root))
    rocprof = _rocprofv3(target)
    command = None
    if rocprof:
        command = (f"{shlex.quote(rocprof)} --kernel-trace --output-format csv -d {shlex.quote(str(work / 'rocprof'))} "
                   f"-o trace -- sh -c {shlex.quote(app)}")
    # several workers on one GPU (eval --apps --gpus N): the app runs beside theirs, its compile and
    # start-up too long to hold the GPU for; the times then say so
    run_app(app, {capture_hook.PROFILE_ENV: "rocprofv3" if rocprof else "1"}, work, timeout_s, cwd, command)
    records, left_out = read_profiles(work)
    if gpu_lock.shared() and target.device is not None:
        left_out.append(f"the GPU was shared with other workers of the suite: a kernel's time may include "
                        f"theirs (the shares rank the kernels; the orders are timed with the GPU alone)")
    kernels = [k for r in records for k in r["kernels"]]
    if not kernels:
        raise CaptureError(f"`{app}` launched no Triton kernel (its output: {work / 'app.log'})"
                           + "".join(f"; {line}" for line in left_out))
    if rocprof:
        _rocprof_times(kernels, work / "rocprof")
    wave = target.spec.compute_units
    simulated = " simulated: no GPU here" if target.mode == "simulated" and target.device is None else (
        " simulated" if target.mode == "simulated" else "")
    rows = ranked(kernels, wave)
    sources = sorted({r["source"] for r in records if r.get("source")})
    source = sources[0] if len(sources) == 1 else ", ".join(sources) or "unmeasured"
    note = "; ".join(sorted({_short(r["note"], 400) for r in records if r.get("note")}) + left_out)
    return KernelProfile(app, rows, source, note, wave,
                         f"{wave} {target.spec.compute_unit_label}s x 1 program each ({target.spec.name}{simulated})",
                         work)


def read_profiles(work: Path) -> tuple[list, list]:
    """The hook's ``profile-<pid>.json`` files in ``work`` (the app's processes wrote them: the app
    may have written anything there), each read within ``MAX_FILE_BYTES`` and ``MAX_JSON_DEPTH`` and
    checked field by field (schema.py's ``ProfileFile``); ``(records, one line per file left out)``."""
    records, left_out = [], []
    for path in sorted(work.glob("profile-*.json")):
        try:
            # NaN kept: the hook's json.dump writes a NaN or infinite scalar argument as such
            records.append(untrusted.validated(ProfileFile, untrusted.read_json(path, MAX_FILE_BYTES, path.name,
                                                                                 follow_links=False),
                                               path.name, "").model_dump(exclude_unset=True))
        except UnicodeDecodeError:
            left_out.append(f"{path.name} left out: it is not UTF-8")
        except json.JSONDecodeError as exc:
            left_out.append(f"{path.name} left out: it is not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})")
        except (untrusted.UntrustedInput, OSError, ValueError, RecursionError) as exc:
            reason = str(exc).split("; received: ")[0].removeprefix(f"{path.name}: ")
            left_out.append(f"{path.name} left out: not a profile the hook wrote ({_short(reason, 300)})")
    return records, left_out


def _short(text: str, limit: int) -> str:
    """``text`` on one line of printable characters, cut at ``limit``."""
    line = "".join(c if c.isprintable() else "?" for c in " ".join(str(text).split()))
    return line if len(line) <= limit else line[:limit] + "..."


def ranked(kernels: list, wave: int) -> tuple:
    """The hook's records merged over processes (same name, file and line), hottest first; shares of
    the summed time of the measured ones."""
    merged: dict = {}
    for k in kernels:
        key = (k["kernel"], k["file"], k["line"])
        if key not in merged:
            merged[key] = dict(k)
            continue
        m = merged[key]
        m["calls"] += k["calls"]
        m["time_s"] = None if m.get("time_s") is None or k.get("time_s") is None else m["time_s"] + k["time_s"]
        if k["programs"] > m["programs"]:
            m.update({f: k[f] for f in ("grid", "programs", "values", "pointers")})
    total = sum(m["time_s"] for m in merged.values() if m.get("time_s") is not None)
    rows = [KernelRow(kernel=m["kernel"], file=m["file"], line=m["line"], calls=m["calls"], grid=tuple(m["grid"]),
                      programs=m["programs"], time_s=m.get("time_s"),
                      share=None if m.get("time_s") is None or total <= 0 else m["time_s"] / total,
                      source=m.get("source", "unmeasured"), waves=m["programs"] / wave if wave else None,
                      values=m.get("values", {}), pointers=tuple(m.get("pointers", ())), globals=m.get("globals", {}))
            for m in merged.values()]
    return tuple(sorted(rows, key=lambda r: (r.time_s is None, -(r.time_s or 0.0), -r.calls)))


def choose(profile: KernelProfile, top: int = 1) -> Choice:
    """The ``top`` hottest kernels whose tile order can matter, and why each hotter one was passed over.

    Raises:
        CaptureError: none can be reordered: one line with each kernel's reason.
    """
    chosen, passed, kinds = [], [], {}
    for row in profile.rows:
        if len(chosen) == top:
            break
        why, kind = why_not(row)
        if why is None:
            chosen.append(row)
            kinds[row.kernel] = kind
        else:
            passed.append((row, why))
    if not chosen:
        reasons = "; ".join(f"{row.label()}: {why}" for row, why in passed)
        raise CaptureError(f"no kernel of `{profile.app}` has a tile order that can matter: {reasons}")
    return Choice(tuple(chosen), tuple(passed), kinds)


def assessed(profile: KernelProfile) -> list:
    """``as_json``'s rows, each with ``order_can_matter``, ``passed_over_because`` (the one-line
    reason, or None) and ``rewrite`` (``lifted`` / ``remapped``, or None)."""
    out = []
    for row, data in zip(profile.rows, profile.as_json()):
        why, kind = why_not(row)
        out.append({**data, "order_can_matter": why is None, "passed_over_because": why, "rewrite": kind})
    return out


def why_not(row: KernelRow) -> tuple:
    """``(None, "lifted" | "remapped")`` where the kernel's tile order can matter, else ``(reason, None)``."""
    if row.programs <= 1:
        return f"a launch of one program (grid {_grid(row.grid)}): there is no order to change", None
    if row.l2_hit_rate is not None and row.l2_hit_rate >= L2_HIT_ENOUGH:
        return (f"its L2 hit rate is {row.l2_hit_rate:.1%} (measured), at or above {L2_HIT_ENOUGH:.0%}: little "
                f"for an order to win"), None
    try:
        source = source_text(Path(row.file).read_bytes()).removeprefix("\ufeff")   # as Python reads it: a BOM, a coding line
    except OSError as exc:
        return f"its source {row.file} cannot be read ({exc.strerror})", None
    except (UnicodeDecodeError, LookupError) as exc:
        return f"its source {row.file} does not read in its declared encoding ({exc})", None
    try:
        lifted = lift(source, row.kernel, row.launch(), filename=row.file)
    except LiftError as exc:
        return str(exc), None
    except SyntaxError as exc:
        return f"its file does not parse ({exc.msg}, line {exc.lineno})", None
    return None, lifted.kind


def _grid(grid) -> str:
    return " x ".join(str(g) for g in grid) or "?"


def _rocprofv3(target) -> str | None:
    """rocprofv3 where the run is on a live AMD GPU and the tool is installed (untested without the
    hardware), else None."""
    if target.device is None or target.device.vendor != "amd":
        return None
    from swizzleperf.profiling.rocprof import find_tool
    return find_tool("rocprofv3")


def _rocprof_times(kernels: list, folder: Path) -> None:
    """Each record's ``time_s`` from rocprofv3's kernel traces (summed per kernel name; names that
    several records share are split by calls). Untested without an AMD GPU."""
    from swizzleperf.profiling.rocprof import read_trace
    times: dict = {}
    for path in sorted(folder.rglob("*kernel_trace.csv")):
        trace = read_trace(path)
        for name, ns in trace.groupby("Kernel_Name")["duration_ns"].sum().items():
            times[str(name)] = times.get(str(name), 0.0) + float(ns) * 1e-9
    for k in kernels:
        sharing = sum(x["calls"] for x in kernels if x["kernel"] == k["kernel"])
        seconds = times.get(k["kernel"])
        k["time_s"] = None if seconds is None else seconds * k["calls"] / max(1, sharing)
        k["source"] = "measured:rocprofv3" if seconds is not None else "unmeasured: no rocprofv3 dispatch of that name"


def table_rows(profile: KernelProfile) -> list:
    """The profile's rows as text cells: kernel, where, calls, grid, programs, waves, time, share, source."""
    out = []
    for r in profile.rows:
        time_text = "-" if r.time_s is None else f"{r.time_s * 1e3:.3f} ms"
        share = "-" if r.share is None else f"{r.share:.1%}"
        waves = "-" if r.waves is None else f"{r.waves:.2f}"
        out.append([r.kernel, f"{Path(r.file).name}:{r.line}", str(r.calls), _grid(r.grid), str(r.programs),
                    waves, time_text, share, r.source])
    return out


__all__ = ["Choice", "KernelProfile", "KernelRow", "assessed", "choose", "profile_app", "ranked",
           "table_rows", "why_not"]
