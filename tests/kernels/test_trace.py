"""kernels/trace.py's bound on a trace's size (#41): an access model asked for tiles so small that
its trace would not fit (the default GEMM at 1 x 1 x 1 tiles: 268 M programs of 8 194 accesses)
took minutes and gigabytes to end in a MemoryError; now each model refuses before it allocates,
in one line that gives the count and the bound, and every model at its default meta-parameters
still fits."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from swizzleperf.agent.verification.load import load_spec
from swizzleperf.kernels.trace import MAX_ACCESSES, TraceTooLarge, check_size, new_keys

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
MODELLED = sorted(p.stem for p in KERNELS.glob("*.py") if "SPEC = KernelSpec(" in p.read_text())
EXTENT = re.compile(r"BLOCK(_SIZE)?(_[A-Z])?")


def test_new_keys_within_the_bound_is_padding():
    keys = new_keys(3, 2, 4)
    assert keys.shape == (3, 2, 4) and keys.dtype.name == "int64" and (keys == -1).all()


@pytest.mark.parametrize("shape", [(MAX_ACCESSES + 1, 1, 1), (1 << 20, 1 << 20, 1 << 20), (8192, 4097, 2)])
def test_new_keys_past_the_bound_allocates_nothing(shape):
    start = time.process_time()
    with pytest.raises(TraceTooLarge) as caught:
        new_keys(*shape)
    assert time.process_time() - start < 0.1
    message = str(caught.value)
    assert f"{shape[0]:,} programs x {shape[1] * shape[2]:,} access" in message, message
    assert f"more than the simulator's bound of {MAX_ACCESSES:,} accesses" in message and "\n" not in message


def test_the_bound_itself_is_accepted():
    check_size(MAX_ACCESSES, 1)
    check_size(1, MAX_ACCESSES)
    with pytest.raises(TraceTooLarge, match="at least 1 access"):
        check_size(MAX_ACCESSES + 1, 1, at_least=True)


@pytest.mark.parametrize("kernel", MODELLED)
def test_each_access_model_refuses_one_element_tiles_before_it_allocates(kernel):
    """Every extent at 1, at the default problem: millions of programs, each of several accesses."""
    spec = load_spec(KERNELS / f"{kernel}.py")
    meta = {k: 1 if EXTENT.fullmatch(k) else v for k, v in spec.meta.items()}
    start = time.process_time()
    with pytest.raises(TraceTooLarge):
        spec.trace(spec.problems["default"], meta)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize("kernel", MODELLED)
def test_each_access_model_at_its_default_meta_fits(kernel):
    spec = load_spec(KERNELS / f"{kernel}.py")
    assert spec.trace(spec.problems["default"], spec.meta).keys.size <= MAX_ACCESSES // 8
