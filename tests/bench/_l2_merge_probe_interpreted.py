"""bench/l2_merge_probe.py under Triton's interpreter (tiny sizes, a fake %smid = pid % SMs): each
case's reader SMs, and only they, read every chunk once. Run only by test_l2_merge_probe.py, in a
process of its own (TRITON_INTERPRET must be set before triton is imported)."""
import os

import numpy as np
import pytest

os.environ["TRITON_INTERPRET"] = "1"

from bench.l2_merge_probe import Case, cases, launch, n_chunks_for  # noqa: E402

BLOCK = 64                    # a TMA row of BLOCK // 16 fp32: 16 bytes, the least a stride may be
SMS = 6
L2 = BLOCK * 4 * 16 * 8      # FRACTION 1/16 of it: 8 chunks


@pytest.mark.parametrize("case", [c for c in cases(SMS, group0=[0, 1, 2, 3, 4, 5]) if not c.name.startswith("delay-16")],
                         ids=lambda c: c.name)
def test_each_reader_sm_reads_every_chunk_once_and_no_other_sm_reads(case):
    r = launch(case, L2, SMS, device="cpu", on_gpu=False, count=True, block=BLOCK)
    assert r["cycles"].sum() == 0              # no clock in the interpreter
    n = r["n_chunks"]
    assert n == n_chunks_for(L2, BLOCK) == 8
    readers = len(case.delays) - len(case.noise)
    assert r["count"].tolist() == [readers] * n + [1] * (n * len(case.noise))   # each noise reader its own buffer
    tickets = r["tickets"].tolist()            # 2 programs per SM: both reach the ticket of a reader SM
    assert [t > 0 for t in tickets] == [sm in case.delays for sm in range(SMS)]
    sums = r["out"].numpy().reshape(2 * SMS, BLOCK)
    chunks = r["src"].numpy().reshape(-1, n, BLOCK)
    for pid in range(2 * SMS):
        sm, first = pid % SMS, pid < SMS      # the interpreter runs programs in id order
        region = 1 + case.noise.index(sm) if sm in case.noise else 0
        expected = chunks[region].sum(axis=0) if (sm in case.delays and first) else np.zeros(BLOCK)
        np.testing.assert_allclose(sums[pid], expected, rtol=1e-5)


def test_a_case_of_an_sm_not_reading_reads_nothing():
    r = launch(Case("none", {}), L2, SMS, device="cpu", on_gpu=False, count=True, block=BLOCK)
    assert r["count"].sum() == 0 and r["out"].abs().sum() == 0
