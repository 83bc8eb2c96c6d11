"""Parsing ncu's raw CSV page, and what happens without ncu."""
import pytest

from swizzleperf.profiling import ncu

LOG = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "matmul_kernel" - 0: 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","lts__t_sector_hit_rate.pct","dram__bytes_read.sum","dram__bytes_write.sum","launch__grid_size"
"","","","","","","","","","","","ns","%","byte","byte",""
"0","4242","python3.12","h","matmul_kernel","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","3,512,000","46.0","8,820,000,000","536,870,912","8,192"
"1","4242","python3.12","h","matmul_kernel","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","3,508,000","47.0","8,800,000,000","536,870,912","8,192"
==PROF== Disconnected from process 4242
'''


def test_parse_averages_the_launches_and_accepts_thousands_separators():
    metrics = ncu.parse_csv(LOG, "matmul_kernel")
    assert metrics["lts__t_sector_hit_rate.pct"] == pytest.approx(46.5)
    assert metrics["gpu__time_duration.sum"] == pytest.approx(3_510_000)
    assert metrics["dram__bytes_read.sum"] == pytest.approx(8.81e9)
    assert metrics["launch__grid_size"] == 8192 and metrics["launches"] == 2
    assert all(type(v) is float for v in metrics.values())


# ncu 2025.3.1 on an H200 (2026-11-22), application range replay of kernels/smith_waterman.py's
# NVTX range (profile_run), columns trimmed: the row names the range, not a kernel.
RANGE_LOG = '''"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg","Kernel Name","Context","Stream","Device","CC","dram__bytes_read.sum","gpu__time_duration.sum","lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum","lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
"","","","","","","","","","","","byte","ns","sector","sector"
"0","489","python3.12","127.0.0.1","489  ""<default domain>:swizzleperf_run:none:none:none:none:none:none"" ","","range","1","n/a","0","9.0","674,560","50,155,040","2,794,445","69,788"
'''


def test_parse_a_range_replay_row_by_its_nvtx_range():
    metrics = ncu.parse_csv(RANGE_LOG, ncu.RUN_RANGE)
    assert metrics["lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"] == 2_794_445
    assert metrics["dram__bytes_read.sum"] == 674_560 and metrics["launches"] == 1
    with pytest.raises(ncu.NcuError, match="saw"):
        ncu.parse_csv(RANGE_LOG, "other_range")


def test_parse_without_the_kernel_says_what_it_saw():
    with pytest.raises(ncu.NcuError, match="saw"):
        ncu.parse_csv(LOG.replace("matmul_kernel", "other_kernel"), "matmul_kernel")
    with pytest.raises(ncu.NcuError, match="profiled no launch"):
        ncu.parse_csv("==PROF== nothing\n", "matmul_kernel")


def test_no_ncu_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    with pytest.raises(ncu.NcuError, match="ncu not found"):
        ncu.profile_launch(tmp_path / "k.py", "matmul_kernel", "bfloat16")


_HEAD = '"ID","Kernel Name","lts__t_sector_hit_rate.pct","gpu__time_duration.sum"\n'


@pytest.mark.parametrize("text", [
    _HEAD + '"0","matmul_kernel","nan","1"\n',
    _HEAD + '"0","matmul_kernel","inf","1e400"\n',
    _HEAD + '"0","matmul_kernel","high","1"\n',
    _HEAD + '"0","matmul_kernel","=cmd|\' /C calc\'!A0","1"\n',
    _HEAD + '"0","matmul_kernel,"50","1\n',
    '"Kernel Name","x"\n"matmul_kernel","1"\n',
], ids=["nan", "inf", "text", "formula", "unbalanced-quote", "no-id-column"])
def test_a_hostile_ncu_table_is_one_ncu_error_never_a_traceback_or_a_non_finite_figure(text):
    """ncu's log is written where the box can write: its cells are data, checked (#41, third replay)."""
    with pytest.raises(ncu.NcuError):
        ncu.parse_csv(text, "matmul_kernel")
