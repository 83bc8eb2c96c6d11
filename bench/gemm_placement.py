"""Where the GEMM's own programs land: ``%smid`` of every program id of one launch of
``kernels/gemm.py`` (default problem) under each order, to check the simulator's placement model
(the dispatch probe's equal-length programs against a real kernel's).

    # on the GPU machine (source bench/gpu_setup.sh first)
    python3 -m bench.gemm_placement --out OUT.json [--orders row-major,grouped-m:8]

The kernel source is the bundled one with the order spliced in and two edits, each checked: an
``smid_ptr`` argument and, right after ``pid = tl.program_id(axis=0)``, a store of ``%smid``.
Writes ``{device, rows: [{order, sm_of_program}]}``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDERS = ["row-major", "column-major", "grouped-m:4", "grouped-m:8", "grouped-m:16", "grouped-m:32",
          "grouped-m:64", "grouped-n:8", "grouped-n:16", "grouped-n:32"]
EDITS = [("a_ptr, b_ptr, c_ptr,", "a_ptr, b_ptr, c_ptr, smid_ptr,"),
         ("    pid = tl.program_id(axis=0)\n",
          "    pid = tl.program_id(axis=0)\n    tl.store(smid_ptr + pid, tl.inline_asm_elementwise("
          "\"mov.u32 $0, %smid;\", \"=r,r\", [pid], dtype=tl.int32, is_pure=False, pack=1))\n"),
         ("matmul_kernel[grid](\n        a, b, c,", "matmul_kernel[grid](\n        a, b, c, SMID,")]


def instrumented(order: str) -> str:
    """gemm.py's source with ``order`` spliced in and the ``%smid`` store added."""
    from swizzleperf.agent.verification.candidate import splice, target_args
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.agent.verification.swizzles import catalog_source
    path = ROOT / "kernels" / "gemm.py"
    source, (_, spec) = path.read_text(), load_kernel(path)
    text = splice(source, spec.rewrite_target, catalog_source(order, target_args(source, spec.rewrite_target)))
    for old, new in EDITS:
        if text.count(old) != 1:
            raise SystemExit(f"gemm.py changed: {old!r} found {text.count(old)} times, expected once")
        text = text.replace(old, new)
    return text


def placement(order: str, folder: Path) -> list:
    """SM of every program of the second launch (the first compiles)."""
    import torch
    path = folder / f"gemm_{order.replace(':', '_').replace('-', '_')}.py"
    path.write_text(instrumented(order))
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    spec = module.SPEC
    problem, meta = spec.problems["default"], spec.meta_for("default")
    inputs = module.make_inputs(problem, seed=0, device="cuda")
    grid = 1
    for n in spec.tile_grid(problem, meta):
        grid *= n
    module.SMID = torch.full((grid,), -1, dtype=torch.int32, device="cuda")
    for _ in range(2):
        module.launch(inputs, **meta)
    torch.cuda.synchronize()
    sm = module.SMID.cpu()
    if (sm < 0).any():
        raise SystemExit(f"{order}: {(sm < 0).sum().item()} programs recorded no SM")
    return sm.tolist()


def main() -> None:
    import torch
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--orders", default=",".join(ORDERS))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for order in args.orders.split(","):
            rows.append({"order": order, "sm_of_program": placement(order, Path(folder))})
            print(order, "programs 0-15 on SMs", rows[-1]["sm_of_program"][:16], flush=True)
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "kernel": "kernels/gemm.py",
                                          "rows": rows}))


if __name__ == "__main__":
    main()
