"""bench/l2_partition_probe.py's kernels under Triton's interpreter: the tests of
_l2_partition_probe_interpreted.py, run in a pytest process of their own with TRITON_INTERPRET=1
(set in this process, it would reach every later test of the same worker)."""
from __future__ import annotations

from pathlib import Path

from interpreted import run_interpreted

INTERPRETED = Path(__file__).with_name("_l2_partition_probe_interpreted.py")


def test_the_probe_kernels_read_what_each_case_claims():
    done = run_interpreted(INTERPRETED)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_summary_reads_each_cases_counters_and_says_which_were_not_profiled():
    from bench.l2_partition_probe import BLOCK, summary
    sectors = 4 * 1000 * BLOCK * 4 / 32          # 4 passes over 1000 chunks
    result = {"cases": [
        {"name": "one-0.25", "fraction": 0.25, "reads": 4000, "footprint_bytes": 1000 * BLOCK * 4, "question": "q1",
         "metrics": {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 0.75 * sectors,
                     "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 0.25 * sectors,
                     "lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum": 10.0,
                     "lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum": 20.0,
                     "dram__bytes_read.sum": 2.0 * 1000 * BLOCK * 4}},
        {"name": "far-A0", "fraction": 0.125, "reads": 10, "footprint_bytes": 10, "question": "q2", "metrics": None}]}
    table = summary(result).splitlines()
    assert table[2] == "| one-0.25 | 0.250 | 1.000 | 75.0 % | 10 / 20 | 2.00 | q1 |"
    assert table[3].startswith("| far-A0 | 0.125 | not profiled |")


def test_every_case_compiles_for_hopper_with_its_cg_loads():
    """The launches of every case (the together-N ones too) compiled for sm_90 as on the GPU
    (a real %smid), without one: kernels/distributed/compile_check.py."""
    from bench.l2_partition_probe import cases, launch
    from swizzleperf.kernels.distributed.compile_check import compiling_launches
    with compiling_launches(90) as compiled:
        for case in cases():
            launch(case, 2**20, [0, 1] * 66, device="cpu", on_gpu=True)
    assert compiled and all(k[0] == "stream_kernel" for k in compiled)
    assert all(v is not None and "ld.global.cg" in v.asm["ptx"] for v in compiled.values())
