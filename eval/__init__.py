"""The evaluation the product ships: ``swizzleperf eval`` over the bundled kernels (``suite``,
``workers``, ``evals_table``), over a folder of apps (``apps``, ``app_worker``, ``apps_ray``), the
reflection history the notebook reads (``history``, ``notebook``). The lab (the GPU measurement
scripts, probes, validations, the distributed hand bench) and every committed result are in the
repository's bench/, which is not shipped.

On top with the CLI: may import everything of the package but agent.cli (which runs it).
"""
