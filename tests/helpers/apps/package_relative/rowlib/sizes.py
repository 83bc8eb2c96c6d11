import triton


def block_for(n):
    return min(64, triton.next_power_of_2(n))
