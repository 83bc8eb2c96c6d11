"""The kernel's folder on ``sys.path`` only while the kernel module imports (red team, round twelve,
U06: it stayed first for the whole process, so a user's ``timeit.py`` beside the kernel served the
agent's later imports of the standard module, and the error did not name the file)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.verification.load import load_kernel, load_spec
from swizzleperf.kernels.spec import KernelLoadError


@pytest.fixture(autouse=True)
def _sys_path_restored(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))


def _kernel_with_helper(tmp_path: Path, gemm_source: str, helper: str) -> Path:
    """kernels/gemm.py in a folder of its own, importing the module ``helper`` of that folder at
    its top (``HELPER_VALUE = helper.VALUE``), and calling a second, ``lazy_<helper>``, only in a
    function (``lazy()``)."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / f"{helper}.py").write_text("VALUE = 41 + 1\n")
    (folder / f"lazy_{helper}.py").write_text("VALUE = 7\n")
    head = (f"import {helper}\nHELPER_VALUE = {helper}.VALUE\n\n\ndef lazy():\n"
            f"    import lazy_{helper}\n    return lazy_{helper}.VALUE\n\n\n")
    path = folder / "gemm.py"
    path.write_text(_after_future(gemm_source, head))
    return path


def _after_future(source: str, lines: str) -> str:
    """``source`` with ``lines`` after its ``from __future__`` import (which must come first)."""
    future = "from __future__ import annotations\n"
    assert source.count(future) == 1
    return source.replace(future, future + lines)


def _folders_on_path() -> set:
    return {os.path.realpath(p) for p in sys.path if p}


@pytest.mark.parametrize("loader", [load_spec, load_kernel])
def test_the_kernels_folder_is_on_sys_path_only_while_it_imports(tmp_path, gemm_source, loader):
    """A helper imported at the kernel's top still works; afterwards the folder is off the path.
    A helper imported only inside a function, after the import, is not found (documented in
    ``load._import_file``: import helpers at the module's top)."""
    helper = f"r12_helper_{loader.__name__}"
    path = _kernel_with_helper(tmp_path, gemm_source, helper)
    loaded = loader(path)
    spec = loaded[1] if isinstance(loaded, tuple) else loaded
    assert spec.name == "gemm"
    assert os.path.realpath(path.parent) not in _folders_on_path(), "the kernel's folder stayed on sys.path"
    module = next(m for n, m in sys.modules.items() if n.startswith("_swizzleperf_kernel_gemm")
                  and getattr(m, "HELPER_VALUE", None) == 42 and Path(m.__file__) == path)
    assert module.HELPER_VALUE == 42
    with pytest.raises(ModuleNotFoundError, match=f"lazy_{helper}"):
        module.lazy()


_PROBE = r"""
import json, os, sys
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.kernels.spec import KernelLoadError
folder = sys.argv[1]
try:
    load_spec(os.path.join(folder, "gemm.py"))
    error = None
except KernelLoadError as exc:
    error = str(exc)
import timeit
print(json.dumps({"error": error, "on_path": any(os.path.realpath(p) == os.path.realpath(folder) for p in sys.path if p),
                  "timeit": timeit.__file__, "default_timer": hasattr(timeit, "default_timer")}))
"""

#: A ``timeit.py`` beside the kernel: one that raises (the red team's), one that is empty, one that
#: stands in for the standard module so well that the kernel's import succeeds.
_TIMEITS = {
    "raises": "raise ImportError('user module timeit shadows')\n",
    "empty": "# a benchmark script of the user's, say\n",
    "stands-in": ("import importlib.util, sys, sysconfig, os\n"
                  "_spec = importlib.util.spec_from_file_location('_real_timeit', os.path.join("
                  "sysconfig.get_paths()['stdlib'], 'timeit.py'))\n"
                  "_real = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_real)\n"
                  "globals().update({k: v for k, v in vars(_real).items() if not k.startswith('__')})\n"),
}


@pytest.mark.parametrize("kind", sorted(_TIMEITS))
def test_a_timeit_beside_the_kernel_is_named_and_the_agent_keeps_its_own(tmp_path, gemm_source, kind):
    """In a fresh process (the CLI's): the kernel's import loads the standard ``timeit`` (torch
    imports it), which the folder's ``timeit.py`` shadowed; the error is one line naming the file,
    the folder is off ``sys.path`` afterwards and the process's ``import timeit`` is the standard one."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "gemm.py").write_text(gemm_source)
    (folder / "timeit.py").write_text(_TIMEITS[kind])
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(folder)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["error"] is not None and "\n" not in got["error"], got
    assert "timeit.py in your kernel's folder shadows the standard module timeit" in got["error"], got
    assert not got["on_path"], got
    assert not got["timeit"].startswith(str(folder)) and got["default_timer"], got


def test_a_helper_that_raises_is_named_not_said_to_shadow_anything(tmp_path, gemm_source):
    """Only a module of the folder under a standard or installed module's name is named as
    shadowing one; a helper of the kernel's own that raises is named as the file that raised (the
    red team's ``pydot.py``, which a library imports where it is there, read as the kernel's error)."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "r12_broken_helper.py").write_text("raise ValueError('broken helper')\n")
    (folder / "gemm.py").write_text(_after_future(gemm_source, "import r12_broken_helper\n"))
    with pytest.raises(KernelLoadError) as info:
        load_spec(folder / "gemm.py")
    assert "shadows" not in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).endswith("failed to import: r12_broken_helper.py in your kernel's folder, imported as "
                                    "the module r12_broken_helper, raised: ValueError: broken helper"), info.value
    assert os.path.realpath(folder) not in _folders_on_path()


_INSTALLED_PROBE = r"""
import json, os, sys
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.kernels.spec import KernelLoadError
out = {}
try:
    load_spec(os.path.join(sys.argv[2], "gemm.py"))   # its own yaml.py raises
except KernelLoadError as exc:
    out["error"] = str(exc)
spec = load_spec(os.path.join(sys.argv[1], "gemm.py"))   # its own yaml.py, imported at its top: it works
kernel = next(m for n, m in sys.modules.items() if n.startswith("_swizzleperf_kernel_gemm")
              and hasattr(m, "YAML_VALUE"))
out["kernel_saw"] = kernel.YAML_VALUE
import yaml
out["agent_yaml_is_the_installed_one"] = hasattr(yaml, "safe_load")
print(json.dumps(out))
"""


def test_a_module_of_the_folder_named_as_an_installed_one_serves_the_kernel_not_the_agent(tmp_path, gemm_source):
    """As ``python gemm.py`` has it, the kernel's own ``yaml.py`` is the kernel's ``yaml``; once the
    kernel imported, the process's ``import yaml`` is the installed one. Where such a module
    raises, the error names it."""
    pytest.importorskip("yaml")
    works, raises = tmp_path / "works", tmp_path / "raises"
    for folder, body in ((works, "VALUE = 3\n"), (raises, "raise RuntimeError('not this yaml')\n")):
        folder.mkdir()
        (folder / "yaml.py").write_text(body)
        (folder / "gemm.py").write_text(_after_future(gemm_source, "import yaml\nYAML_VALUE = getattr(yaml, 'VALUE', None)\n"))
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", _INSTALLED_PROBE, str(works), str(raises)], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["kernel_saw"] == 3 and got["agent_yaml_is_the_installed_one"], got
    assert "yaml.py in your kernel's folder shadows the installed module yaml (rename it): RuntimeError: not this yaml" \
        in got["error"], got
