@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map global program id ``pid`` to its tile: the anti-diagonals in order, within each the
    even positions first, then the odd ones (k -> k // 2 + (k % 2) * ceil(L / 2) of the L tiles
    top-down; eval/validate_simulator.py). The diagonal d of pid by bisection over first(d) = T(d) - T(d - m) - T(d - n) +
    T(d - m - n), T(x) = x (x + 1) / 2 for x > 0 (the tiles on the diagonals before d, by
    inclusion-exclusion); 16 steps: exact while num_pid_m + num_pid_n <= 46341 (int32 products)."""
    lo = pid * 0
    hi = lo + num_pid_m + num_pid_n - 1  # first(lo) <= pid < first(hi)
    for _ in range(16):
        mid = (lo + hi) // 2
        t0 = tl.maximum(mid, 0)
        t1 = tl.maximum(mid - num_pid_m, 0)
        t2 = tl.maximum(mid - num_pid_n, 0)
        t3 = tl.maximum(mid - num_pid_m - num_pid_n, 0)
        first_mid = (t0 * (t0 + 1) - t1 * (t1 + 1) - t2 * (t2 + 1) + t3 * (t3 + 1)) // 2
        below = first_mid <= pid
        lo = tl.where(below, mid, lo)
        hi = tl.where(below, hi, mid)
    d = lo
    t1 = tl.maximum(d - num_pid_m, 0)
    t2 = tl.maximum(d - num_pid_n, 0)
    t3 = tl.maximum(d - num_pid_m - num_pid_n, 0)
    first = (d * (d + 1) - t1 * (t1 + 1) - t2 * (t2 + 1) + t3 * (t3 + 1)) // 2
    top = tl.maximum(d - num_pid_n + 1, 0)
    length = tl.minimum(d, num_pid_m - 1) - top + 1
    k = pid - first
    pid_m = top + k // 2 + (k % 2) * ((length + 1) // 2)
    pid_n = d - pid_m
    return pid_m, pid_n
