"""The worker's box (agent/sandbox.py): what code that got past the static check would find.

Each test runs a kernel module whose module-level code plays the escaped candidate: the worker
imports it (as it imports every spliced candidate), so that code runs exactly where a candidate's
would, and reports what it saw into a file the test names."""
import json
import os
import sys
import time
from pathlib import Path

import pytest

from swizzleperf.agent import sandbox
from swizzleperf.agent.verify import Verdict, run_worker

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


def _spy(tmp_path: Path, port: int, monkeypatch) -> dict:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("TORCH_HUB_TOKEN", "must-not-leak-either")
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
    assert Path(seen["cwd"]) != Path.cwd() and seen["cwd_files"] == []
    assert not Path(seen["cwd"]).exists()  # removed with the worker's folder
    assert seen["core"] == 0 and seen["nofile"] <= 4096


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                    reason="a network namespace needs root (or unprivileged user namespaces)")
def test_candidate_code_cannot_reach_the_network(tmp_path, listener, monkeypatch):
    seen = _spy(tmp_path, listener, monkeypatch)
    assert seen["network"] != "connected", "the worker reached a loopback listener"


def test_a_timed_out_worker_takes_its_children_with_it(tmp_path):
    pid_file = tmp_path / "child.pid"
    module = tmp_path / "hang_kernel.py"
    module.write_text(f"import subprocess, time\n"
                      f"child = subprocess.Popen(['sleep', '300'])\n"
                      f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
                      f"time.sleep(300)\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 15, interpret=True)
    assert result.verdict is Verdict.TIMEOUT
    child = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the worker's child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


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
