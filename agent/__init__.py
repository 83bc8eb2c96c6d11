"""swizzleperf.agent: the optimizer, in rooms by concern. Imports point down, the rooms in this
order (tests/test_layers.py checks every import of the package, inside functions too):

- ``verification``: one candidate from source to figures: the static check and the splice
  (candidate), loading a kernel module (load), the workers and their stages (worker, stages,
  probe, tune_worker), measuring and simulating, the swizzle catalog, judging attempts (lessons)
  and the single-GPU ``Evaluator``. Imports only the layers below the agent (hwspecs, kernels,
  sandbox, prompts, profiling).
- ``capture`` (a user's own kernel, ``--app``) and ``distributed`` (the ``DistEvaluator`` of a
  multi-GPU kernel, its rank pool and workers): siblings on verification; neither imports the
  other.
- ``proposers``: who writes candidates (the LLM, the built-in policies, a script) and the parsing
  of their replies; may import the evaluators' candidate types, never the loop.
- ``loop``: the LangGraph loop, the run (start, resume, finish), its record and report.
- ``cli`` (the ``swizzleperf`` command), above ``swizzleperf.eval``, which it runs.

This package itself imports nothing.
"""
