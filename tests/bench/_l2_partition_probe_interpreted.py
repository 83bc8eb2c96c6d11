"""bench/l2_partition_probe.py under Triton's interpreter (tiny sizes, a fake %smid): each case
reads the chunks it claims, as often as it claims, from the partitions it claims. Run only by
test_l2_partition_probe.py, in a process of its own: TRITON_INTERPRET must be set before triton
is imported, and set inside a pytest worker it turned every later compile test of that worker
into the interpreter's."""
import os

import numpy as np
import pytest

os.environ["TRITON_INTERPRET"] = "1"

from bench.l2_partition_probe import Case, cases, expected_reads, launch  # noqa: E402

BLOCK = 32
L2 = BLOCK * 4 * 16          # a "cache" of 16 chunks: fraction 0.5 -> 8 chunks


def _run(case, parts=(0, 1, 0, 1)):
    r = launch(case, L2, parts, device="cpu", on_gpu=False, programs=8, count=True, block=BLOCK, max_polls=50)
    return {k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in r.items()}


@pytest.mark.parametrize("case", [c for c in cases() if (c.fraction <= 0.5 or c.name == "distinct") and c.readers <= 4],
                         ids=lambda c: c.name)     # (8 programs here, 4 of them in partition 0)
def test_every_chunk_is_read_as_often_as_the_case_claims(case):
    parts = (1, 0, 1, 0) if case.name.startswith("far-A1") else (0, 1, 0, 1)   # the interpreter runs pid 0 first
    r = _run(case, parts)
    n = r["n_chunks"]
    assert n % 2 == 0 and n == max(2, round(case.fraction * 16 / 2) * 2)
    assert r["count"].tolist() == expected_reads(case, n).tolist()
    assert r["flag"].sum() == 0                                   # no phase-B program gave up
    chunks = r["src"].reshape(n, BLOCK)
    want = (expected_reads(case, n)[:, None] * chunks).sum(axis=0)
    got = r["out"].reshape(8, BLOCK).sum(axis=0)                  # every program's sums, added
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_one_half_reads_only_from_its_partition_and_split_halves_are_disjoint():
    one = _run(Case("one", 0.5, 1, False, 2))
    assert one["queue"][1] == 0 and one["queue"][0] > 2 * one["n_chunks"]   # partition 1 took no ticket
    out = one["out"].reshape(8, BLOCK)
    assert np.all(out[1::2] == 0)                                  # programs on partition-1 SMs read nothing
    split = _run(Case("split", 0.5, 3, True, 1))
    assert split["count"].tolist() == [1] * split["n_chunks"]
    assert split["queue"][0] > 0 and split["queue"][1] > 0


def test_phase_b_waits_for_phase_a_then_reads_the_whole_buffer():
    r = _run(Case("far", 0.25, 1, False, 1, 2, 2))
    assert r["done"][0] == r["target_a"] == r["n_chunks"]
    assert r["count"].tolist() == [3] * r["n_chunks"]
    stuck = _run(Case("far", 0.25, 1, False, 1, 2, 1), parts=(1, 0, 1, 0))  # phase B first: it gives up
    assert stuck["flag"].sum() >= 1


@pytest.mark.parametrize("readers", [1, 2, 4])
def test_together_n_the_first_n_programs_of_partition_0_each_read_every_chunk(readers):
    r = _run(Case(f"together-{readers}", 0.25, 0, False, 0, readers=readers))
    n = r["n_chunks"]
    assert r["count"].tolist() == [readers] * n
    assert r["queue"][0] == 4                                      # every partition-0 program took a ticket
    out = r["out"].reshape(8, BLOCK)
    assert np.all(out[1::2] == 0)                                  # partition 1 read nothing
    readers_done = [i for i in range(0, 8, 2) if np.any(out[i] != 0)]
    assert len(readers_done) == readers                           # and only N of partition 0's
    np.testing.assert_allclose(out.sum(axis=0), readers * r["src"].reshape(n, BLOCK).sum(axis=0), rtol=1e-5)


def test_the_case_list_is_what_the_module_says():
    names = [c.name for c in cases()]
    assert len(names) == len(set(names)) == 1 + 3 * 8 + 6 + 7
    assert names[-7:] == [f"together-{n}" for n in (1, 2, 4, 8, 16, 32, 64)]
    assert {"one-0.5", "split-1.0", "shared-1.5", "far-A0-B1", "far-A1-B0"} <= set(names)
