"""The box against what round twelve of #41 got through: a worker that cleared its ``PDEATHSIG`` and
left the init's process group with ``setsid()`` outlived its timeout, the agent's clean-up and the
run (B03); the same worker, keeping its stdout open, held the agent in ``communicate()`` for as long
as it slept (B02); what a worker printed was buffered in the agent without a bound (B04); a worker's
scratch took any number of files (B06); and the user's ``--app`` could write the agent's own code,
its interpreter's packages, its caches and its record, which the agent imports and reads after the
app has ended (A09).

Hermetic: every box writes only beneath ``tmp_path``; the agents run as subprocesses with a private
HOME; the app's targets are private stand-ins of the agent's folders; every process a test starts is
found by a token of its own on its command line and, where one outlived what it should not, ended by
its pid."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from swizzleperf import sandbox
from swizzleperf.sandbox import gpu_lock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")
needs_namespaces = pytest.mark.skipif(not sandbox.isolation()[0], reason="no PID namespace permitted here")


def _token() -> str:
    return f"rt12-{uuid.uuid4().hex}"


def _survivors(token: str) -> list:
    """The pids of live (not zombie) processes whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if token.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def _settled(token: str, seconds: float = 3.0) -> list:
    """``_survivors`` once none is left, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = _survivors(token)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _end(token: str) -> None:
    """Ends what the test started and what outlived its box (by pid, found by its token)."""
    for pid in _survivors(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


#: PID 1 of the box, or a child of it (``fork``): clears its PDEATHSIG, leaves the init's process group
#: and session, keeps ("hold") or closes ("close") the agent's pipes, says so in a file of ``signals``
#: (argv 4, where given), then sleeps argv 2 seconds. Argv 3: the test's token.
OUTLIVE = textwrap.dedent(r'''
    import ctypes, os, sys, time
    mode, seconds, token = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    signals = sys.argv[4] if len(sys.argv) > 4 else None
    libc = ctypes.CDLL(None, use_errno=True)
    if mode.startswith("fork"):
        if os.fork():
            time.sleep(seconds)
            raise SystemExit
    cleared = libc.prctl(1, 0, 0, 0, 0)                 # PR_SET_PDEATHSIG 0
    try:
        os.setsid()
        left = "left"
    except OSError as exc:
        left = f"setsid: {exc.strerror}"
    if mode.endswith("close"):
        fd = os.open("/dev/null", os.O_RDWR)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    if signals:
        with open(os.path.join(signals, "started"), "w") as handle:
            handle.write(f"{cleared} {left}")
    time.sleep(seconds)
''')


def _scratch(tmp_path: Path, name: str = "scratch") -> Path:
    scratch = tmp_path / name
    (scratch / "cwd").mkdir(parents=True)
    return scratch


def _skip_without(namespace: bool) -> None:
    """Skip where the box of that kind cannot be made: a PID namespace, or (without one) Landlock."""
    if namespace and not sandbox.isolation()[0]:
        pytest.skip("no PID namespace permitted here")
    if not namespace and not sandbox._landlock()[0]:
        pytest.skip("no Landlock here")


def _outlive(tmp_path: Path, mode: str, limits_of, timeout_s: float, token: str, seconds: float = 60) -> float:
    """Runs OUTLIVE boxed with ``limits_of(scratch)``; returns the seconds ``sandbox.run`` took
    (it must raise TimeoutExpired)."""
    scratch = _scratch(tmp_path)
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        sandbox.run([sys.executable, "-c", OUTLIVE, mode, str(seconds), token], scratch / "cwd",
                    sandbox.worker_env(TMPDIR=str(scratch / "cwd")), timeout_s, limits_of(scratch))
    return time.monotonic() - start


# -- B03: a worker that leaves its group outlives its timeout ---------------------------------------

@needs_namespaces
def test_a_worker_that_leaves_its_group_dies_at_its_timeout(tmp_path, how):
    """PID 1 of the box cleared its PDEATHSIG and called setsid(): the agent killed the init's group
    only, and the worker lived on (ppid 1, its own session). The init now kills PID 1 of its
    namespace, so every process of the box dies with it."""
    token = _token()
    try:
        _outlive(tmp_path, "close", lambda s: sandbox.worker_limits(2, True, (s,)), 2, token)
        assert _settled(token) == [], "a process of the box outlived its timeout"
    finally:
        _end(token)


def test_without_a_pid_namespace_a_process_that_leaves_its_group_dies_too(tmp_path):
    """Where the box has no PID namespace (Landlock alone), a child that left the group with setsid()
    (its PDEATHSIG is not inherited) is still a descendant of the init: it is found and killed."""
    works, why = sandbox._landlock()
    if not works:
        pytest.skip(f"no Landlock here: {why}")
    token = _token()
    try:
        _outlive(tmp_path, "fork-close",
                 lambda s: dataclasses.replace(sandbox.worker_limits(2, True, (s,)), isolate_processes=False), 2, token)
        assert _settled(token) == [], "a process of the box outlived its timeout"
    finally:
        _end(token)


# -- B02: the same worker, holding its pipes, holds the agent ---------------------------------------

@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "no-pid-namespace"])
def test_a_worker_that_holds_its_pipes_does_not_hold_the_agent(tmp_path, namespace):
    _skip_without(namespace)
    token = _token()

    def limits(scratch):
        return dataclasses.replace(sandbox.worker_limits(2, True, (scratch,)), isolate_processes=namespace)
    try:   # PID 1 itself where there is a namespace; without one a child (the command leads its session)
        took = _outlive(tmp_path, "hold" if namespace else "fork-hold", limits, 2, token, seconds=40)
        assert took < 15, f"the agent was held {took:.1f} s past a 2 s timeout"
    finally:
        _end(token)


# -- B03: ... and the agent killed outright -------------------------------------------------------

#: The agent: runs OUTLIVE ("close", or "fork-close" without a PID namespace) in a worker's box that may also write SIGNALS; killed by the test.
KILLED_AGENT = textwrap.dedent(r'''
    import dataclasses, os, sys
    from pathlib import Path
    from swizzleperf import sandbox
    scratch, signals, token, pid = Path(sys.argv[1]), sys.argv[2], os.environ["RT12_TOKEN"], sys.argv[3] == "pid"
    (scratch / "cwd").mkdir(parents=True)
    limits = sandbox.worker_limits(60, True, (scratch, signals))
    limits = dataclasses.replace(limits, isolate_processes=pid)
    sandbox.run([sys.executable, "-c", sys.argv[4], "close" if pid else "fork-close", "60", token, signals], scratch / "cwd",
                sandbox.worker_env(TMPDIR=str(scratch / "cwd")), 60, limits)
''')


@pytest.mark.parametrize("namespace", [True, False], ids=["pid-namespace", "no-pid-namespace"])
def test_a_worker_dies_with_an_agent_killed_outright(tmp_path, namespace):
    _skip_without(namespace)
    token, signals = _token(), tmp_path / "signals"
    signals.mkdir()
    (tmp_path / "home").mkdir()
    agent = subprocess.Popen([sys.executable, "-c", KILLED_AGENT, str(tmp_path / "scratch"), str(signals),
                              "pid" if namespace else "none", OUTLIVE],
                             env=dict(os.environ, HOME=str(tmp_path / "home"), RT12_TOKEN=token),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (signals / "started").exists():
            assert agent.poll() is None, agent.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        assert (signals / "started").read_text() == "0 left"   # it cleared PDEATHSIG and left its group
        agent.kill()
        agent.wait(10)
        assert _settled(token, 5) == [], "a process of the box outlived the agent"
    finally:
        agent.kill()
        agent.wait(10)
        _end(token)


# -- B04: what a worker prints is buffered without bound ---------------------------------------------

FLOOD = textwrap.dedent(r'''
    import os, sys
    mib = int(sys.argv[1])
    os.write(1, b"FIRST\n")
    block = b"A" * (1 << 20)
    for _ in range(mib):
        os.write(1, block)
        os.write(2, block)
    os.write(1, b"\nLAST\n")
    os.write(2, b"\nLAST ERR\n")
''')


def _capped(text: str) -> None:
    cap = getattr(sandbox, "OUTPUT_HEAD_BYTES", 1 << 20) + getattr(sandbox, "OUTPUT_TAIL_BYTES", 1 << 20)
    assert len(text) <= cap + 1000, f"{len(text)} characters kept of a flood"
    assert "output cut at" in text


def test_what_a_worker_prints_is_kept_within_a_bound(tmp_path):
    scratch = _scratch(tmp_path)
    done = sandbox.run([sys.executable, "-c", FLOOD, "24"], scratch / "cwd", sandbox.worker_env(), 120,
                       sandbox.worker_limits(120, True, (scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    _capped(done.stdout)
    _capped(done.stderr)
    assert done.stdout.startswith("FIRST\n") and done.stdout.endswith("\nLAST\n")
    assert done.stderr.endswith("\nLAST ERR\n")


def test_a_short_output_is_kept_whole(tmp_path):
    scratch = _scratch(tmp_path)
    done = sandbox.run([sys.executable, "-c", "import sys; print('out\\r\\nline'); print('err', file=sys.stderr)"],
                       scratch / "cwd", sandbox.worker_env(), 60, sandbox.worker_limits(60, True, (scratch,)))
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\nline\n", "err\n")


def test_what_a_gpu_worker_prints_is_kept_within_a_bound_and_its_ask_still_heard(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_lock.GPU_LOCK_ENV, str(tmp_path / "locks"))
    code = (f"ASK = {sandbox.GPU_TURN_ASK!r}\n" + FLOOD.replace('os.write(1, b"\\nLAST\\n")', "")
            + "\nimport sys\nprint(flush=True)\nprint(ASK, flush=True)\nsys.stdin.readline()\nprint('timed')\n")
    scratch = _scratch(tmp_path)
    done = sandbox.run_gpu_turn([sys.executable, "-c", code, "24"], scratch / "cwd", sandbox.worker_env(), 120,
                                sandbox.worker_limits(120, True, (scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    _capped(done.stdout)
    _capped(done.stderr)
    assert done.stdout.endswith("timed\n") and sandbox.GPU_TURN_ASK not in done.stdout


def test_a_gpu_worker_printing_one_endless_line_is_kept_within_a_bound(tmp_path):
    code = "import os\nfor _ in range(24):\n    os.write(1, b'B' * (1 << 20))\n"
    scratch = _scratch(tmp_path)
    done = sandbox.run_gpu_turn([sys.executable, "-c", code], scratch / "cwd", sandbox.worker_env(), 120,
                                sandbox.worker_limits(120, True, (scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    _capped(done.stdout)


# -- B06: no bound on a worker's files ---------------------------------------------------------------

MANY_FILES = textwrap.dedent(r'''
    import errno, json, os, sys
    os.chdir(sys.argv[3])   # by its path: the folder the box mounted there
    made, err = 0, None
    try:
        for i in range(int(sys.argv[1])):
            open(f"f{i}", "w").close()
            made += 1
    except OSError as exc:
        err = errno.errorcode.get(exc.errno, "?")
    for i in range(made):
        os.remove(f"f{i}")
    big = None
    try:
        with open("big", "wb") as handle:
            for _ in range(int(sys.argv[2])):
                handle.write(b"x" * (1 << 20))
    except OSError as exc:
        big = errno.errorcode.get(exc.errno, "?")
    os.remove("big")
    with open("../result.json", "w") as handle:
        handle.write("returned")
    os.makedirs("../deep/er", exist_ok=True)
    open("../deep/er/left", "w").close()
    s = os.statvfs(".")
    print(json.dumps({"made": made, "error": err, "big": big, "inodes": s.f_files,
                      "bytes": s.f_blocks * s.f_frsize, "request": open("../request.json").read()}))
''')


def test_a_workers_scratch_holds_a_bounded_number_and_size_of_files(tmp_path, monkeypatch):
    """The mounts box gives a worker's scratch a tmpfs of its own, bounded in bytes and files; what
    the worker leaves at the top of its scratch (its result, its mappings) reaches the agent."""
    if sandbox.filesystem_isolation()[0] != "mounts":
        pytest.skip(f"no mount namespace here: {sandbox.filesystem_isolation()[1]}")
    monkeypatch.setattr(sandbox, "WORKER_SCRATCH_FILES", 300, raising=False)
    monkeypatch.setattr(sandbox, "WORKER_SCRATCH_BYTES", 8 << 20, raising=False)
    scratch = _scratch(tmp_path)
    (scratch / "request.json").write_text("the agent's request")
    done = sandbox.run([sys.executable, "-c", MANY_FILES, "1000", "16", str(scratch / "cwd")], scratch / "cwd", sandbox.worker_env(), 120,
                       sandbox.worker_limits(120, True, (scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["made"] < 300 and seen["error"] == "ENOSPC", seen
    assert seen["big"] == "ENOSPC" and seen["bytes"] == 8 << 20 and seen["inodes"] == 300, seen
    assert seen["request"] == "the agent's request"     # what the agent put there, the worker reads
    assert (scratch / "result.json").read_text() == "returned"   # what it leaves at the top, the agent reads
    assert not (scratch / "deep" / "er" / "left").exists()       # the rest ended with the box


def test_the_clean_up_of_a_workers_folder_is_bounded_in_time(tmp_path):
    top = tmp_path / "left"
    for i in range(200):
        folder = top / f"d{i}"
        folder.mkdir(parents=True)
        for j in range(50):
            (folder / f"f{j}").touch()
        folder.chmod(0)
    start = time.monotonic()
    sandbox.removable((str(top),), seconds=0.01)
    assert time.monotonic() - start < 1.0


# -- A09: the app writes the agent's own files --------------------------------------------------------

#: The app: appends to each file it is given (argv: a JSON list of paths) and reports, in the file
#: named first, what each open gave; then, with "move", moves the folder argv[3] names aside and
#: makes a new one in its place.
APPENDS = textwrap.dedent(r'''
    import errno, json, os, sys
    report, targets = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    for path in targets:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a") as handle:
                handle.write("planted = True\n")
            out[path] = "written"
        except OSError as exc:
            out[path] = errno.errorcode.get(exc.errno, "?")
    if len(sys.argv) > 3:
        moved = sys.argv[3]
        try:
            os.rename(moved, moved + ".old")
            os.makedirs(os.path.join(moved, "site"))
            out["moved"] = "moved"
        except OSError as exc:
            out["moved"] = errno.errorcode.get(exc.errno, "?")
    with open(report, "w") as handle:
        handle.write(json.dumps(out))
''')

#: The agent: capture's runner of the app, with its own folders (the package, the interpreter's prefix
#: and site-packages) replaced by the test's stand-ins; the workdir is the capture folder's grandparent,
#: as ``WORKDIR/captures/.capture-*`` (optimize --app) and ``WORKDIR/profiles/app-*`` (profile) are.
APP_AGENT = textwrap.dedent(r'''
    import json, sys
    from pathlib import Path
    from swizzleperf.agent.capture import capture
    root, command = Path(sys.argv[1]), sys.argv[2]
    capture._package_folders = lambda: [str(root / "package")]
    capture._interpreter_folders = lambda: [str(root / "prefix"), str(root / "lib" / "site")]
    work = root / "wd" / "captures" / ".capture-test"
    work.mkdir(parents=True)
    try:
        capture.run_app(command, {}, work, 120, root / "app")
        print(json.dumps({"error": None}))
    except capture.CaptureError as exc:
        print(json.dumps({"error": str(exc)}))
''')


def _app_agent(tmp_path: Path, targets: list, moved: Path | None = None) -> tuple:
    """Runs APPENDS as the user's app under APP_AGENT (private HOME, no XDG_CACHE_HOME); returns (what
    the agent printed, what the app reported)."""
    for name in ("package", "prefix", "lib/site", "app", "home", "wd/runs/r1"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "package" / "loop.py").write_text("x = 1\n")
    (tmp_path / "lib" / "site" / "z3.py").write_text("x = 1\n")
    (tmp_path / "wd" / "swizzleperf.db").write_bytes(b"")
    (tmp_path / "app" / "app.py").write_text(APPENDS)
    report = tmp_path / "app" / "report.json"
    command = f"{sys.executable} app.py {report} '{json.dumps([str(t) for t in targets])}'"
    command += f" {moved}" if moved else ""
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    done = subprocess.run([sys.executable, "-c", APP_AGENT, str(tmp_path), command], capture_output=True, text=True,
                          timeout=300, env=dict(env, HOME=str(tmp_path / "home")))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), json.loads(report.read_text())


@needs_namespaces
def test_the_app_cannot_write_the_agents_code_interpreter_caches_or_record(tmp_path):
    agent_owned = [tmp_path / "package" / "loop.py", tmp_path / "package" / "new.py",
                   tmp_path / "prefix" / "bin" / "python-config",
                   tmp_path / "lib" / "site" / "z3.py", tmp_path / "lib" / "site" / "evil.pth",
                   tmp_path / "home" / ".cache" / "swizzleperf" / "simulations" / "simulations.sqlite3",
                   tmp_path / "home" / ".cache" / "swizzleperf" / "gemm_configs.json",
                   tmp_path / "wd" / "swizzleperf.db", tmp_path / "wd" / "runs" / "r1" / "report.md",
                   tmp_path / "wd" / "captures" / "planted.json"]
    its_own = [tmp_path / "app" / "out.txt", tmp_path / "home" / ".cache" / "torch" / "x",
               tmp_path / "wd" / "captures" / ".capture-test" / "launch-1.json",
               Path("/tmp") / f"{_token()}.txt"]
    try:
        printed, seen = _app_agent(tmp_path, agent_owned + its_own)
    finally:
        its_own[-1].unlink(missing_ok=True)
    assert printed["error"] is None, printed
    assert {p: seen[str(p)] for p in agent_owned} == {p: "EROFS" for p in agent_owned}, seen
    assert {p: seen[str(p)] for p in its_own} == {p: "written" for p in its_own}, seen
    assert (tmp_path / "package" / "loop.py").read_text() == "x = 1\n"
    assert (tmp_path / "lib" / "site" / "z3.py").read_text() == "x = 1\n"


@needs_namespaces
def test_an_app_that_moves_the_agents_folders_aside_stops_the_run(tmp_path):
    """A folder above a read-only one can still be renamed in the app's namespace: the app moved the
    interpreter's packages aside and made new ones in their place. The agent sees the swap and stops."""
    printed, seen = _app_agent(tmp_path, [], moved=tmp_path / "lib")
    if seen["moved"] != "moved":
        pytest.skip(f"the kernel refused the rename itself: {seen['moved']}")
    assert printed["error"] and "lib/site" in printed["error"] and "replaced" in printed["error"], printed


def test_the_agents_own_folders_are_found(tmp_path, monkeypatch):
    import site
    from swizzleperf.agent.capture import capture
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("SWIZZLEPERF_SIM_CACHE", raising=False)
    found = capture.agent_owned_paths(Path("/nowhere/.swizzleperf"))
    assert str(tmp_path / ".cache" / "swizzleperf") in found and (tmp_path / ".cache" / "swizzleperf").is_dir()
    real = {os.path.realpath(p) for p in found}

    def covered(path) -> bool:   # one of them, or beneath one of them
        path = os.path.realpath(path)
        return any(path == r or path.startswith(r + "/") for r in real)
    assert covered(Path(sandbox.__file__).parent) and covered(Path(capture.__file__).parent)
    assert covered(sys.prefix) and covered(sys.base_prefix) and covered(os.__file__)   # the standard library
    assert all(covered(p) for p in site.getsitepackages() if os.path.isdir(p))
    assert not covered(tmp_path / "elsewhere")
    assert "/nowhere/.swizzleperf" in found
