"""Evaluation over the bundled kernels and the project's benchmarks: ``swizzleperf eval`` (``suite``,
``workers``, ``evals_table``), the distributed hand bench (``dist_bench``, under torchrun), the
validations of the simulator and the overlap model, the GPU scripts' Python halves and the
result tables committed under eval/results/.

On top with the CLI: may import everything of the package but agent.cli (which runs it).
"""
