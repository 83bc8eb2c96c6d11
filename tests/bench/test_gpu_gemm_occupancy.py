"""bench/gpu_gemm_occupancy.py: every two-per-SM tile fits half of sm_90's shared memory (none is
silently left out) and one per SM would not have room for a second of the usual default."""
from bench.gpu_gemm_occupancy import TWO_PER_SM
from swizzleperf.kernels.schedule.gemm_tuning import DEFAULT_CONFIG
from swizzleperf.kernels.schedule.persistent_gemm import SM90_SHARED_BYTES, shared_bytes


def test_every_two_per_sm_tile_fits_half_the_shared_memory():
    assert all(shared_bytes(t, 2) <= SM90_SHARED_BYTES // 2 for t in TWO_PER_SM)
    assert shared_bytes(DEFAULT_CONFIG, 2) > SM90_SHARED_BYTES // 2
