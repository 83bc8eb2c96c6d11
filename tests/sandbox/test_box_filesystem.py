"""The box's file system (sandbox/__init__.py, sandbox/filesystem.py, issue #41): a command in it
writes only beneath its writable folders, by read-only mounts in its mount namespace or, where
those are not permitted, by Landlock; where neither works, model-written code is refused unless
the user allows it.

Each test gives the box a private HOME, run folder, record, kernel file and scratch under
``tmp_path``; the command in the box tries to write into each (what a candidate that got past the
static check would try: rows into the simulation cache the agent loads, its own kernel file, the
run's record), and reports what happened on stdout."""
import errno
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from swizzleperf import sandbox
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, _outputs_into, run_worker, verify

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box's file system is Linux's")

#: The command in the box: try each write of the JSON list in argv[1], print what became of it.
ATTEMPT = r'''
import json, os, sqlite3, sys
def attempt(kind, path):
    try:
        if kind == "write":
            with open(path, "a") as f:
                f.write("written from the box\n")
        elif kind == "mkdir":
            os.makedirs(path)
        elif kind == "unlink":
            os.unlink(path)
        elif kind == "rename":
            os.rename(path, path + ".moved")
        elif kind == "sqlite":
            with sqlite3.connect(path) as db:
                db.execute("INSERT INTO runs VALUES ('from the box')")
        return "ok"
    except OSError as exc:
        return errno_name(exc.errno)
    except sqlite3.Error as exc:
        return "sqlite: " + str(exc)
def errno_name(n):
    import errno
    return errno.errorcode.get(n, str(n))
print(json.dumps([attempt(kind, path) for kind, path in json.loads(sys.argv[1])]))
'''

DENIED = {"EROFS", "EACCES", "EPERM"}


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A private user: HOME with a simulation cache, a workdir with a run folder and its sqlite
    record, a kernel file; and the worker's scratch."""
    home = tmp_path / "home"
    cache = home / ".cache" / "swizzleperf" / "simulations"
    cache.mkdir(parents=True)
    (cache / "row.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    workdir = tmp_path / "project" / ".swizzleperf"
    run = workdir / "runs" / "r1"
    run.mkdir(parents=True)
    record = workdir / "swizzleperf.db"
    with sqlite3.connect(record) as db:
        db.execute("CREATE TABLE runs (id TEXT)")
    kernel = tmp_path / "project" / "my_kernel.py"
    kernel.write_text("# the user's kernel\n")
    scratch = tmp_path / "scratch"
    (scratch / "cwd").mkdir(parents=True)
    return {"home": home, "cache": cache, "run": run, "record": record, "kernel": kernel, "scratch": scratch}


def _in_box(user: dict, attempts: list) -> list:
    scratch = user["scratch"]
    done = sandbox.run([sys.executable, "-c", ATTEMPT, json.dumps([[k, str(p)] for k, p in attempts])],
                       scratch / "cwd", sandbox.worker_env(TMPDIR=str(scratch / "cwd")), 120,
                       sandbox.worker_limits(120, interpret=True, writable=(scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_command_in_the_box_writes_only_into_its_scratch(user, how):
    kernel_text = user["kernel"].read_text()
    outside_tmp = Path("/tmp") / f"swizzleperf-box-test-{os.getpid()}-{how}"
    attempts = [("write", user["home"] / ".bashrc"),                       # (a) HOME
                ("mkdir", user["home"] / ".config" / "x"),
                ("write", user["cache"] / "poisoned.json"),                # (b) the simulation cache
                ("unlink", user["cache"] / "row.json"),
                ("write", user["run"] / "report.json"),                    # (c) the run folder
                ("sqlite", user["record"]),                                # (d) the record
                ("write", user["kernel"]),                                 # (e) the kernel file
                ("rename", user["kernel"]),
                ("write", outside_tmp),                                    # (f) /tmp outside the scratch
                ("write", user["scratch"] / "cwd" / "allowed.txt"),        # its own scratch
                ("mkdir", user["scratch"] / "deeper" / "still"),
                ("write", "/dev/null")]                                    # a device node
    try:
        seen = _in_box(user, attempts)
    finally:
        outside_tmp.unlink(missing_ok=True)
    *denied, scratch_file, scratch_dir, dev_null = seen
    for (kind, path), what in zip(attempts, denied):
        if kind == "sqlite":
            assert what.startswith("sqlite: ") and ("readonly" in what or "unable to open" in what), what
        else:
            assert what in DENIED, f"{kind} {path}: {what}"
    assert [scratch_file, scratch_dir, dev_null] == ["ok", "ok", "ok"]
    assert user["kernel"].read_text() == kernel_text and (user["cache"] / "row.json").exists()
    assert not (user["cache"] / "poisoned.json").exists() and not list(user["run"].iterdir())
    with sqlite3.connect(user["record"]) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)


@pytest.mark.skipif(not os.path.exists("/dev/kmsg"), reason="no /dev/kmsg here")
def test_the_kernels_log_is_out_of_the_boxs_reach(user, how):
    """Round nine of #41: a command in the box wrote a line into the kernel's log through
    /dev/kmsg. In a mount namespace /dev/null covers it; under Landlock it is not writable."""
    code = ("import json, os\n"
            "try:\n    fd = os.open('/dev/kmsg', os.O_WRONLY); os.close(fd); opened = 'ok'\n"
            "except OSError as exc:\n    opened = exc.errno\n"
            "print(json.dumps([opened, os.stat('/dev/kmsg').st_rdev == os.stat('/dev/null').st_rdev]))")
    done = sandbox.run([sys.executable, "-c", code], user["scratch"] / "cwd", sandbox.worker_env(), 60,
                       sandbox.worker_limits(60, interpret=True, writable=(user["scratch"],)))
    assert done.returncode == 0, done.stderr[-2000:]
    opened, covered = json.loads(done.stdout.strip().splitlines()[-1])
    assert covered or opened != "ok", (opened, covered)


def test_the_error_says_read_only_or_permission_denied(user, how):
    (what,) = _in_box(user, [("write", user["kernel"])])
    assert what == ("EROFS" if how == "mounts" else "EACCES")


def test_caches_of_triton_cuda_and_torch_go_into_the_scratch(user, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(user["home"] / ".triton" / "cache"))   # the user's: not used
    names = ("TRITON_CACHE_DIR", "TRITON_HOME", "CUDA_CACHE_PATH", "XDG_CACHE_HOME")
    code = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
    done = sandbox.run([sys.executable, "-c", code], user["scratch"] / "cwd", sandbox.worker_env(), 60,
                       sandbox.worker_limits(60, interpret=True, writable=(user["scratch"],)))
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    scratch = os.path.realpath(user["scratch"])
    assert all(v.startswith(scratch + os.sep) for v in seen.values()), seen


# -- where neither way works: refused, unless the user allows it ----------------------------------

@pytest.fixture
def nowhere(monkeypatch):
    """A machine with neither read-only mounts nor Landlock, as far as the box can tell."""
    monkeypatch.setattr(sandbox, "filesystem_isolation", lambda: ("none", "forced by the test"))
    monkeypatch.setattr(sandbox, "_landlock", lambda: (False, "forced by the test"))
    monkeypatch.setattr(sandbox._filesystem_for, "said", False)
    monkeypatch.delenv(sandbox.ALLOW_UNBOXED_ENV, raising=False)


def test_without_a_read_only_box_model_written_code_is_refused_in_one_line(user, nowhere):
    refusal = sandbox.write_refusal()
    assert "refused" in refusal and "--allow-unboxed-writes" in refusal and "forced by the test" in refusal
    assert "\n" not in refusal
    with pytest.raises(sandbox.Unboxed):
        _in_box(user, [("write", user["kernel"])])
    result = run_worker({"kernel_path": str(user["kernel"]), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.CRASH and result.reason == refusal


def test_allowed_by_the_user_it_runs_and_says_so_once(user, nowhere, caplog):
    sandbox.allow_unboxed_writes()
    assert os.environ[sandbox.ALLOW_UNBOXED_ENV] == "1" and sandbox.write_refusal() == ""
    with caplog.at_level(logging.WARNING, logger="swizzleperf.sandbox"):
        assert _in_box(user, [("write", user["scratch"] / "a")]) == ["ok"]
        assert _in_box(user, [("write", user["scratch"] / "b")]) == ["ok"]
    lines = [r.getMessage() for r in caplog.records if "can write wherever" in r.getMessage()]
    assert len(lines) == 1 and sandbox.ALLOW_UNBOXED_ENV in lines[0]


def test_without_writable_paths_the_file_system_is_as_it_is(user):
    """``writable=None``: the user's own ``--app`` command (never model-written code)."""
    code = f"open({str(user['run'] / 'app.txt')!r}, 'w').write('1')"
    done = sandbox.run([sys.executable, "-c", code], user["scratch"], sandbox.worker_env(), 60,
                       sandbox.Limits(writable=None))
    assert done.returncode == 0 and (user["run"] / "app.txt").read_text() == "1"


# -- a verification worker on a read-only file system ---------------------------------------------

def test_a_verification_worker_passes_and_its_mapping_reaches_the_run_folder(user, how, gemm_path):
    mapping = user["run"] / "candidates" / "c1.map.npy"
    mapping.parent.mkdir()
    result = verify(gemm_path, mapping, VerifyConfig(seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    import numpy as np
    assert sorted(np.load(mapping).tolist()) == list(range(128 * 64))


def test_a_worker_whose_code_writes_outside_fails_with_the_denied_write(user, how, gemm_source, tmp_path):
    poisoned = user["cache"] / "poisoned.json"
    module = tmp_path / "escaping_kernel.py"
    module.write_text(gemm_source + f"\nopen({str(poisoned)!r}, 'w').write('a row the agent would load')\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"], "problems": ["check"]},
                        120, interpret=True)
    assert result.verdict in (Verdict.COMPILE_ERROR, Verdict.CRASH), result
    assert ("Read-only file system" if how == "mounts" else "Permission denied") in result.reason
    assert str(poisoned) in result.reason and not poisoned.exists()


def test_the_files_a_worker_writes_are_moved_into_its_folder(tmp_path):
    request = {"kernel_path": "k.py", "mapping_path": str(tmp_path / "run" / "order"),
               "items": [{"kernel_path": "a.py", "mapping_path": str(tmp_path / "a.map.npy")}, {"kernel_path": "b.py"}]}
    boxed, outputs = _outputs_into(request, tmp_path / "worker")
    assert boxed["mapping_path"] == str(tmp_path / "worker" / "mapping0.npy")
    assert boxed["items"][0]["mapping_path"] == str(tmp_path / "worker" / "mapping1.npy")
    assert "mapping_path" not in boxed["items"][1]
    assert [wanted for _, wanted in outputs] == [tmp_path / "run" / "order.npy", tmp_path / "a.map.npy"]


def test_mount_points_with_spaces_are_read_back_from_mountinfo():
    from swizzleperf.sandbox.filesystem import _unescape
    assert _unescape(r"/mnt/my\040disk\134x") == "/mnt/my disk\\x"


def test_optimize_refuses_in_one_line_without_the_flag(nowhere, gemm_path, tmp_path):
    from typer.testing import CliRunner
    from swizzleperf.agent.cli import app
    result = CliRunner().invoke(app, ["optimize", str(gemm_path), "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "refused to run model-written code" in result.output and "--allow-unboxed-writes" in result.output
    assert not (tmp_path / "w").exists()


PROC_WRITES = """
import json, os, threading
out = {}
def name_thread():
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write("cuda-like")
        out["comm"] = "written"
    except OSError as exc:
        out["comm"] = exc.errno
t = threading.Thread(target=name_thread); t.start(); t.join()
for path in ("/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "written"
    except OSError as exc:
        out[path] = exc.errno
print(json.dumps(out))
"""


def test_the_boxs_own_proc_stays_writable_the_kernels_settings_do_not(user, monkeypatch):
    """CUDA names its threads through /proc/self/task/TID/comm: with /proc read-only cuInit failed
    with error 304 on an H100 (bench/gpu_box_probe.sh); the box's fresh /proc is its own processes
    only, and its sys and sysrq-trigger stay read-only."""
    if sandbox.filesystem_isolation()[0] != "mounts":
        pytest.skip("no read-only mounts here")
    done = sandbox.run([sys.executable, "-c", PROC_WRITES], user["scratch"], sandbox.worker_env(), 60,
                       sandbox.worker_limits(60, True, (user["scratch"],)))
    seen = json.loads(done.stdout)
    assert seen["comm"] == "written", done.stderr
    assert seen["/proc/sys/kernel/hostname"] in (errno.EROFS, errno.EACCES, errno.EPERM)
    assert seen["/proc/sysrq-trigger"] in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT)


NAME_THREADS = """
import json, os, sys, threading
seen = {}
def name(path, text):
    try:
        with open(path, "w") as handle:
            handle.write(text)
        return "written"
    except OSError as exc:
        return exc.strerror
seen["own"] = name("/proc/self/comm", "boxed")
seen["thread"] = name(f"/proc/self/task/{threading.get_native_id()}/comm", "boxed-thread")
seen["agent"] = name(f"/proc/{sys.argv[1]}/comm", "pwned") if os.path.exists(f"/proc/{sys.argv[1]}") else "not visible"
print(json.dumps(seen))
"""


def test_the_box_names_its_own_threads_and_no_one_elses(user, how):
    """CUDA names its threads (/proc/self/task/TID/comm); read-only there, cuInit failed with error
    304 (an H100, 2026-12-06). The box's own entries stay writable; the agent's never."""
    before = Path(f"/proc/{os.getpid()}/comm").read_text()
    scratch = user["scratch"]
    done = sandbox.run([sys.executable, "-c", NAME_THREADS, str(os.getpid())], scratch / "cwd",
                       sandbox.worker_env(TMPDIR=str(scratch / "cwd")), 120,
                       sandbox.worker_limits(120, interpret=True, writable=(scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["own"] == "written" and seen["thread"] == "written", seen
    assert seen["agent"] != "written" and Path(f"/proc/{os.getpid()}/comm").read_text() == before
