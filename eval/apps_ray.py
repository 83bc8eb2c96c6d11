"""``swizzleperf eval --apps DIR --ray``: the rows of an apps eval as Ray tasks (an optional extra:
``pip install "swizzleperf[ray]"``; Ray is imported only here).

Each app is one task asking one GPU where the cluster has GPUs (Ray sets its CUDA_VISIBLE_DEVICES)
and one CPU; the task runs the same worker process with the same budget as on one host
(eval/app_worker.py ``run_row``) and returns the row, which the driver writes to the one record as
the tasks finish (``ray.wait``). The paths in a row job (the app, the workdir) must be the same on
every node: a shared file system, as for any Ray job reading files.

An LLM eval's options travel in the row job (``RowJob.llm``) as on one host, its endpoint among
them, in the task's arguments (never a command line; ``run_row`` hands it to the worker through its
environment). The API key does not travel: each task's worker reads ``OPENAI_API_KEY`` from the
environment of its node (a local Ray started here inherits this process's); a node without it sends
no key, and a server that wants one refuses it: the rows are ``proposer failed``, saying so.
"""
from __future__ import annotations

from typing import Callable

from swizzleperf.eval.app_worker import RowJob, run_row

INSTALL = 'pip install "swizzleperf[ray]"'


class RayMissing(Exception):
    """Ray is not installed; the message says how to get it."""


def run_on_ray(jobs: list[RowJob], address: str | None, on_row: Callable) -> None:
    """Run ``jobs`` as Ray tasks on the cluster at ``address`` (None: ``$RAY_ADDRESS`` or a new local
    one; ``local``: a new local one), ``on_row(row)`` as each finishes. A Ray started here is shut down."""
    try:
        import ray
    except ImportError:
        raise RayMissing(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    pending: list = []
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        task = ray.remote(num_gpus=1 if gpus else 0, num_cpus=1, max_retries=0)(run_row)
        pending = [task.remote(job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            on_row(ray.get(done[0]))
    except BaseException:
        for ref in pending:   # an interrupted eval: the rows not back yet are cancelled
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
