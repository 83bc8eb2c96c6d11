"""The distributed kernel's evaluator (``evaluator``: ``DistEvaluator``, the same seam as
agent/verification/evaluate.py's ``Evaluator``) and what it drives: configurations and their
schema (``config``), problems and check problems sized for a candidate (``problems``), the
interpreted worker of its stages (``worker``, ``python -m swizzleperf.agent.distributed.worker``),
the pool of rank processes on W GPUs (``rank_pool``, ``rank_worker``), measurements and the
run's answer (``measured``), and ``python -m swizzleperf.agent.distributed run`` (``__main__``:
one configuration verified and timed against torch + NCCL).

Imports agent.verification and the layers below it; never agent.capture (its sibling), the
proposers, the loop or the CLI.
"""
