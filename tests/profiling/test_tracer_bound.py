"""The generic tracer's extension refuses a grid whose trace would pass the simulator's bound
(kernels/trace.py's ``MAX_ACCESSES``) before it allocates: programs x the accesses a sampled
program makes, one line, at once (#41)."""
from __future__ import annotations

import time

import pytest

from swizzleperf.kernels.trace import MAX_ACCESSES, TraceTooLarge
from swizzleperf.profiling.tracer import extend, sample_tiles
from tests.profiling.test_tracer import _gemm_like


@pytest.mark.parametrize("grid, expected", [
    ((1 << 22, 2), "8,388,608 programs x 5 accesses"),   # within the bound in programs, not in accesses
    ((1 << 40, 1), "1,099,511,627,776 programs x 5 accesses"),
])
def test_an_extension_past_the_bound_is_refused_before_it_allocates(grid, expected):
    samples = {t: _gemm_like(t) for t in sample_tiles(grid)}
    start = time.process_time()
    with pytest.raises(TraceTooLarge) as caught:
        extend(samples, grid, programs_per_cu=1, source="test")
    assert time.process_time() - start < 1.0
    assert expected in str(caught.value) and f"{MAX_ACCESSES:,}" in str(caught.value)


def test_a_grid_within_the_bound_still_extends():
    grid = (64, 32)
    trace = extend({t: _gemm_like(t) for t in sample_tiles(grid)}, grid, programs_per_cu=1, source="test",
                   granule_bytes=1)
    assert trace.num_tiles == 64 * 32 and trace.keys.shape[1] == 2
