"""bench/real_llm_summary.py: where a model's verified candidates come from, against the prompt that
asked for each (a copy of a printed source, one constant changed, or not in the prompt)."""
import shutil
from pathlib import Path

import pytest

from bench import real_llm_summary as summary

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "bench" / "results" / "real_llm" / "work" / "runs"
GROUPED = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """grouped-n with groups of 32 tile columns."""
    GROUP_SIZE_N: tl.constexpr = 32
    pid_n = (pid % GROUP_SIZE_N)
    return pid // GROUP_SIZE_N, pid_n
'''
PROMPT = f"""## What the simulator predicts for known orders

| order | predicted L2 hit rate | predicted DRAM | tried |
|---|---|---|---|
| row-major | 81.1 % | 768 MiB | the baseline |
| grouped-n:32 | 84.0 % | 768 MiB | no |

`grouped-n:32`:

```python
{GROUPED}```

### Attempt 2: llm: PASS

```python
@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    return pid % num_pid_m, pid // num_pid_m
```
"""


@pytest.mark.parametrize("source, kind, of, change", [
    (GROUPED.replace('"""grouped-n with groups of 32 tile columns."""', '"""mine"""').replace("    ", "  "),
     "copy", "grouped-n:32", ""),
    (GROUPED.replace("= 32", "= 16"), "one constant", "grouped-n:32", "32 -> 16"),
    (GROUPED.replace("= 32", "= 16").replace("pid // GROUP", "pid * 2 // GROUP"), "not in the prompt", "", ""),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return (pid % num_pid_m, pid // num_pid_m)\n",
     "not in the prompt", "", ""),            # the attempt's code with brackets added is another token list
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid % num_pid_m, pid // num_pid_m\n",
     "copy", "attempt 2", ""),
])
def test_a_candidate_is_classified_against_the_sources_of_its_prompt(source, kind, of, change):
    found = summary.classify(source, summary.prompt_sources([PROMPT]))
    assert (found["kind"], found["of"], found["change"]) == (kind, of, change)


def test_the_top_ranked_untried_order_is_read_from_the_ranking_table():
    assert summary.top_untried([PROMPT]) == "grouped-n:32"
    assert summary.top_untried(["no table here"]) == ""


def test_the_committed_gemm_run_is_catalog_orders_only(tmp_path):
    """Qwen's 8-iteration gemm run (2026-11-24): 5 verified, 3 copies of the prompt's catalog
    sources, 2 with one constant changed, none of its own; its best is iteration 1's copy of the
    top-ranked untried order."""
    shutil.copytree(RUNS / "20261124-012842-ba04", tmp_path / "runs" / "20261124-012842-ba04")
    rows = [r for r in summary.provenance(tmp_path / "runs" / "20261124-012842-ba04") if r["verdict"] == "PASS"]
    assert [r["kind"] for r in rows] == ["copy", "copy", "one constant", "one constant", "copy"]
    lines, totals = summary.provenance_table([tmp_path])
    assert totals["on"] == {"copy": 3, "one constant": 2, "not in the prompt": 0, "verified": 5, "proposed": 7,
                            "own": 2}     # iterations 6 and 8: NOT_PERMUTATION, code of its own
    assert "#1 84.0%: a copy of grouped-n:32; the prompt's top-ranked untried order: grouped-n:32" in lines[-1]
