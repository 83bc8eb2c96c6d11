"""``--in-place`` on a Latin-1 kernel whose candidate's docstring Latin-1 cannot hold (red team
#41j, K02): the candidate was written as UTF-8 under the Latin-1 coding line, verified as the
mojibake Python read from it, chosen best, and ``--in-place`` then said "not written: ... is not
the text that was verified (it changed after verification)" though nothing had changed it. Now
such a candidate is refused (INVALID, the encoding and the characters named); a Latin-1 one is
verified and written back into the user's file, in Latin-1."""
from __future__ import annotations

import json

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
HEADER = "# -*- coding: latin-1 -*-\n# Ein Kernel f\xfcr Matrizen, gepr\xfcft (Gr\xf6\xdfe egal)\n"


def _with_doc(source: str, doc: str) -> str:
    lines = source.splitlines(keepends=True)
    return "".join(lines[:2] + [f'    """{doc}"""\n'] + lines[3:])


def test_in_place_on_a_latin1_kernel_refuses_what_latin1_cannot_hold_and_writes_what_it_can(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_bytes((HEADER + gemm_path.read_text()).encode("latin-1"))
    unencodable = _with_doc(catalog_source("grouped-m:8", ARGS), "grouped \u20ac 8 \u4e2d \U0001F600 order")
    latin1 = _with_doc(catalog_source("xcd-grouped-m:8:8", ARGS), "xcd-grouped, \xe9t\xe9 \xa3")
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10,
                             iterations=2, in_place=True)
    outcome = run.start(options, proposer=ScriptedProposer([("euro", unencodable), ("latin", latin1)]))
    assert outcome.status == "finished"
    attempts = outcome.report["attempts"]
    assert [a["verdict"] for a in attempts] == ["INVALID", "PASS"]
    assert "latin-1" in attempts[0]["reason"] and "\u20ac" in attempts[0]["reason"]
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert report["in_place"] == f"wrote the best kernel (latin) into {kernel}"
    written = kernel.read_bytes()
    assert written.startswith(HEADER.encode("latin-1"))
    assert "xcd-grouped, \xe9t\xe9 \xa3".encode("latin-1") in written
    assert "\u20ac".encode("utf-8") not in written
