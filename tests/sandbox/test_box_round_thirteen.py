"""The box against what round thirteen of #41 got through: every Python the tool starts (the box's
init, the workers) ran ``python -m`` in a folder someone else can write, so a ``resource.py`` an app
left in its own folder was imported by the next box's init, outside the box, as root with every
capability, before any mount (R01); and a folder on the user's ``PYTHONPATH`` stayed writable to the
app, so a module planted there ran in the agent itself at its next import (R03).

Hermetic: every file a test writes lies beneath ``tmp_path``; the agents run as subprocesses with a
private HOME."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from swizzleperf import sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")
needs_namespaces = pytest.mark.skipif(not sandbox.isolation()[0], reason="no PID namespace permitted here")

#: Modules the box's init imports (or may) that the interpreter has not imported at start-up.
PLANTED = ("resource", "json", "ctypes", "signal", "tempfile", "errno", "stat", "runpy", "logging")


def _plant(folder: Path, marker: Path) -> None:
    """A module of each name of PLANTED in ``folder`` that, imported, appends its name to ``marker``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLANTED:
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")


@pytest.mark.parametrize("version", ["this", "3.10"])
def test_python_started_by_the_tool_imports_nothing_from_its_working_folder(tmp_path, monkeypatch, version):
    folder, marker = tmp_path / "app", tmp_path / "imported.txt"
    _plant(folder, marker)
    if version == "3.10":   # the branch without -P, run by this interpreter
        monkeypatch.setattr(sys, "version_info", (3, 10, 0))
    code = "import resource, json, sys; print(json.dumps([resource.__file__, sys.argv[1:]]))"
    for command in (sandbox.python_command("-c", code, "a", "b"),
                    sandbox.python_command("-m", "json.tool", str(tmp_path / "in.json"))):
        (tmp_path / "in.json").write_text('{"x": 1}')
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        if command[-1] == "b":
            where, argv = json.loads(done.stdout)
            assert not where.startswith(str(folder)) and argv == ["a", "b"], done.stdout
    assert not marker.exists(), marker.read_text()
    with pytest.raises(ValueError):
        sandbox.python_command("script.py")


@pytest.mark.parametrize("kind", ["worker", "app"])
def test_the_boxs_init_imports_nothing_from_the_folder_it_starts_in(tmp_path, kind):
    """R01: the init (``python -m swizzleperf.sandbox``) started in the app's folder imported the
    ``resource.py`` the app had left there, before unsharing anything."""
    folder, marker = tmp_path / "app", tmp_path / "imported.txt"
    _plant(folder, marker)
    if kind == "worker":
        limits = sandbox.worker_limits(30, True, (str(folder),))
    else:
        limits = sandbox.Limits(isolate_network=False, isolate_processes=sandbox.isolation()[0], writable=None,
                                read_only=(str(tmp_path / "ro"),), still_writable=(str(folder),))
        (tmp_path / "ro").mkdir()
    done = sandbox.run(["/bin/sh", "-c", "echo ran"], folder, sandbox.worker_env(), 60, limits)
    assert "ran" in done.stdout, (done.stdout, done.stderr)
    assert not marker.exists(), marker.read_text()


#: The agent: capture's runner of the app, its own folders replaced by the test's stand-ins, with the
#: ``PYTHONPATH`` this process was given; prints the import folders left to it afterwards.
APP_AGENT = textwrap.dedent(r'''
    import json, os, sys
    from pathlib import Path
    from swizzleperf.agent.capture import capture
    root, command = Path(sys.argv[1]), sys.argv[2]
    capture._package_folders = lambda: [str(root / "package")]
    work = root / "wd" / "captures" / ".capture-test"
    work.mkdir(parents=True)
    capture.run_app(command, {}, work, 120, root / "app")
    print(json.dumps({"sys_path": [os.path.realpath(p or ".") for p in sys.path if isinstance(p, str)],
                      "pythonpath": os.environ.get("PYTHONPATH", "")}))
''')

#: The app: writes a ``resource.py`` into each folder it is given; reports what each open gave.
PLANTS = textwrap.dedent(r'''
    import errno, json, os, sys
    out = {}
    for folder in json.loads(sys.argv[2]):
        try:
            with open(os.path.join(folder, "resource.py"), "w") as handle:
                handle.write("raise SystemExit('planted')\n")
            out[folder] = "written"
        except OSError as exc:
            out[folder] = errno.errorcode.get(exc.errno, "?")
    open(sys.argv[1], "w").write(json.dumps(out))
''')


def _agent(tmp_path: Path, pythonpath: list, targets: list) -> tuple:
    for name in ("package", "app", "home", "pp"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    (tmp_path / "app" / "app.py").write_text(PLANTS)
    report = tmp_path / "app" / "report.json"
    command = f"{sys.executable} app.py {report} '{json.dumps([str(t) for t in targets])}'"
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "PYTHONPATH")}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath))
    done = subprocess.run([sys.executable, "-c", APP_AGENT, str(tmp_path), command], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path / "home")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), json.loads(report.read_text()), done.stderr


@needs_namespaces
def test_the_app_cannot_plant_a_module_on_the_agents_pythonpath(tmp_path):
    """R03: a folder on the agent's PYTHONPATH (the user's) is read-only to the app."""
    left, seen, _ = _agent(tmp_path, [tmp_path / "pp"], [tmp_path / "pp"])
    assert seen == {str(tmp_path / "pp"): "EROFS"}, seen
    assert not (tmp_path / "pp" / "resource.py").exists()
    assert os.path.realpath(tmp_path / "pp") in left["sys_path"]


@needs_namespaces
def test_an_import_folder_the_app_may_write_is_no_longer_imported_from(tmp_path):
    """The app's own folder on the agent's PYTHONPATH stays writable to the app (its outputs), so the
    agent drops it from its ``sys.path`` and from the PYTHONPATH it hands on, and says so."""
    app = os.path.realpath(tmp_path / "app")
    left, seen, stderr = _agent(tmp_path, [tmp_path / "app", tmp_path / "pp"], [tmp_path / "app"])
    assert seen == {str(tmp_path / "app"): "written"}, seen
    assert app not in left["sys_path"] and app not in [os.path.realpath(p) for p in left["pythonpath"].split(":") if p]
    assert os.path.realpath(tmp_path / "pp") in left["sys_path"] and str(tmp_path / "pp") in left["pythonpath"]
    assert "imports nothing from it" in stderr and app in stderr
