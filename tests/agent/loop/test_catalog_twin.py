"""A proposal whose tile map is a catalog order the run ranked for its prompt is credited to the
catalog, not to the proposer (DEVELOPERS.md: an LLM's result is credited to it only for what the
prompt did not hand it). A real Qwen2.5-Coder-1.5B run of 2026-12-07 copied the prompt's
grouped-n:32 code verbatim and its report, console and eval table said `best: llm`."""
from __future__ import annotations

import json
from pathlib import Path

from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.report import md_text
from swizzleperf.agent.proposers.base import Proposal
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
OWN = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Rows in bands of 3 (no catalog order)."""
    band = pid // (3 * num_pid_n)
    rows = tl.minimum(num_pid_m - band * 3, 3)
    return band * 3 + pid % rows, (pid % (3 * num_pid_n)) // rows
'''


class _ReadsItsPrompt:
    """Renders the prompt's evidence (the catalog ranked) as an LLM proposer does, then proposes
    a copy of the catalog's grouped-m:8 under the name "llm", then an order of its own."""

    def __init__(self):
        self.turn = 0

    def describe(self) -> str:
        return "reads-its-prompt"

    def propose(self, context) -> Proposal:
        context.evidence()
        self.turn += 1
        source = catalog_source("grouped-m:8", ARGS) if self.turn == 1 else OWN
        return Proposal(source=source.replace('"""', '"""Mine: ', 1) if self.turn == 1 else source, name="llm",
                        rationale="")


def test_a_copied_catalog_order_is_named_as_the_catalogs(tmp_path, gemm_path):
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    outcome = run.start(run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=2,
                                       plateau=10), proposer=_ReadsItsPrompt())
    report = json.loads((outcome.run_dir / "report.json").read_text())
    first, second = report["attempts"]
    assert first["verdict"] == "PASS" and first["catalog_twin"] == "grouped-m:8", first
    assert second["verdict"] == "PASS" and second["catalog_twin"] is None, second
    text = Path(outcome.run_dir / "report.md").read_text()
    assert md_text("llm (= the catalog's grouped-m:8, ranked in its prompt)") in text, text
