"""The worker's box (sandbox/__init__.py): what code that got past the static check would find.

Each test runs a kernel module whose module-level code plays the escaped candidate: the worker
imports it (as it imports every spliced candidate), so that code runs exactly where a candidate's
would, and reports what it saw into a file the test names."""
import json
import os
import sys
import time
from pathlib import Path

import pytest

from swizzleperf import sandbox
from swizzleperf.agent.verification.verify import Verdict, run_worker

SPY = '''
import json, os, resource, socket
seen = {{"env": dict(os.environ), "cwd": os.getcwd(), "cwd_files": os.listdir("."),
        "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}}
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    seen["network"] = "connected"
except OSError as exc:
    seen["network"] = type(exc).__name__ + ": " + str(exc)
open({out!r}, "w").write(json.dumps(seen))
'''


@pytest.fixture
def listener():
    """A loopback TCP port that accepts connections (what a candidate could reach without the box)."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


def _reports_into(folder: Path, monkeypatch) -> None:
    """Let the worker write into ``folder`` as well as its own (the box's file system is read-only
    elsewhere, tests/sandbox/test_box_filesystem.py): where these tests' spies leave what they saw."""
    limits = sandbox.worker_limits
    monkeypatch.setattr(sandbox, "worker_limits", lambda t, i, w=(): limits(t, i, (*w, str(folder))))


def _spy(tmp_path: Path, port: int, monkeypatch) -> dict:
    _reports_into(tmp_path, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("TORCH_HUB_TOKEN", "must-not-leak-either")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    out = tmp_path / "seen.json"
    module = tmp_path / "spy_kernel.py"
    module.write_text(SPY.format(port=port, out=str(out)))
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.COMPILE_ERROR  # no KernelSpec: but its code ran first
    return json.loads(out.read_text())


def test_candidate_code_sees_no_key_no_proxy_and_an_empty_folder_of_its_own(tmp_path, listener, monkeypatch):
    seen = _spy(tmp_path, listener, monkeypatch)
    assert "OPENAI_API_KEY" not in seen["env"] and "HTTPS_PROXY" not in seen["env"]
    assert "TORCH_HUB_TOKEN" not in seen["env"]
    assert not any("sk-must-not-leak" in v for v in seen["env"].values())
    assert seen["env"]["TRITON_INTERPRET"] == "1"
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == ""   # an interpreted worker starts no CUDA
    assert Path(seen["cwd"]) != Path.cwd() and seen["cwd_files"] == []
    assert not Path(seen["cwd"]).exists()  # removed with the worker's folder
    assert seen["core"] == 0 and seen["nofile"] <= 4096


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                    reason="a network namespace needs root (or unprivileged user namespaces)")
def test_candidate_code_cannot_reach_the_network(tmp_path, listener, monkeypatch):
    seen = _spy(tmp_path, listener, monkeypatch)
    assert seen["network"] != "connected", "the worker reached a loopback listener"


def test_a_timed_out_worker_takes_its_children_with_it(tmp_path, monkeypatch):
    _reports_into(tmp_path, monkeypatch)
    # the child is found by a token on its command line: inside the box's PID namespace its own
    # pid means nothing out here
    token = f"swizzleperf-test-{os.getpid()}-{time.time_ns()}"
    started = tmp_path / "child.started"
    module = tmp_path / "hang_kernel.py"
    module.write_text(f"import subprocess, time\n"
                      f"child = subprocess.Popen(['sh', '-c', 'sleep 300; : {token}'])\n"
                      f"open({str(started)!r}, 'w').write('1')\n"
                      f"time.sleep(300)\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 15, interpret=True)
    assert result.verdict is Verdict.TIMEOUT and started.exists()
    _wait_gone(token)
    assert not _with_token(token), "the worker's child outlived the timeout"


def _wait_gone(token: str, seconds: float = 5.0) -> None:
    """Give a killed process the moment the kernel takes to end it."""
    for _ in range(int(seconds / 0.1)):
        if not _with_token(token):
            return
        time.sleep(0.1)


def _with_token(token: str) -> list:
    """Live (not zombie) processes whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token in (entry / "cmdline").read_bytes().decode(errors="replace") and \
                    "State:\tZ" not in (entry / "status").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_worker_env_names_what_passes_in_one_place(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/tc")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("TRITON_API_TOKEN", "x")
    monkeypatch.setenv("http_proxy", "http://p")
    env = sandbox.worker_env(TRITON_INTERPRET="1")
    assert env["TRITON_CACHE_DIR"] == "/tmp/tc" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert env["TRITON_INTERPRET"] == "1"
    assert not {"ANTHROPIC_API_KEY", "TRITON_API_TOKEN", "http_proxy"} & set(env)



#: What the GPU toolchain reads, passed to a worker as it is.
_TOOLCHAIN = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "CUDA_HOME": "/usr/local/cuda",
              "CUDA_PATH": "/usr/local/cuda", "CUDA_VISIBLE_DEVICES": "0,1", "CUDA_LAUNCH_BLOCKING": "1",
              "CUDA_MODULE_LOADING": "LAZY", "CUDA_CACHE_PATH": "/c", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
              "TRITON_CACHE_DIR": "/tc", "TRITON_HOME": "/th", "TRITON_DUMP_DIR": "/td",
              "TRITON_OVERRIDE_DIR": "/to", "TRITON_CACHE_MANAGER": "m:M", "TRITON_LIBCUDA_PATH": "/l",
              "TRITON_PTXAS_PATH": "/p", "TRITON_CUDART_PATH": "/r", "NCCL_SOCKET_IFNAME": "lo",
              "TORCH_CUDA_ARCH_LIST": "9.0", "PYTORCH_CUDA_ALLOC_CONF": "x", "HIP_VISIBLE_DEVICES": "0",
              "ROCR_VISIBLE_DEVICES": "0", "HSA_OVERRIDE_GFX_VERSION": "9.4.2", "OMP_NUM_THREADS": "4"}


def test_worker_env_withholds_invented_credentials_behind_the_toolchains_prefixes(monkeypatch):
    """#41's second replay: invented names under a passed prefix (``TRITON_MY_PASS``,
    ``CUDA_HOME_PW``) reached the worker; a credential's word anywhere in a name withholds it, and
    what the GPU toolchain reads still passes."""
    invented = ["TRITON_MY_PASS", "CUDA_HOME_PW", "TRITON_PWD", "CUDA_PW_2", "NCCL_DBPASS",
                "TRITON_PASSPHRASE", "CUDA_CREDS", "TORCH_HUB_COOKIE", "TRITON_SESSION_ID", "HIP_AUTHZ",
                "TRITON_API_TOKEN", "CUDA_SECRET"]
    for name in invented:
        monkeypatch.setenv(name, "hunter2")
    for name, value in _TOOLCHAIN.items():
        monkeypatch.setenv(name, value)
    env = sandbox.worker_env()
    assert not set(invented) & set(env), sorted(set(invented) & set(env))
    assert {name: env.get(name) for name in _TOOLCHAIN} == _TOOLCHAIN
    monkeypatch.setenv("LLVM_PASS_PLUGIN_PATH", "/p.so")   # the app keeps them, and the shell's PWD
    monkeypatch.setenv("PWD", "/w")
    app = sandbox.app_env()
    assert app["LLVM_PASS_PLUGIN_PATH"] == "/p.so" and app["PWD"] == "/w"
    assert not set(invented) & set(app)

# -- other processes (issue #21): a worker cannot read the agent's /proc/<pid>/environ ---------------

_SECRET = "sk-agent-secret-must-not-leak"

_PEEK = '''
import ctypes, json, os
seen = {{"pid": os.getpid(), "visible": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}}
try:
    seen["agent_environ"] = open("/proc/{agent}/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    seen["agent_environ_error"] = type(exc).__name__
if os.getpid() == 1:  # only inside a PID (and so mount) namespace of its own: never the host's /proc
    seen["umount"] = ctypes.CDLL(None, use_errno=True).umount2(b"/proc", 2)
if {daemon!r}:
    import subprocess
    subprocess.Popen(["setsid", "sh", "-c", "sleep 300; : " + {daemon!r}], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open({out!r}, "w").write(json.dumps(seen))
'''

# The agent: a process started with the key in its environment (what /proc/<pid>/environ shows is
# the environment a process was started with), running one worker on a module that peeks.
_AGENT = '''
import json, os, sys
from pathlib import Path
from swizzleperf import sandbox
from swizzleperf.agent.verification.verify import run_worker
folder, forced_fallback, daemon = Path(sys.argv[1]), sys.argv[2] == "fallback", sys.argv[3]
if forced_fallback:
    sandbox.isolation = lambda: (False, "forced by the test")
limits = sandbox.worker_limits   # the peek reports into the test's folder: let it write there
sandbox.worker_limits = lambda t, i, w=(): limits(t, i, (*w, str(folder)))
(folder / "peek_kernel.py").write_text(sys.argv[4].format(agent=os.getpid(), out=str(folder / "seen.json"),
                                                          daemon=daemon))
result = run_worker({"kernel_path": str(folder / "peek_kernel.py"), "stages": ["permutation"]}, 120,
                    interpret=True)
own = open("/proc/self/environ", "rb").read().decode(errors="replace")
print(json.dumps({"verdict": result.verdict.value, "own": %r in own,
                  "seen": json.loads((folder / "seen.json").read_text())}))
''' % _SECRET


def _agent_run(tmp_path: Path, mode: str, daemon: str = "") -> tuple:
    import subprocess
    done = subprocess.run([sys.executable, "-c", _AGENT, str(tmp_path), mode, daemon, _PEEK],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OPENAI_API_KEY=_SECRET))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


needs_namespaces = pytest.mark.skipif(not sandbox.isolation()[0], reason="no PID namespace permitted here: "
                                      "the fallback test covers this machine")


@needs_namespaces
def test_worker_env_withholds_a_credential_by_its_value_or_a_bearer_name(monkeypatch):
    """Round nine of #41: ``CUDA_BEARER=...`` and ``TORCH_HUB_URL=https://u:SECRETPW@hub`` reached
    the box (names under passed prefixes, filtered by name only); a value holding a secret the agent
    knows is withheld too. A plain URL still passes."""
    from swizzleperf.sandbox.redact import remember
    remember("sk-round9-env-0123456789abcdef")
    monkeypatch.setenv("CUDA_BEARER", "SECRET-abc")
    monkeypatch.setenv("TORCH_HUB_URL", "https://u:SECRETPW@hub.example")
    monkeypatch.setenv("TRITON_CACHE_NOTE", "key sk-round9-env-0123456789abcdef")
    monkeypatch.setenv("TORCH_HOME_URL", "https://hub.example/models?x=1")
    env = sandbox.worker_env()
    assert not {"CUDA_BEARER", "TORCH_HUB_URL", "TRITON_CACHE_NOTE"} & set(env)
    assert env["TORCH_HOME_URL"] == "https://hub.example/models?x=1"


def test_candidate_code_cannot_read_the_agents_environ_nor_see_its_processes(tmp_path):
    result, _ = _agent_run(tmp_path, "namespaces")
    assert result["own"], "control: the agent's own /proc environ holds the key"
    seen = result["seen"]
    assert _SECRET not in seen.get("agent_environ", "")
    assert seen["pid"] == 1 and len(seen["visible"]) <= 3, seen["visible"]  # its own namespace
    assert seen["umount"] == -1, "the worker could un-mount its fresh /proc"


def test_without_namespaces_the_agent_is_non_dumpable_and_says_so(tmp_path):
    result, stderr = _agent_run(tmp_path, "fallback")
    assert result["own"]
    seen = result["seen"]
    assert seen["pid"] != 1 and "umount" not in seen          # really the host's process view
    assert _SECRET not in seen.get("agent_environ", "") and seen.get("agent_environ_error") == "PermissionError"
    lines = [line for line in stderr.splitlines() if "no PID namespace" in line]
    assert len(lines) == 1 and "forced by the test" in lines[0]


@needs_namespaces
def test_a_daemon_the_worker_leaves_behind_ends_with_it(tmp_path):
    token = f"swizzleperf-daemon-{os.getpid()}-{time.time_ns()}"
    result, _ = _agent_run(tmp_path, "namespaces", daemon=token)
    assert result["verdict"] == "COMPILE_ERROR"          # no KernelSpec: but its code ran first
    _wait_gone(token)
    assert not _with_token(token), "a setsid daemon of the worker outlived it"


# -- the user's --app command -------------------------------------------------------------------

def test_the_app_gets_the_environment_without_the_agents_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pw@host/v1")
    monkeypatch.setenv("SWIZZLEPERF_LLM_MODEL", "m")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("HF_TOKEN", "hf")
    monkeypatch.setenv("MY_APP_SETTING", "kept")
    monkeypatch.setenv(sandbox.APP_PASS_ENV, "HF_TOKEN")
    env = sandbox.app_env(EXTRA="1")
    assert env["MY_APP_SETTING"] == "kept" and env["PATH"] == os.environ["PATH"] and env["EXTRA"] == "1"
    assert env["HF_TOKEN"] == "hf"                     # named by the user for the app
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL", "SWIZZLEPERF_LLM_MODEL", "AWS_SECRET_ACCESS_KEY"} & set(env)
    assert "AWS_SECRET_ACCESS_KEY" in sandbox.withheld_from_app()


def test_a_credential_named_variable_that_holds_a_folder_reaches_the_app(tmp_path, monkeypatch):
    """TIKTOKEN_CACHE_DIR names a place: it passes; the same name holding anything else does not."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN_PATH", "/nonexistent/hf-token-file")  # not an existing folder
    monkeypatch.setenv("GH_TOKEN", "ghp_" + "a" * 36)
    monkeypatch.setenv("MY_SECRET_DIR", "relative/folder")              # not an absolute path
    env = sandbox.app_env()
    assert env["TIKTOKEN_CACHE_DIR"] == str(tmp_path)
    assert not {"HF_TOKEN_PATH", "GH_TOKEN", "MY_SECRET_DIR"} & set(env)
    assert "TIKTOKEN_CACHE_DIR" not in sandbox.withheld_from_app()
    assert "TIKTOKEN_CACHE_DIR" not in sandbox.worker_env()            # a worker's names are a fixed list


def test_a_pass_through_list_reaches_the_app_and_a_password_beside_it_does_not(monkeypatch):
    """``TOX_TESTENV_PASSENV`` names variables to pass on (the GPU image has it): the app keeps it and
    a failed app's line does not name it; a credential-looking value or another word still withholds."""
    monkeypatch.setenv("TOX_TESTENV_PASSENV", "HOME PATH")
    monkeypatch.setenv("CI_PASSTHROUGH", "HOME")
    monkeypatch.setenv("DB_PASSENV_PASSWORD", "hunter2")                  # PASSWORD is a marker
    monkeypatch.setenv("MY_PASSENV", "https://u:pw@example.com")         # a credential by value
    monkeypatch.setenv("NCCL_DBPASS", "hunter2")
    env = sandbox.app_env()
    assert env["TOX_TESTENV_PASSENV"] == "HOME PATH" and env["CI_PASSTHROUGH"] == "HOME"
    assert not {"DB_PASSENV_PASSWORD", "MY_PASSENV", "NCCL_DBPASS"} & set(env)
    assert "TOX_TESTENV_PASSENV" not in sandbox.withheld_from_app()


def test_a_daemon_the_app_leaves_behind_is_ended_with_its_process_group(tmp_path, monkeypatch):
    from swizzleperf.agent.capture.capture import hook_environment, run_with_hook
    monkeypatch.setenv("OPENAI_API_KEY", _SECRET)
    token = f"swizzleperf-app-daemon-{os.getpid()}-{time.time_ns()}"
    seen = tmp_path / "app_env.txt"
    daemon = (f"import os, time; open({str(seen)!r}, 'w').write(repr(dict(os.environ))); "
              f"pid = os.fork(); pid and os._exit(0); time.sleep(300)")
    (tmp_path / "hook").mkdir()
    env = hook_environment(tmp_path / "hook")
    started = time.monotonic()
    code = run_with_hook(f"{sys.executable} -c \"{daemon}\" {token}", env, 60, tmp_path, tmp_path / "app.log")
    assert code == 0 and time.monotonic() - started < 30
    _wait_gone(token)
    assert not _with_token(token), "the app's daemon outlived it"
    assert _SECRET not in seen.read_text()


# -- on a GPU: CUDA and ncu work inside the box -------------------------------------------------

@pytest.mark.gpu
def test_cuda_works_in_the_box_of_a_verification_worker(tmp_path):
    code = ("import json, os, torch; x = torch.arange(10, device='cuda'); "
            "print(json.dumps({'pid': os.getpid(), 'sum': int(x.sum()), 'gpus': torch.cuda.device_count()}))")
    done = sandbox.run([sys.executable, "-c", code], tmp_path, sandbox.worker_env(), 300,
                       sandbox.worker_limits(300, interpret=False, writable=(tmp_path,)))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sum"] == 45 and seen["gpus"] >= 1
    assert seen["pid"] == 1 or not sandbox.isolation()[0]


@pytest.mark.gpu
def test_ncu_profiles_a_launch_from_inside_the_box(gemm_path):
    from swizzleperf.profiling import ncu
    if ncu.find_ncu() is None:
        pytest.skip("no ncu on this machine")
    raw = ncu.profile_launch(gemm_path, "matmul_kernel", "bfloat16", timeout_s=600)
    assert any("lts__t_sector" in key for key in raw), sorted(raw)[:10]


def test_a_candidate_that_prints_bytes_that_are_not_text_gets_a_verdict_not_a_traceback(tmp_path):
    """Found 2026-12-06: b"\\xff" on the worker's stdout raised UnicodeDecodeError in the agent."""
    module = tmp_path / "bytes_kernel.py"
    module.write_text("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe'); sys.stdout.flush()\n"
                      "sys.stderr.buffer.write(b'\\xff bad\\n'); sys.stderr.flush()\nraise SystemExit(3)\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict in (Verdict.CRASH, Verdict.COMPILE_ERROR), result


@pytest.mark.parametrize("spoiled", [b"\xff{not json", b"[" * 100000, b'{"verdict": "PASS"}',
                                     b'{"reason": "", "details": {}}', b'{"verdict": ["PASS"], "reason": "", "details": {}}',
                                     b'{"verdict": "FORGED", "reason": "", "details": {}}'])
def test_a_result_file_spoiled_in_the_workers_folder_is_a_crash_not_a_traceback(tmp_path, spoiled):
    """The worker's result.json lies in the folder its code may write (found 2026-12-06: bytes that
    are not UTF-8 there raised UnicodeDecodeError in the agent)."""
    module = tmp_path / "spoiling_kernel.py"
    module.write_text(f"import atexit, sys\natexit.register(lambda: open(sys.argv[2], 'wb').write({spoiled!r}))\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.CRASH and "the worker's result is not one the worker writes" in result.reason


@pytest.mark.parametrize("spoil", ["open(path, 'wb').write(b'garbage')",
                                   "numpy.save(path, numpy.zeros(8, dtype=numpy.int64))",
                                   "numpy.save(path, numpy.array([0.5, 1.5]))",
                                   "import os; os.remove(path); os.mkfifo(path)",
                                   "import os; os.remove(path); os.symlink('/proc/self/fd/0', path)"])
def test_a_mapping_spoiled_in_the_workers_folder_never_reaches_the_run(tmp_path, gemm_source, spoil):
    """The mapping a worker saves lies in the folder its code may write; the agent and the simulator
    load it afterwards: it is checked before it is copied out (found 2026-12-06); a named pipe or a
    link to the agent's stdin there is refused, not read (which would block the agent)."""
    module = tmp_path / "spoiling_map.py"
    module.write_text(gemm_source + "\nimport atexit, json, sys, numpy\n"
                      "def _spoil():\n    path = json.load(open(sys.argv[1]))['mapping_path']\n"
                      f"    {spoil}\n"
                      "atexit.register(_spoil)\n")
    wanted = tmp_path / "run" / "m.npy"
    wanted.parent.mkdir()
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"], "problems": ["check"],
                         "mapping_path": str(wanted)}, 120, interpret=True)
    assert result.verdict is Verdict.CRASH and "the mapping the worker left is not one it writes" in result.reason
    assert not wanted.exists()
