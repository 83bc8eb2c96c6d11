"""Which profiler backend a hardware spec gets: the one place that knows every backend.

The protocol and the filtered profile live in ``profiling/profiler.py``; the backends
(``ncu.py``, ``rocprof.py``) import it, and it imports none of them.
"""
from __future__ import annotations

from swizzleperf.profiling.ncu import NcuProfiler
from swizzleperf.profiling.profiler import Profiler, ProfilerError
from swizzleperf.profiling.rocprof import RocprofCompute, RocprofV3


def profiler_for(spec) -> Profiler:
    """The profiler of a hardware spec's vendor (``"nvidia"``: ncu; ``"amd"``: rocprofv3, or
    rocprof-compute where only that is installed), set up for the spec's L2 domains.

    Raises:
        ProfilerError: a vendor with no profiler backend.
    """
    if spec.vendor == "nvidia":
        return NcuProfiler()
    if spec.vendor == "amd":
        v3, compute = RocprofV3(l2_domains=spec.l2_domains), RocprofCompute(l2_domains=spec.l2_domains)
        return compute if not v3.available() and compute.available() else v3
    raise ProfilerError(f"no profiler for vendor {spec.vendor!r}: expected 'nvidia' or 'amd'")
