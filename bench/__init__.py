"""The lab, not shipped in the wheel: the GPU measurement scripts (``gpu_*.py`` and their
``gpu_*.sh`` drivers), probes, the validations of the L2 simulator and the overlap model, the
distributed hand bench (``dist_bench``, under torchrun), the real-LLM runs, and every committed
result with its command under ``results/``.

Run from the repository root, as modules of this folder: ``python -m bench.validate_simulator``,
``torchrun --nproc-per-node 2 -m bench.dist_bench``; the shell drivers as ``bash bench/gpu_*.sh``.
They import the installed ``swizzleperf`` (``pip install -e .``) and each other as ``bench.*``;
the product never imports them. ``python -m bench.package_data`` makes the package data a run
reads (the tuned GEMM configurations, the committed distributed measurements) from ``results/``.
"""
