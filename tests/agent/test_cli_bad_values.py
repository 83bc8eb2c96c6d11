"""#41, a red team's bad values: a --meta value past any meta-parameter's range was an
``OverflowError`` traceback from the access model; a --swizzle-file that is a named pipe hung
``simulate`` for ever; ``hw`` printed its lines as one quoted Python literal; and a --hw naming no
spec was refused only after the work it should have stopped (the simulation, the app's capture, an
eval's rows). Each is one line now, before anything runs; the lines of ``hw`` are lines again."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rich.console import Console
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent import cli
from swizzleperf.agent.verification import simulate
from swizzleperf.agent.verification.simulate import SimulateError, parse_meta
from swizzleperf.hwspecs import UnknownHardwareError

META_MAX = 2 ** 31 - 1   # a meta-parameter's largest value: Triton's int32 sizes and program ids
ROW_MAJOR = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    return pid // num_pid_n, pid % num_pid_n
'''


# ------------------------------------------------------------------------------------ --meta
def test_meta_values_every_bundled_kernel_takes_are_parsed():
    """Tile sizes, warps and stages from 1, flags and counts that are off at 0 (STREAM_K,
    EPILOGUE_SUBTILE, TAIL_BLOCK_N, BLOCK_M_LOW, FLATTEN), up to the bound."""
    text = ("BLOCK_M=128, BLOCK_N=256,BLOCK_K=64,BLOCK=1024,num_warps=8,num_stages=0,STREAM_K=0,"
            f"EPILOGUE_SUBTILE=1,TAIL_BLOCK_N=0,BLOCK_M_LOW=0,FLATTEN=0,COMM_SMS={META_MAX}")
    assert parse_meta(text) == {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "BLOCK": 1024, "num_warps": 8,
                                "num_stages": 0, "STREAM_K": 0, "EPILOGUE_SUBTILE": 1, "TAIL_BLOCK_N": 0,
                                "BLOCK_M_LOW": 0, "FLATTEN": 0, "COMM_SMS": META_MAX}
    assert parse_meta(None) == {} and parse_meta("") == {}


@pytest.mark.parametrize("text, expected", [
    ("BLOCK_M=99999999999999999999999", f"BLOCK_M must be an integer from 1 to {META_MAX}"),
    ("BLOCK_M=" + "9" * 5000, f"BLOCK_M must be an integer from 1 to {META_MAX}"),   # past int()'s digit limit
    ("BLOCK_M=0", f"BLOCK_M must be an integer from 1 to {META_MAX}"),
    ("BLOCK_N=-64", f"BLOCK_N must be an integer from 1 to {META_MAX}"),
    ("num_warps=0", f"num_warps must be an integer from 1 to {META_MAX}"),
    ("STREAM_K=-1", f"STREAM_K must be an integer from 0 to {META_MAX}"),
    (f"COMM_SMS={META_MAX + 1}", f"COMM_SMS must be an integer from 0 to {META_MAX}"),
    ("BLOCK_M=\u00b2", "NAME=INTEGER"),                 # isdigit(), yet int() refuses it
    ("BLOCK_M=1_024", "NAME=INTEGER"),
    ("BLOCK M=64", "NAME=INTEGER"),                      # not a keyword a launch could take
    ("BLOCK_M", "NAME=INTEGER"),
], ids=["23 digits", "5000 digits", "a zero tile", "a negative tile", "no warps", "a negative flag",
        "past int32", "a superscript digit", "an underscore", "a name with a space", "no value"])
def test_a_meta_value_out_of_range_is_one_line_naming_key_and_bound(text, expected):
    with pytest.raises(SimulateError) as caught:
        parse_meta(text)
    message = str(caught.value)
    assert expected in message and "\n" not in message and len(message) < 400, message


@pytest.mark.parametrize("command", ["simulate", "analyze"])
def test_a_huge_meta_value_is_one_line_before_any_work(tmp_path, gemm_path, command):
    proc = swizzleperf(command, str(gemm_path), "--meta", "BLOCK_M=99999999999999999999999", cwd=tmp_path,
                       timeout=120)
    assert_one_line_error(proc, f"--meta BLOCK_M must be an integer from 1 to {META_MAX}")


@pytest.mark.parametrize("error", [OverflowError("Python int too large to convert to C long"),
                                   MemoryError("Unable to allocate 17.0 TiB"), ZeroDivisionError("division by zero")])
def test_an_access_model_that_cannot_be_built_is_one_line(error):
    """What the bounds do not catch (a kernel's own model overflowing, a trace too large to hold)
    is a SimulateError naming the kernel, never a traceback."""
    def trace(problem, meta):
        raise error
    spec = SimpleNamespace(name="gemm", trace=trace, problems={"default": {"M": 1}}, meta_for=lambda name: {"BLOCK_M": 1})
    with pytest.raises(SimulateError, match=f"the access model of gemm cannot be built .*{type(error).__name__}"):
        simulate.kernel_trace("kernels/gemm.py", spec, {"BLOCK_M": 1}, traced=False)


# ----------------------------------------------------------------------------- --swizzle-file
def test_a_swizzle_file_that_is_a_named_pipe_is_one_line_not_a_hang(tmp_path, gemm_path):
    os.mkfifo(tmp_path / "fifo.py")
    try:
        proc = swizzleperf("simulate", str(gemm_path), "--swizzle-file", "fifo.py", cwd=tmp_path, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("simulate --swizzle-file FIFO hung (no writer ever opens the pipe)")
    assert_one_line_error(proc, "the swizzle file (fifo.py) is not a regular file")


@pytest.mark.parametrize("make, expected", [
    (lambda d: d, "is not a regular file"),
    (lambda d: "/dev/null", "is not a regular file"),
    (lambda d: _sparse(d / "huge.py", 3 << 20), "is longer than the"),
    (lambda d: _bytes(d / "binary.py", bytes(range(256)) * 8), "cannot be read as Python source"),
    (lambda d: d / "missing.py", "No such file"),
], ids=["a folder", "a device", "a 3 MiB file", "a binary file", "a missing file"])
def test_a_swizzle_file_that_is_no_source_is_one_line(tmp_path, gemm_path, make, expected):
    proc = swizzleperf("simulate", str(gemm_path), "--swizzle-file", str(make(tmp_path)), cwd=tmp_path,
                       timeout=120)
    assert_one_line_error(proc, expected)


def _sparse(path, size: int):
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def _bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def test_simulate_prints_the_swizzle_files_name_as_text(tmp_path, gemm_path):
    """The summary line names the order by its file: an escape code in that name is spelled out;
    the simulator's model stays a line of its own."""
    name = "row\x1b[2J.py"
    (tmp_path / name).write_text(ROW_MAJOR)
    proc = swizzleperf("simulate", str(gemm_path), "--swizzle-file", name, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and ascii(name) in proc.stdout
    assert len(proc.stdout.splitlines()) >= 2 and "L2 hit rate" in proc.stdout.splitlines()[0]


# ---------------------------------------------------------------------------------------- hw
@pytest.mark.parametrize("args, spec", [((), "mi300x"), (("--hw", "h100"), "h100")])
def test_hw_prints_lines_not_a_quoted_literal(tmp_path, args, spec):
    proc = swizzleperf("hw", *args, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "\\n" not in proc.stdout and not proc.stdout.startswith("'"), proc.stdout
    assert lines[0].startswith("device: ") and lines[1].startswith(f"spec:   {spec} = ")
    assert any(line.startswith("mode:   ") for line in lines) and len(lines) == 5


def test_hw_still_spells_out_an_unprintable_character_in_a_line(monkeypatch):
    """Each line of the description is shown as the rest of the CLI shows outside text: a device
    name from the driver holding an escape code or markup is written out, never run or styled."""
    from swizzleperf import hwspecs
    buffer = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=buffer, width=400, highlight=False, color_system=None))
    monkeypatch.setattr(hwspecs, "resolve_target", lambda hw: SimpleNamespace())
    monkeypatch.setattr(hwspecs, "describe",
                        lambda target: "device: evil\x1b[2J [bold]x[/bold]\nspec:   [red]mi300x[/red]")
    cli.hw_command(hw=None, probe=False, workdir=".swizzleperf")
    assert buffer.getvalue() == f"{ascii('device: evil' + chr(27) + '[2J [bold]x[/bold]')}\nspec:   [red]mi300x[/red]\n"


# ---------------------------------------------------------------------- --hw before any work
@pytest.mark.parametrize("function", [simulate.simulate_kernel, simulate.analyze_kernel])
def test_an_unknown_hw_is_refused_before_the_kernel_is_run(monkeypatch, gemm_path, function):
    def started(*args, **kwargs):
        raise AssertionError("a worker was started before --hw was checked")
    monkeypatch.setattr(simulate, "run_worker", started)
    with pytest.raises(UnknownHardwareError, match="unknown hardware 'nope'"):
        function(gemm_path, "nope")


def test_a_probe_of_another_gpu_is_refused_before_the_kernel_is_run(monkeypatch, tmp_path, gemm_path):
    """A stored probe of 2 L2 partitions against mi300x's 8 was refused after the trace was made."""
    import json
    probe = {"device": "NVIDIA test", "num_sms": 4,
             "placement": {"1": {"sm_of_program": [0, 1, 2, 3],
                                 "summary": {"first_programs_sm": [0, 1, 2, 3], "first_wave_programs": 4,
                                             "distinct_sms": 4, "neighbours_on_same_sm": 0.0}}},
             "partitions": {"partition_of_sm": [0, 0, 1, 1], "references_agree": True,
                            "cycles_after_reference": {"0": [290, 290, 376, 376]},
                            "cycles_cold": [690] * 4, "cycles_self_warm": [290] * 4}}
    (tmp_path / "probe.json").write_text(json.dumps(probe))

    def started(*args, **kwargs):
        raise AssertionError("a worker was started before the probe was checked against --hw")
    monkeypatch.setattr(simulate, "run_worker", started)
    for function in (simulate.simulate_kernel, simulate.analyze_kernel):
        with pytest.raises(SimulateError, match="the probe found 2 L2 partitions, the spec mi300x has 8"):
            function(gemm_path, "mi300x", probe=tmp_path / "probe.json")


def test_optimize_app_with_an_unknown_hw_runs_no_app(tmp_path):
    marker = tmp_path / "the_app_ran"
    app = f"{sys.executable} -c \"open({str(marker)!r}, 'w')\""
    proc = swizzleperf("optimize", "--app", app, "--kernel", "matmul_kernel", "--hw", "nope", cwd=tmp_path,
                       timeout=300)
    assert_one_line_error(proc, "unknown hardware 'nope'")
    assert not marker.exists() and not (tmp_path / ".swizzleperf").exists()


def test_eval_apps_with_an_unknown_hw_runs_no_row(tmp_path):
    marker = tmp_path / "the_app_ran"
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "app.py").write_text(f"open({str(marker)!r}, 'w')\n")
    proc = swizzleperf("eval", "--apps", "apps", "--hw", "nope", "--workdir", "ws", cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "unknown hardware 'nope'")
    assert not marker.exists() and not (tmp_path / "ws").exists()
