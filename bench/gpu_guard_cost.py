"""GPU: the cost of the guard (agent/verification/prove.py ``guarded_source``) that a kernel whose
order is not proven on every grid is written with: the order alone against the same order guarded
(both orders computed, ``tl.where`` on the grid), at a bundled kernel's default problem, 12 rounds
of do_bench interleaved (alternating first). Writes $OUT/guard_cost.json.
Usage (repository root, the project installed): python3 -m bench.gpu_guard_cost"""
import importlib.util, sys, json, statistics, tempfile
from pathlib import Path
import torch, triton
from swizzleperf.agent.verification.candidate import splice
from swizzleperf.agent.verification.prove import Role, guard_condition, guarded_source
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.candidate import target_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
out = {}
folder = Path(tempfile.mkdtemp(prefix="guard-cost-"))
for kernel, order in [("gemm", "grouped-m:8"), ("transpose", "column-major"), ("gemm", "xcd-grouped-m:8:8")]:
    path = Path("kernels") / f"{kernel}.py"
    text = path.read_text()
    own = target_source(text, "swizzle")
    new = catalog_source(order, ARGS)
    mods = {}
    for label, src in [("order", new), ("guarded", None)]:
        if src is None:
            spec0 = mods["order"][1]
            grid = spec0.tile_grid(spec0.problems["default"], spec0.meta_for("default"))
            cond = guard_condition(ARGS, [Role("extent", 0), Role("extent", 1)], 32, [list(grid)])
            src = guarded_source(new, own, "swizzle", cond, "guarded")
        f = folder / f"{kernel}_{label}_{order.replace(':', '_')}.py"
        f.write_text(splice(text, "swizzle", src))
        s = importlib.util.spec_from_file_location(f.stem, f)
        m = importlib.util.module_from_spec(s); sys.modules[f.stem] = m; s.loader.exec_module(m)
        mods[label] = (m, m.SPEC if hasattr(m, "SPEC") else next(v for v in vars(m).values() if type(v).__name__ == "KernelSpec"))
    spec = mods["order"][1]
    problem, meta = spec.problems["default"], spec.meta_for("default")
    inputs = spec.make_inputs(problem, 1, "cuda", "bfloat16")
    times = {k: [] for k in mods}
    for k, (m, sp) in mods.items():
        sp.launch(inputs, **meta)
    torch.cuda.synchronize()
    for r in range(12):
        for k, (m, sp) in (list(mods.items()) if r % 2 == 0 else list(mods.items())[::-1]):
            times[k].append(triton.testing.do_bench(lambda: sp.launch(inputs, **meta), warmup=25, rep=150))
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = [g - o for g, o in zip(times["guarded"], times["order"])]
    row = {"median_ms": med, "paired_diff_median_ms": statistics.median(paired),
           "paired_diff_pct": 100 * statistics.median(paired) / med["order"], "rounds": times,
           "device": torch.cuda.get_device_name()}
    out[f"{kernel}:{order}"] = row
    print(kernel, order, {k: round(v, 4) for k, v in med.items()}, "guarded-order (paired median) %.4f ms = %.2f %%" %
          (row["paired_diff_median_ms"], row["paired_diff_pct"]), flush=True)
import os
Path(os.environ.get("OUT", "."), "guard_cost.json").write_text(json.dumps(out, indent=1))
