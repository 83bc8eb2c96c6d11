"""``swizzleperf notebook [RUN]``: notebooks/reflection_history.ipynb executed headless (nbclient)
on one run, without Jupyter: an executed copy is written (``--out``) and the text of its outputs is
printed, one section per heading.

RUN is a run id of the record, or a run folder (a committed one keeps only ``report.json`` and
``transcript.jsonl``); a relative path is taken from the directory the command runs in and handed
to the notebook's kernel as an absolute one, so the notebook's own folder does not matter.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

#: The notebook as the repository ships it (beside the packages' folders).
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "reflection_history.ipynb"


class NotebookError(Exception):
    """The notebook cannot be run (missing, or a cell failed); one line for the user."""


def execute(run: str | None, workdir: str | None, out: Path, timeout_s: float = 300.0) -> list:
    """Execute the notebook on ``run`` (a run id or folder; None: the latest of the record) and
    ``workdir`` (None: the record found from here), write the executed copy to ``out``; returns
    the text lines of its outputs, a ``## heading`` before each section.

    Raises:
        NotebookError: no notebook here, no kernel, or a cell failed (its error's last line).
    """
    import nbformat
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    from swizzleperf.sandbox import app_env
    from swizzleperf.sandbox.write_back import replace_file

    if not NOTEBOOK.exists():
        raise NotebookError(f"{NOTEBOOK} is not there: the notebook comes with the repository's "
                            f"checkout (pip install -e .), not with a wheel")
    for path in (p for p in (_absolute(run), _absolute(workdir)) if p and os.sep in p):
        if not Path(path).exists():
            raise NotebookError(f"no run folder or workdir {path}")
    # The kernel runs the notebook's cells with this environment, in the folder the command runs
    # in, which the user's --app may have written: without the agent's credentials (sandbox.app_env)
    # and importing nothing from that folder (PYTHONSAFEPATH, ipykernel's ignore_cwd; #41 round
    # fourteen: a pandas.py an app left there read OPENAI_API_KEY).
    env = {**app_env(), "PYTHONSAFEPATH": "1"}
    for name, value in (("SWIZZLEPERF_RUN", _absolute(run)), ("SWIZZLEPERF_WORKDIR", _absolute(workdir))):
        env.pop(name, None)
        if value:
            env[name] = value
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(Path.cwd())}},
                            extra_arguments=["--IPKernelApp.log_level=ERROR",   # not its transport warning
                                             "--IPKernelApp.ignore_cwd=True"])
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        raise NotebookError(f"the notebook stopped: {_last_line(exc)} (the executed copy, error "
                            f"included: {out})") from None
    except (DeadKernelError, NoSuchKernel) as exc:
        raise NotebookError(f"no Python kernel to run the notebook ({exc}): pip install ipykernel") from None
    finally:
        out.parent.mkdir(parents=True, exist_ok=True)
        # a new file renamed over the name: never written through a link planted there
        replace_file(out, nbformat.writes(nb).encode())
    return text_of(nb)


def _absolute(path: str | None) -> str | None:
    """A path given to the command, made absolute from here; a run id as it is."""
    if path and (os.sep in path or "/" in path or Path(path).exists()):
        return str(Path(path).expanduser().resolve())
    return path


def _last_line(exc: Exception) -> str:
    """The error's last line, without the terminal colours IPython puts in it."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def text_of(nb) -> list:
    """The executed notebook as text: each markdown cell's heading, each code cell's printed
    output and plain-text results (tables as pandas prints them; figures named, not drawn)."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = next((line for line in cell.source.splitlines() if line.startswith("#")), None)
            if heading:
                lines += ["", heading]
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                lines += output.get("text", "").rstrip("\n").splitlines()
            data = output.get("data", {})
            if "text/plain" in data and "image/png" not in data:
                lines += data["text/plain"].splitlines()
            elif "image/png" in data:
                lines.append("(a figure: open the executed notebook to see it)")
    return lines
