"""Verification and measurement of one candidate: the static check and the splice by AST
(``candidate``), loading a kernel module with its rewrite target stood in (``load``), the worker
subprocess in its box and its stages (``verify``, ``worker``, ``stages``, ``probe``,
``tune_worker``), the simulator's and the profilers' figures (``measure``, ``simulate``), the
swizzle catalog (``swizzles``), judging attempts (``lessons``), and the single-GPU kernel's
``Evaluator`` (``evaluate``), the seam between the loop and a kind of kernel.

Imports only hwspecs, kernels, sandbox, prompts and profiling: nothing of the agent's other rooms
(capture, distributed, proposers, loop, cli); a room above chooses its own worker module
(``verify.run_worker``'s ``worker``) instead of being imported here.
"""
