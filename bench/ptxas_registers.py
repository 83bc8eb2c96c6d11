"""Registers and spills of a distributed kernel's launches for sm_90, without a GPU: every launch of
the given patterns at a problem of ``--size`` (M = N = K, large enough that the bench's tile
configuration takes its TMA paths: row tiles dividing the rows; tensor descriptors taken as on a
Hopper GPU, ``compile_check.descriptors_as_on_hopper``), compiled as the JIT would (``compile_check.compile_launch``), then ``ptxas -v`` (the
one Triton ships) on its PTX.

    PYTHONPATH=/tmp/tri36 python -m bench.ptxas_registers gemm_reduce_scatter \\
        --patterns epilogue_reduce,push_copy_engine --meta SUM_IN_EPILOGUE=0 --meta SUM_IN_EPILOGUE=1

Prints one line per distinct launch (kernel, its pattern-selecting constexprs, ptxas's registers,
stack frame and spill bytes, Triton's shared memory bytes: sm_90 has 227 KiB a block). ``--config`` gives the tile configuration (default: 128 x 256 x 64,
8 warps, 4 stages, EPILOGUE_SUBTILE=1, the per-rank GEMM's at the GEMM + RS bench problems on Hopper).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import tempfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel")
    parser.add_argument("--patterns", default="")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--config", default='{"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, '
                                            '"num_stages": 4, "EPILOGUE_SUBTILE": 1}')
    parser.add_argument("--meta", action="append", default=[], help="KNOB=VALUE[,KNOB=VALUE...], one variant each")
    args = parser.parse_args()
    import triton
    from triton.runtime.jit import JITFunction

    from swizzleperf.agent.verification.simulate import parse_meta
    from swizzleperf.kernels.distributed import compile_check, load_spec

    spec = load_spec(args.kernel)
    n = args.size
    spec = dataclasses.replace(spec, problems={**spec.problems, "check": {"M": n, "N": n, "K": n}})
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    compiled, seen = [], set()
    original_compile = triton.compile

    def keep(*a, **k):
        kernel = original_compile(*a, **k)
        compiled.append(kernel)
        return kernel

    def report(self, *launch_args, grid, warmup, **kwargs):
        key = (self.__name__, tuple(sorted((k, str(v)) for k, v in kwargs.items())))
        if key in seen:
            return
        seen.add(key)
        compile_check.compile_launch(self, launch_args, dict(kwargs), 90)
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(compiled[-1].asm["ptx"])
        done = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", f.name, "-o", os.devnull],
                              capture_output=True, text=True)
        os.unlink(f.name)
        info = " | ".join(l.split(":", 1)[-1].strip() for l in done.stderr.splitlines()
                          if "registers" in l or "spill" in l)
        flags = {k: v for k, v in kwargs.items() if k.isupper() and isinstance(v, bool)}
        print(f"{self.__name__} {flags}: {info} | {compiled[-1].metadata.shared} bytes of shared "
              "memory (Triton's count)", flush=True)

    triton.compile, JITFunction.run = keep, report
    config = json.loads(args.config)
    variants = [parse_meta(m) for m in args.meta] or [{}]
    for pattern in (args.patterns.split(",") if args.patterns else spec.patterns):
        for variant in variants:
            knobs = {**config, **variant}
            print(f"== {pattern} {variant or ''}", flush=True)
            with compile_check.descriptors_as_on_hopper(args.kernel):
                compile_check._launch(spec, 2, pattern, knobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
