"""Block pointers under Triton's interpreter: on a Triton without them (3.9 removed them) through
agent/capture/cuda_on_cpu.py's ``interpreter_block_pointers``, on one with them (3.6, the GPU
machines' image) natively; the same kernels, the same expectations, each against torch on fresh
random inputs with the output poisoned (NaN) first; and a pointer argument with no storage
(``interpreter_storageless_arguments``), which neither Triton's interpreter takes by itself. Run only
by test_block_pointers.py, in a process of its own (TRITON_INTERPRET must be set before triton is
imported), under each Triton."""
import inspect
import os

import pytest
import torch

os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from swizzleperf.agent.capture.cuda_on_cpu import interpreter_block_pointers  # noqa: E402
from swizzleperf.kernels.interpreter import interpreter_scalar_index  # noqa: E402

interpreter_scalar_index()   # range(tl.cdiv(K, BK)) under Triton 3.6's interpreter with NumPy 2.4 or later

NATIVE = "boundary_check" in inspect.signature(tl.core.load).parameters   # Triton's own block pointers
EMULATED = interpreter_block_pointers()


def test_emulated_exactly_where_the_installed_triton_lacks_block_pointers():
    assert EMULATED is (not NATIVE)
    major, minor = (int(v) for v in triton.__version__.split(".")[:2])
    assert NATIVE is ((major, minor) < (3, 9))   # 3.9 removed them (triton-lang/triton#10833)
    load = tl.core.load
    assert interpreter_block_pointers() is EMULATED and tl.core.load is load   # a second call changes nothing


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(sbk, sbn), offsets=(0, pid_n * BN),
                          block_shape=(BK, BN), order=(0, 1))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.dot(tl.load(a, boundary_check=(0, 1), padding_option="zero"), tl.load(b, boundary_check=(0, 1)))
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("transposed", [False, True], ids=["row-major-b", "column-major-b"])
def test_a_gemm_with_ragged_edges_and_advance(transposed):
    torch.manual_seed(1)
    M, N, K = 70, 50, 40                       # no multiple of any block: every edge is ragged
    a = torch.randn(M, K)
    b = torch.randn(N, K).t() if transposed else torch.randn(K, N)
    c = torch.full((M, N), float("nan"))
    _matmul[(triton.cdiv(M, 32), triton.cdiv(N, 16))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                                       BM=32, BN=16, BK=16)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@triton.jit
def _copy_padded(x_ptr, out_ptr, n, BLOCK: tl.constexpr, NAN: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (pid * BLOCK,), (BLOCK,), (0,))
    if NAN:
        x = tl.load(src, boundary_check=(0,), padding_option="nan")
    else:
        x = tl.load(src, boundary_check=(0,), padding_option="zero")
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), x)


@pytest.mark.parametrize("nan", [False, True], ids=["zero", "nan"])
def test_a_1d_load_past_the_end_gives_the_padding(nan):
    x = torch.randn(100)
    out = torch.full((128,), 7.0)
    _copy_padded[(2,)](x, out, 100, BLOCK=64, NAN=nan)
    assert torch.equal(out[:100], x)
    assert (out[100:].isnan().all() if nan else (out[100:] == 0).all())


@triton.jit
def _reverse_cumsum(x_ptr, out_ptr, T, D, BT: tl.constexpr, BD: tl.constexpr):
    """Each program walks its column block from the last row block back to the first (a negative
    advance, the reversed cumulative sums of chunked attention kernels), rows checked only."""
    i_d = tl.program_id(0)
    start = (tl.cdiv(T, BT) - 1) * BT
    src = tl.make_block_ptr(x_ptr, (T, D), (D, 1), (start, i_d * BD), (BT, BD), (1, 0))
    dst = tl.make_block_ptr(out_ptr, (T, D), (D, 1), (start, i_d * BD), (BT, BD), (1, 0))
    carry = tl.zeros((BD,), dtype=tl.float32)
    for _ in range(0, tl.cdiv(T, BT)):
        x = tl.load(src, boundary_check=(0,), padding_option="zero")
        total = tl.sum(x, axis=0)
        suffix = total[None, :] - tl.cumsum(x, axis=0) + x + carry[None, :]
        tl.store(dst, suffix, boundary_check=(0,))
        carry += total
        src = tl.advance(src, (-BT, 0))
        dst = tl.advance(dst, (-BT, 0))


def test_a_negative_advance_with_one_dimension_checked():
    T, D = 45, 32                              # D a multiple of BD: the columns need no check
    x = torch.randn(T, D)
    out = torch.full((T, D), float("nan"))
    _reverse_cumsum[(D // 16,)](x, out, T, D, BT=16, BD=16)
    torch.testing.assert_close(out, x.flip(0).cumsum(0).flip(0), rtol=1e-4, atol=1e-4)


@triton.jit
def _batched_scale(x_ptr, out_ptr, B, T, D, sb, st, sd, BT: tl.constexpr, BD: tl.constexpr):
    """A 3-D block (one batch entry, rows, columns) whose offsets come from program ids and a scalar
    tensor argument's multiple."""
    i_b, i_t, i_d = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    src = tl.make_block_ptr(x_ptr, (B, T, D), (sb, st, sd), (i_b, i_t * BT, i_d * BD), (1, BT, BD), (2, 1, 0))
    dst = tl.make_block_ptr(out_ptr, (B, T, D), (sb, st, sd), (i_b, i_t * BT, i_d * BD), (1, BT, BD), (2, 1, 0))
    x = tl.load(src, boundary_check=(1, 2))
    tl.store(dst, x * 2.0 + i_b, boundary_check=(0, 1, 2))


def test_a_3d_block_with_a_batch_dimension():
    x = torch.randn(3, 40, 37)
    out = torch.full((3, 40, 37), float("nan"))
    _batched_scale[(3, triton.cdiv(40, 16), triton.cdiv(37, 16))](x, out, 3, 40, 37, *x.stride(), BT=16, BD=16)
    torch.testing.assert_close(out, x * 2.0 + torch.arange(3.0)[:, None, None])


@triton.jit
def _plain_with_boundary_check(x_ptr, BLOCK: tl.constexpr):
    tl.load(x_ptr + tl.arange(0, BLOCK), boundary_check=(0,))


@triton.jit
def _block_with_mask(x_ptr, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (BLOCK,), (1,), (0,), (BLOCK,), (0,))
    tl.load(src, mask=tl.arange(0, BLOCK) < 3)


@pytest.mark.parametrize("kernel", [_plain_with_boundary_check, _block_with_mask], ids=["plain", "masked-block"])
def test_what_triton_refuses_is_refused(kernel):
    with pytest.raises(Exception):
        kernel[(1,)](torch.randn(16), BLOCK=16)


@triton.jit
def _cast_to_the_pointers_type(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    dst = tl.make_block_ptr(out_ptr, (n,), (1,), (tl.program_id(0) * BLOCK,), (BLOCK,), (0,))
    x = tl.load(src, boundary_check=(0,)).to(tl.float32) * 3.0
    tl.store(dst, x.to(dst.dtype.element_ty), boundary_check=(0,))
    tl.store(dst, x.to(dst.type.element_ty), boundary_check=(0,))


def test_a_value_cast_to_the_block_pointers_element_type():
    x = torch.randn(100).to(torch.float16)
    out = torch.full((100,), float("nan"), dtype=torch.float16)
    _cast_to_the_pointers_type[(2,)](x, out, 100, BLOCK=64)
    torch.testing.assert_close(out, (x.float() * 3.0).half())


class _Reversed:
    """What compiled Triton reads of a tensor argument, and no storage (FlagGems' StridedBuffer): the
    elements of ``base`` last to first, a view torch cannot make (a negative stride)."""

    def __init__(self, base):
        self.base, self.dtype, self.device = base, base.dtype, base.device
        self.shape, self.stride = base.shape, (-1,)

    def data_ptr(self):
        return self.base.data_ptr() + (self.base.numel() - 1) * self.base.element_size()


@triton.jit
def _strided_copy(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n), mask=offs < n)


def test_a_pointer_argument_without_storage_is_passed_as_its_address():
    from swizzleperf.agent.capture.cuda_on_cpu import interpreter_storageless_arguments
    assert interpreter_storageless_arguments()
    base = torch.randn(100)
    out = torch.full((100,), float("nan"))
    _strided_copy[(2,)](_Reversed(base), out, 100, -1, BLOCK=64)
    assert torch.equal(out, base.flip(0))


@triton.jit
def _offset_near_2_31(x_ptr, out_ptr, OFF, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr - OFF, (n,), (1,), (OFF,), (BLOCK,), (0,))   # OFF + i passes 2**31
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(src, boundary_check=(0,), padding_option="zero"))


def test_an_offset_near_2_31_plus_the_block_index_does_not_wrap():
    x = torch.arange(16, dtype=torch.float32) + 1
    out = torch.full((16,), -1.0)
    _offset_near_2_31[(1,)](x, out, 2 ** 31 - 8, 2 ** 31 + 8, BLOCK=16)
    assert torch.equal(out, x)


@triton.jit
def _bool_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    x = tl.load(src, boundary_check=(0,), padding_option="zero")
    tl.store(out_ptr + tl.arange(0, BLOCK), x + x)        # int8 arithmetic, as Triton reads an int1 block


def test_a_bool_block_reads_bytes():
    out = torch.full((16,), -1, dtype=torch.int32)
    _bool_block[(1,)](torch.tensor([True, False] * 8), out, 16, BLOCK=16)
    assert out.tolist() == [2, 0] * 8


@triton.jit
def _method_store_and_block_type(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    dst = tl.make_block_ptr(out_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    acc = tl.zeros(dst.type.element_ty.shape, dtype=tl.float32) + tl.load(src, boundary_check=(0,)).to(tl.float32)
    dst.store((acc * 2).to(dst.dtype.element_ty.element_ty), boundary_check=(0,))


def test_the_store_method_and_the_block_type_of_a_block_pointer():
    x = torch.randn(10).half()
    out = torch.full((10,), float("nan")).half()
    _method_store_and_block_type[(1,)](x, out, 10, BLOCK=16)
    assert torch.equal(out, (x.float() * 2).half())


@triton.jit
def _store_of_another_type(out_ptr, n, BLOCK: tl.constexpr):
    dst = tl.make_block_ptr(out_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    tl.store(dst, tl.zeros((BLOCK,), dtype=tl.float32), boundary_check=(0,))


@triton.jit
def _nan_padding_of_ints(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(src, boundary_check=(0,), padding_option="nan"))


@triton.jit
def _not_an_order(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (BLOCK, BLOCK), (1, 1))
    tl.store(out_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], tl.load(src))


@pytest.mark.parametrize("case", ["store-of-another-type", "nan-padding-of-ints", "not-an-order"])
def test_what_triton_refuses_of_block_pointers_is_refused(case):
    """As Triton 3.8 and earlier check them: a kernel verified here must not fail on a GPU for them."""
    with pytest.raises(Exception):
        if case == "store-of-another-type":
            _store_of_another_type[(1,)](torch.zeros(16).half(), 16, BLOCK=16)
        elif case == "nan-padding-of-ints":
            _nan_padding_of_ints[(1,)](torch.zeros(16, dtype=torch.int32), torch.zeros(16, dtype=torch.int32), 16,
                                       BLOCK=16)
        else:
            _not_an_order[(1,)](torch.zeros(16), torch.zeros(16), 4, BLOCK=4)
