"""The optimization loop and one run of it: the LangGraph graph (``graph``), starting, resuming
and finishing a run (``run``), its SQLite record (``record``) and its outputs (``report``).

May import the proposers, agent.verification, agent.capture, agent.distributed and the layers
below; never the CLI or swizzleperf.eval.
"""
