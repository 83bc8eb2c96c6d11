"""Measurement and its models: the profilers behind one protocol (``profiler``, ``backends``:
ncu, rocprofv3 / rocprof-compute), the L2 simulator (``l2sim``) and the memory-access tracer
(``tracer``, ``interpreter_hooks``), the access analysis (``analysis``), the dispatch probe
(``dispatch_probe``, ``probe_kernels``) and the overlap model of distributed kernels
(``overlap_model``, ``overlap_calibration``).

Imports hwspecs, kernels, sandbox (the profilers run the worker in its box) and prompts (the
analysis' template); never the agent or swizzleperf.eval.
"""
