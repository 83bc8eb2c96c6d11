"""The ncu subprocess path without a GPU: a stand-in `ncu` on PATH plays the profiler the way the
real one runs the worker (in the sandbox's folder, not the caller's directory)."""
import os
import stat
import sys
from pathlib import Path

import pytest

from swizzleperf.profiling import ncu

# Stand-in for ncu: finds the worker's request after `-m swizzleperf.agent.verification.worker`, and "profiles"
# one launch when the kernel file the request names can be found from where it runs, as the real
# worker must find it; otherwise it prints what ncu prints when the application launched nothing.
FAKE_NCU = '''#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
log = Path(args[args.index("--log-file") + 1])
request = json.loads(Path(args[args.index("swizzleperf.agent.verification.worker") + 1]).read_text())
if not Path(request["kernel_path"]).exists():
    log.write_text("==WARNING== No kernels were profiled.\\n")
    sys.exit(0)
log.write_text('"ID","Kernel Name","gpu__time_duration.sum","lts__t_sector_hit_rate.pct"\\n'
               '"0","matmul_kernel","3,500,000","76.0"\\n')
'''


def _fake_ncu(tmp_path, monkeypatch, text: str) -> None:
    """``text`` (with ``{python}``) as the ``ncu`` first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    fake.write_text(text.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_relative_kernel_path_reaches_the_worker_resolved(tmp_path, monkeypatch, gemm_path):
    _fake_ncu(tmp_path, monkeypatch, FAKE_NCU)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "gemm.py").write_text(gemm_path.read_text())
    monkeypatch.chdir(tmp_path)
    raw = ncu.profile_launch(Path("runs/gemm.py"), "matmul_kernel", "bfloat16", timeout_s=60)
    assert raw["lts__t_sector_hit_rate.pct"] == 76.0 and raw["launches"] == 1.0


# Stand-in for ncu whose worker failed before its launch: it profiled nothing, and the worker's
# answer (result.json, the last argument) says why, or the worker left none and said so on stderr.
FAILED_NCU = '''#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
Path(args[args.index("--log-file") + 1]).write_text("==WARNING== No kernels were profiled.\\n")
if {answer}:
    Path(args[-1]).write_text(json.dumps({{"verdict": "RUNTIME_ERROR", "reason": "RuntimeError: CUDA error: 304"}}))
else:
    print("OSError: [Errno 30] Read-only file system: '/root/.triton'", file=sys.stderr)
'''


@pytest.mark.parametrize("answer, said", [(True, "the worker under ncu: RUNTIME_ERROR: RuntimeError: CUDA error: 304"),
                                          (False, "left no answer: OSError: [Errno 30] Read-only file system")])
def test_nothing_profiled_says_what_the_worker_said(tmp_path, monkeypatch, gemm_path, answer, said):
    _fake_ncu(tmp_path, monkeypatch, FAILED_NCU.replace("{answer}", str(answer)))
    with pytest.raises(ncu.NcuError) as raised:
        ncu.profile_launch(gemm_path, "matmul_kernel", "bfloat16", timeout_s=60)
    assert said in str(raised.value), str(raised.value)
