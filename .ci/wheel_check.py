"""The installed wheel answers as the checkout does (issue #45: a non-editable install read
eval/results/ (now bench/results/) through paths of the source tree, so from another folder its distributed runs fell
back to the default GEMM configurations and its simulated runs lost the committed measurements,
silently).

    python .ci/wheel_check.py CHECKOUT_BIN WHEEL_BIN

Each BIN is the ``bin/`` folder of an environment (its ``swizzleperf`` and ``python``). Each
command runs from a fresh temporary folder of its own, with a fresh cache
(``XDG_CACHE_HOME``), on copies of the bundled kernels, so nothing of the checkout is in reach
but what the environment installed:

1. the README's main job, ``swizzleperf optimize kernels/gemm.py`` (simulated MI300X here);
2. a simulated distributed run with committed measurements to show and calibrate on,
   ``swizzleperf optimize kernels/distributed/all_gather_gemm.py --hw h100 --world-size 2
   --iterations 2``;
3. the tuned per-rank GEMM configuration every bundled distributed kernel takes at each of its
   problems on an H100 and an H200 (what a measured run uses; it needs no GPU to look up).

Their reports (``report.json``, the run's own names and folders taken out) must be equal, and
the package data must have been found on both sides (the distributed report lists committed
measurements and a calibration on them; some problem has a tuned configuration): both falling back
alike would compare equal. Otherwise the first differences are printed and the exit status is 1.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "main job": ["optimize", "kernels/gemm.py"],
    "simulated distributed run": ["optimize", "kernels/distributed/all_gather_gemm.py", "--hw", "h100",
                                  "--world-size", "2", "--iterations", "2"],
}
#: Keys of a report that name this run (its id, folders and the kernel's path), not its answer.
RUN_KEYS = {"run_id", "run_dir", "kernel_path", "best_kernel_file", "folder"}
TUNED = r"""
import importlib, json, pkgutil
from pathlib import Path
from swizzleperf.agent.distributed import problems
import swizzleperf.kernels.distributed as kd
out = {}
for info in pkgutil.iter_modules(kd.__path__):
    spec = getattr(importlib.import_module(f"{kd.__name__}.{info.name}"), "SPEC", None)
    if spec is None or spec.compute_shape is None:
        continue
    for name, sizes in spec.problems.items():
        for device, sms in (("NVIDIA H100 80GB HBM3", 132), ("NVIDIA H200", 132)):
            knobs, source = problems.tuned_gemm(spec, dict(sizes), 2, "bfloat16", device, sms)
            # the cache file's folder differs between a checkout and an install; its name does not
            out[f"{spec.name} {name} {device}"] = [knobs, source.replace(str(Path(problems.COMMITTED_GEMM_CONFIGS).parent), "")]
print(json.dumps(out, sort_keys=True))
"""


def run(bin_dir: Path, args: list, label: str) -> dict:
    """The report of ``swizzleperf ARGS`` run from a fresh folder (the bundled kernels copied in)."""
    work = Path(tempfile.mkdtemp(prefix="swizzleperf-wheel-check-"))
    try:
        shutil.copytree(ROOT / "kernels", work / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
        env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        env.pop("PYTHONPATH", None)
        done = subprocess.run([str(bin_dir / "swizzleperf"), *args], cwd=work, env=env, text=True,
                              capture_output=True, timeout=900)
        if done.returncode != 0:
            sys.exit(f"{label}: swizzleperf {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        reports = sorted((work / ".swizzleperf" / "runs").glob("*/report.json"))
        if len(reports) != 1:
            sys.exit(f"{label}: expected one report.json under {work}/.swizzleperf/runs, found {len(reports)}")
        report = json.loads(reports[0].read_text())
        return _anonymous(report, [report.get("run_id") or "", str(work)])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tuned(bin_dir: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="swizzleperf-wheel-check-") as work:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(work) / "cache")}
        env.pop("PYTHONPATH", None)
        done = subprocess.run([str(bin_dir / "python"), "-c", TUNED], cwd=work, env=env, text=True,
                              capture_output=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"{bin_dir}: the tuned GEMM look-up failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def _anonymous(value, names: list):
    """``value`` without ``RUN_KEYS`` and with the run's id and folder taken out of every string."""
    if isinstance(value, dict):
        return {k: _anonymous(v, names) for k, v in value.items() if k not in RUN_KEYS}
    if isinstance(value, list):
        return [_anonymous(v, names) for v in value]
    if isinstance(value, str):
        for name in names:
            value = value.replace(name, "<run>") if name else value
    return value


def found_data(label: str, answer: dict) -> str:
    """Why ``answer`` shows the package data was not found, or ""."""
    if label == "simulated distributed run":
        dist = answer.get("distributed") or {}
        if not dist.get("committed") or not (dist.get("calibration") or {}).get("observations"):
            return "no committed measurements shown or calibrated on"
    if label == "tuned GEMM configurations" and not any(knobs for knobs, _ in answer.values()):
        return "no tuned configuration found for any problem"
    return ""


def differences(a, b, where: str = "") -> list:
    """Where two JSON values differ: ``["path: checkout X, wheel Y"]``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where or '.'}: checkout {str(a)[:300]!r}, wheel {str(b)[:300]!r}"]


def main(argv: list) -> int:
    if len(argv) != 2:
        sys.exit(__doc__)
    checkout, wheel = (Path(a).resolve() for a in argv)
    failed = False
    for label, args in [*COMMANDS.items(), ("tuned GEMM configurations", None)]:
        answers = [run(b, args, label) if args else tuned(b) for b in (checkout, wheel)]
        found = differences(*answers)
        print(f"{label}: {'the same' if not found else f'{len(found)} differences'}")
        for line in found[:20]:
            print("  " + line)
        missing = [f"{side}: {why}" for side, answer in zip(("checkout", "wheel"), answers)
                   if (why := found_data(label, answer))]
        for line in missing:
            print("  " + line)
        failed |= bool(found or missing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
