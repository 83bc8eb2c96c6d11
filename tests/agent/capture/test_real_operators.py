"""Real operators through ``--app`` on a CPU (issue #42, items 3 and 4), each idiom in a tiny app
of our own written the way operator suites write theirs (one file: kernel, wrapper, then the
test at module level, on CUDA tensors):

- the CUDA app runs as it is with no GPU (agent/capture/cuda_on_cpu.py), and says so;
- the generated copy of such a file does not run the app's test when imported
  (agent/capture/app_code.py): autotuned or not, it loads and its baseline verifies;
- a construct the installed Triton lacks is named with the versions that have it
  (agent/capture/interpreter_gaps.py), but for block pointers, which run as the pointer blocks they
  stand for where Triton 3.9 removed them;
- outputs the kernel does not fully overwrite (skipped blocks over a NaN-holding buffer, ``+=``,
  ``atomic_add``) start from the captured contents and the unmodified kernel passes.

Every app runs under the interpreter on the CPU (the ``cpu_only`` fixture: no GPU, nothing
exported), a few seconds each.
"""
from __future__ import annotations

import ast
import sys
import textwrap

import pytest
import triton
import triton.language as tl

from swizzleperf.agent.capture import capture_hook, user_kernel
from swizzleperf.agent.capture.app_code import app_statements
from swizzleperf.agent.capture.capture import CaptureError, capture
from swizzleperf.agent.capture.cuda_on_cpu import NOTICE, SCREEN_LINE
from swizzleperf.agent.capture.interpreter_gaps import missing_construct
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify


@pytest.fixture
def cpu_only(monkeypatch):
    """A CPU-only machine with nothing exported: no TRITON_INTERPRET, no GPU for the app either."""
    import swizzleperf.hwspecs
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(swizzleperf.hwspecs, "detect_device", lambda: None)


def _app(folder, text: str):
    path = folder / "op.py"
    path.write_text(textwrap.dedent(text))
    return f"{sys.executable} {path}"


ADD = '''
import torch
import triton
import triton.language as tl


def is_cuda():   # the Triton tutorials' test, at import: Triton's driver has no GPU to find here
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


{decorator}
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    assert x.is_cuda and y.is_cuda
    out = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, out, x.numel(){block})
    return out


def test_add():
    torch.cuda.set_device(0)
    with torch.cuda.device(0):
        x = torch.randn(1000, device="cuda")
        y = torch.randn(1000).cuda()
        z = torch.ones(1000).to("cuda:0")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = add(x, y)
    end.record()
    torch.cuda.synchronize()
    assert start.elapsed_time(end) >= 0
    torch.set_default_device("cuda")
    w = torch.zeros(3)
    assert w.is_cuda and z.is_cuda
    torch.testing.assert_close(out, x + y)
    return {{"out": out}}


result_gold = test_add()
print("add OK")
'''
PLAIN = ADD.format(decorator="", block=", BLOCK=128")
AUTOTUNED = ADD.format(decorator="@triton.autotune(configs=[triton.Config({'BLOCK': 64}), "
                                 "triton.Config({'BLOCK': 128})] if is_cuda() else [], key=['n'])", block="")


def test_a_cuda_app_runs_on_the_cpu_and_says_so(cpu_only, tmp_path):
    """``device="cuda"``, ``.cuda()``, ``.to("cuda:0")``, ``is_cuda``, ``torch.cuda.synchronize``,
    ``set_device``, ``device(0)``, ``Event`` timing and ``set_default_device("cuda")``: all on the
    CPU, said once on the app's stderr and in the capture's record (the CLI's line)."""
    captured = capture(_app(tmp_path, PLAIN), "add_kernel", tmp_path / "captures")
    log = (captured.folder / "app.log").read_text()
    assert "add OK" in log and log.count(NOTICE) == 1
    assert captured.launch["cuda_on_cpu"] == SCREEN_LINE
    assert captured.launch["grid"] == [8] and captured.launch["interpreter"] is True


@pytest.mark.parametrize("text", [PLAIN, AUTOTUNED], ids=["jit", "autotuned"])
def test_a_one_file_operator_is_generated_without_its_test_and_its_baseline_passes(cpu_only, tmp_path, text):
    """The generated copy leaves the module-level test out: importing it ran the app's test on
    CUDA tensors before ('failed to import: RuntimeError: 0 active drivers' in the agent's process,
    where the interpreter is not on), autotuned or not; the autotuned app picks its configs by
    ``is_cuda()`` at import, which Triton's driver answers in the app and in the copy."""
    prepared = user_kernel.prepare(_app(tmp_path, text), "add_kernel", tmp_path / "work")
    generated = prepared.module_path.read_text()
    assert "result_gold = test_add()" not in generated and user_kernel.APP_CODE_LINE in generated
    assert "result_gold = test_add()" in prepared.user_file.read_text()   # the user's file keeps it
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_app_statements_are_the_run_not_the_definitions():
    source = textwrap.dedent('''
        import torch
        import triton
        SIZE = 64
        UNUSED = 3
        Shape = tuple
        configs = make_configs()
        layer = Op.apply
        torch.manual_seed(0)

        def make_configs():
            return [SIZE]

        class Op:
            @staticmethod
            def apply(x: Shape):
                return layer, configs

        def test_op():
            return Op.apply(1)

        x = torch.randn(4, device="cuda")
        result = test_op()
        print(result)
        torch.cuda.synchronize()
        if __name__ == "__main__":
            test_op()
    ''')
    tree = ast.parse(source)
    dropped = [ast.unparse(s) for s in app_statements(tree)]
    assert dropped == ["UNUSED = 3", "x = torch.randn(4, device='cuda')", "result = test_op()", "print(result)",
                       "torch.cuda.synchronize()"]


def test_a_functions_own_locals_keep_no_module_level_statement():
    """A kernel's local ``a`` reads no global ``a``: the app's ``a, b = torch.randn(..., device="cuda")``
    below it is the app's run (it was kept, and importing the generated copy on a CPU failed: "Torch
    not compiled with CUDA enabled"); what a function reads from the module (its decorator's and
    defaults' names, a name it declares ``global``, any other free name) keeps its binding."""
    tree = ast.parse(textwrap.dedent('''
        import torch
        G = 3
        D = 16
        H = 0
        c = 5
        x = 7

        @deco(G)
        def kernel(a_ptr, BLOCK: tl.constexpr = D):
            global H
            a = tl.load(a_ptr)
            b = [x for x in range(a)]
            return a + b + c + H

        a, b = torch.randn(4, device="cuda"), 2
        kernel[(1,)](a)
    '''))
    assert [ast.unparse(s) for s in app_statements(tree)] == [
        "x = 7", "a, b = (torch.randn(4, device='cuda'), 2)", "kernel[1,](a)"]


@pytest.mark.parametrize("source, dropped", [
    # a nested def's own locals are not the enclosing function's: scale still reads the module's BLOCK
    ("def scale(xs):\n    def grid(meta):\n        BLOCK = meta['BLOCK']\n        return (BLOCK,)\n"
     "    return [x * BLOCK for x in xs], grid\nBLOCK = 4\nresult = scale([1, 2])\n", ["result = scale([1, 2])"]),
    # a nested global read is not hidden by the enclosing function's local of the same name
    ("def outer():\n    table = {}\n    def get():\n        global table\n        return table\n"
     "    return get(), table\ntable = {'k': 1}\nresult = outer()\n", ["result = outer()"]),
    # x += 1 reads x
    ("def bump():\n    global calls\n    calls += 1\ncalls = 0\nresult = bump()\n", ["result = bump()"]),
    # a walrus in a comprehension and a match capture bind in the function: the module's name is the app's run
    ("import torch\ndef first_negative(xs):\n    if any((bad := v) < 0 for v in xs):\n        return bad\n"
     "bad = torch.randn(4, device='cuda')\nfirst_negative([1, -2])\n",
     ["bad = torch.randn(4, device='cuda')", "first_negative([1, -2])"]),
    ("import torch\ndef pick(cfg):\n    match cfg:\n        case {'block': block}:\n            return block\n"
     "block = torch.randn(4, device='cuda')\npick({'block': 1})\n",
     ["block = torch.randn(4, device='cuda')", "pick({'block': 1})"]),
], ids=["nested-def", "nested-global", "augmented", "walrus", "match"])
def test_python_scoping_decides_what_the_kept_code_reads(source, dropped):
    assert [ast.unparse(s) for s in app_statements(ast.parse(source))] == dropped


BLOCK_POINTER_APP = '''
import torch, triton, triton.language as tl

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BN), pid % tl.cdiv(N, BN)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.dot(tl.load(a, boundary_check=(0, 1), padding_option="zero"), tl.load(b, boundary_check=(0, 1)))
        a = tl.advance(a, (0, BK))
        b = tl.advance(b, (BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c, acc.to(c.dtype.element_ty), boundary_check=(0, 1))

a, b = torch.randn(70, 40, device="cuda"), torch.randn(40, 50, device="cuda")
c = torch.empty(70, 50, device="cuda")
matmul_kernel[(triton.cdiv(70, 32) * triton.cdiv(50, 16),)](a, b, c, 70, 50, 40, *a.stride(), *b.stride(),
                                                            *c.stride(), BM=32, BN=16, BK=16)
assert torch.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
'''


def test_a_block_pointer_app_runs_on_a_cpu_and_its_capture_verifies(cpu_only, tmp_path):
    """Triton 3.9 removed block pointers (tl.make_block_ptr, tl.advance, boundary_check); under the
    interpreter they run as the pointer blocks they stand for (cuda_on_cpu.interpreter_block_pointers),
    in the app's process and in verification's, so the app's own check passes and so does the
    unmodified kernel's verification. Under a Triton that has them, they are its own."""
    app = _app(tmp_path, BLOCK_POINTER_APP)
    prepared = user_kernel.prepare(app, "matmul_kernel", tmp_path / "work")
    assert prepared.capture.launch["grid"] == [12]
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_a_construct_the_app_catches_the_failure_of_is_named_too(cpu_only, tmp_path):
    """An app that catches its kernel's failure and goes on: every launch failed, and why."""
    app = _app(tmp_path, '''
        import torch, triton, triton.language as tl

        @triton.jit
        def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
            x = tl.load(x_ptr + tl.arange(0, BLOCK))
            y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
            tl.store(out_ptr + tl.arange(0, BLOCK), y)

        x = torch.randint(0, 9, (64,), device="cuda", dtype=torch.int32)
        try:
            copy_kernel[(1,)](x, torch.empty_like(x), BLOCK=64)
        except Exception as e:
            print("failed:", e)
    ''')
    with pytest.raises(CaptureError, match=r"every launch of copy_kernel .* \(1\) raised and the app caught it: .*"
                                           r"tl\.inline_asm_elementwise"):
        capture(app, "copy_kernel", tmp_path / "captures")


SKIPPED_BLOCKS = '''
import torch, triton, triton.language as tl

@triton.jit
def sparse_scale_kernel(x_ptr, out_ptr, layout_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1)
    if tl.load(layout_ptr + row * tl.num_programs(1) + col) == 0:
        return   # a block the layout skips: left as it was, on purpose
    offs = row * n_cols + col * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)

def test_sparse():
    x = torch.randn(6, 5 * 16, device="cuda")
    layout = (torch.arange(6 * 5) % 3 != 0).to(torch.int32).cuda()
    out = torch.full_like(x, float("nan"))   # as a reused buffer that held NaN (an earlier poisoned copy)
    sparse_scale_kernel[(6, 5)](x, out, layout, x.shape[1], BLOCK=16)
    return out

result_gold = test_sparse()
'''
ADD_INTO = '''
import torch, triton, triton.language as tl

@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(out_ptr + offs, mask=mask)
    acc += tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, acc, mask=mask)

def test_accumulate():
    x = torch.randn(1000, device="cuda")
    out = torch.ones(1000, device="cuda")
    accumulate_kernel[(triton.cdiv(1000, 64),)](x, out, 1000, BLOCK=64)
    return out

result_gold = test_accumulate()
'''
ATOMIC = '''
import torch, triton, triton.language as tl

@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1)
    offs = col * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols
    tl.atomic_add(out_ptr + row, tl.sum(tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)))

def test_row_sum():
    x = torch.randn(7, 300, device="cuda")
    out = torch.zeros(7, device="cuda")
    row_sum_kernel[(7, triton.cdiv(300, 64))](x, out, 300, BLOCK=64)
    return out

result_gold = test_row_sum()
'''


@pytest.mark.parametrize("text, kernel, output", [
    (SKIPPED_BLOCKS, "sparse_scale_kernel", "out_ptr"),
    (ADD_INTO, "accumulate_kernel", "out_ptr"),
    (ATOMIC, "row_sum_kernel", "out_ptr"),
], ids=["skipped-blocks", "add-into", "atomic-add"])
def test_an_output_the_kernel_does_not_fully_overwrite_starts_from_the_capture(cpu_only, tmp_path, text,
                                                                               kernel, output):
    """Two replays with different poisons tell a fully overwritten output from one the kernel adds
    into or leaves partly alone; the latter is not poisoned in verification but compared from the
    captured contents, so the unmodified kernel passes (skipped blocks over NaN were refused before:
    'output never written (still poisoned)')."""
    prepared = user_kernel.prepare(_app(tmp_path, text), kernel, tmp_path / "work")
    roles = {o["name"]: o for o in prepared.capture.launch["outputs"]}
    assert roles[output]["write_only"] is False
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


@triton.jit
def _store_through_helper(p, v):
    tl.store(p, v)


@triton.jit
def _two_inputs_two_outputs(x_ptr, y_ptr, out_ptr, aux_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ptrs = out_ptr + offs
    tl.store(ptrs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
    _store_through_helper(aux_ptr + offs, 1.0)


def test_only_parameters_a_kernel_may_store_through_are_replayed_for_being_written():
    """The snapshot replays the launch once per unchanged floating-point tensor to learn whether it
    is written over NaN: only for those a store, an atomic or another function may reach (a slow
    interpreted launch was replayed once per input before)."""
    assert capture_hook._stored_params(_two_inputs_two_outputs.fn) & {"x_ptr", "y_ptr", "out_ptr", "aux_ptr"} \
        == {"out_ptr", "aux_ptr"}


def test_a_slow_interpreted_launch_is_not_replayed_and_the_capture_says_so(cpu_only, tmp_path, monkeypatch):
    """Past ``SWIZZLEPERF_SLOW_REPLAY_S`` (0 here) the snapshot does not replay the launch (four
    more launches of minutes each): every output starts from its captured contents, none poisoned,
    the line says so, and the unmodified kernel still verifies."""
    monkeypatch.setenv("SWIZZLEPERF_SLOW_REPLAY_S", "0")
    prepared = user_kernel.prepare(_app(tmp_path, ADD_INTO), "accumulate_kernel", tmp_path / "work")
    launch = prepared.capture.launch
    assert launch["unreplayed"] is True and launch["outputs"] == [{"name": "out_ptr", "write_only": False,
                                                                   "deterministic": True}]
    assert "did not replay it to learn which outputs it fully overwrites" in prepared.capture.describe()
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_a_block_pointer_gap_names_where_the_app_used_it():
    log = ('Traceback (most recent call last):\n  File "/home/u/ops/attn.py", line 88, in <module>\n'
           '  File "/home/u/ops/attn.py", line 41, in _attn_fwd\n'
           '  File "/venv/lib/python3.11/site-packages/triton/language/core.py", line 2100, in make_block_ptr\n'
           'NotImplementedError: Block pointers have been removed in favor of the tensor descriptor API\n')
    line = missing_construct(log, "3.9.0")
    assert "tl.make_block_ptr" in line and "(used at attn.py:41)" in line and 'triton==3.8.0' in line


@pytest.mark.parametrize("log, expected", [
    ("    y = tl.extra.cuda.libdevice.exp(x)\n        ^^^^\nValueError: Did you forget to add @triton.jit ? "
     "(`_semantic` argument must be provided outside of JIT functions.)\n",
     "cannot run `y = tl.extra.cuda.libdevice.exp(x)`: a builtin it does not patch"),
    ("AttributeError: module 'triton.language' has no attribute 'make_magic'\n", "has no tl.make_magic"),
    ("NotImplementedError: inline_asm not supported in interpreter mode\n", "this app's kernel needs a GPU"),
    ("ZeroDivisionError: division by zero\n", None),
], ids=["unpatched-builtin", "missing-attribute", "inline-asm", "other"])
def test_interpreter_gaps_are_named_from_the_apps_output(log, expected):
    line = missing_construct(log, "3.9.0")
    assert (line is None) if expected is None else (expected in line and "\n" not in line)


LIBDEVICE_APP = '''
import torch, triton, triton.language as tl
from triton.language.extra.libdevice import tanh

@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(out_ptr + offs, y, mask=mask)

def test_gelu():
    x = torch.randn(300, device="cuda")
    out = torch.empty_like(x)
    gelu_tanh_kernel[(triton.cdiv(300, 128),)](x, out, 300, BLOCK=128)
    torch.testing.assert_close(out, torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-5, rtol=1e-5)
    return out

result_gold = test_gelu()
'''


def test_a_libdevice_function_imported_by_name_runs_under_the_interpreter(cpu_only, tmp_path):
    """No Triton's interpreter runs libdevice (3.9.0's stubs return None: 'unsupported operand
    type(s) for +: int and NoneType'); numpy stands in, in the app's run and in verification's
    (the generated module installs the same), so the baseline still verifies bitwise."""
    prepared = user_kernel.prepare(_app(tmp_path, LIBDEVICE_APP), "gelu_tanh_kernel", tmp_path / "work")
    assert "_swizzleperf_shims()" in prepared.module_path.read_text()
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


STRING_CONSTEXPR_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: "tl.constexpr"):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)

def test_scale():
    x = torch.randn(300, device="cuda")
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(300, 64),)](x, out, 300, BLOCK=64)
    torch.testing.assert_close(out, 2.0 * x)
    return out

result_gold = test_scale()
'''


def test_a_constexpr_annotated_as_a_string_stays_one_under_the_interpreter(cpu_only, tmp_path):
    """``BLOCK: "tl.constexpr"`` (compiled Triton reads it as a constexpr): Triton 3.9.0's
    interpreter lost it ("arange's arguments must be of type tl.constexpr"); the app runs, and its
    generated copy verifies in verification's process."""
    prepared = user_kernel.prepare(_app(tmp_path, STRING_CONSTEXPR_APP), "scale_kernel", tmp_path / "work")
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


SCALAR_AND_BLOCK_MASK_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def heads_kernel(q_ptr, n_tokens, HEADS: tl.constexpr, D: tl.constexpr, TOKENS: tl.constexpr):
    head = tl.program_id(0)
    t = tl.arange(0, TOKENS)
    d = tl.arange(0, D)
    offs = head * TOKENS * D + t[:, None, None] * D + d[None, None, :]
    mask = (head < HEADS) & (t[:, None, None] < n_tokens)
    tl.store(q_ptr + offs, 2.0 * tl.load(q_ptr + offs, mask=mask, other=0.0), mask=mask)

def test_heads():
    q = torch.randn(3 * 8 * 16, device="cuda")
    expected = q.view(3, 8, 16).clone()
    expected[:, :5] *= 2
    heads_kernel[(3,)](q, 5, HEADS=3, D=16, TOKENS=8)
    torch.testing.assert_close(q.view(3, 8, 16), expected)
    return q

result_gold = test_heads()
'''


def test_a_mask_of_a_scalar_and_a_block_comparison_runs_under_the_interpreter(cpu_only, tmp_path):
    """``(pid < H) & (t[:, None, None] < n)`` as a mask: Triton 3.9.0's interpreter held it as int32
    and its load raised "mask has unsupported dtype"; the app runs and its copy verifies."""
    prepared = user_kernel.prepare(_app(tmp_path, SCALAR_AND_BLOCK_MASK_APP), "heads_kernel", tmp_path / "work")
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


BOOLEAN_OPERATOR_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def select_kernel(x_ptr, select_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    select = tl.load(select_ptr + offs, mask=mask, other=0).to(tl.int1)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x, mask=(select and mask))
    tl.store(out_ptr + n + offs, x, mask=(offs < 3 or offs > n - 3) and mask)

def test_select():
    x = torch.randn(200, device="cuda")
    select = (torch.rand(200, device="cuda") > 0.5).to(torch.int32)
    out = torch.full((400,), -1.0, device="cuda")
    select_kernel[(triton.cdiv(200, 64),)](x, select, out, 200, BLOCK=64)
    expected = torch.full((400,), -1.0)
    expected[:200] = torch.where(select.bool(), x, expected[:200])
    edge = (torch.arange(200) < 3) | (torch.arange(200) > 197)
    expected[200:] = torch.where(edge, x, expected[200:])
    torch.testing.assert_close(out, expected)
    return out

result_gold = test_select()
'''


def test_and_or_of_tensors_are_elementwise_under_the_interpreter(cpu_only, tmp_path):
    """``mask=(select and mask)``: compiled Triton's logical_and; Triton 3.9.0's interpreter left it
    to Python (one operand of the two, whole) and the app's own check failed; it passes, and the copy
    verifies."""
    prepared = user_kernel.prepare(_app(tmp_path, BOOLEAN_OPERATOR_APP), "select_kernel", tmp_path / "work")
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason


PHILOX_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def uniform_kernel(out_ptr, n, seed, offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.rand(seed, offset + offs), mask=offs < n)

def philox_seed_offset(increment):
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    state = gen.get_state()
    seed, offset = (int(v) for v in state.view(torch.int64))
    state.view(torch.int64)[1] += increment
    gen.set_state(state)
    return seed, offset

def test_uniform():
    out = torch.empty(300, device="cuda")
    seed, offset = philox_seed_offset(300)
    uniform_kernel[(triton.cdiv(300, 64),)](out, 300, seed, offset, BLOCK=64)
    assert philox_seed_offset(0)[1] == offset + 300
    assert ((out >= 0) & (out < 1)).all()
    return out

result_gold = test_uniform()
'''


def test_a_philox_seed_and_offset_from_the_cuda_generator_are_there_without_a_gpu(cpu_only, tmp_path):
    """``torch.cuda.default_generators[0].get_state()`` read as (seed, offset): an empty tuple on a
    torch without CUDA ('tuple index out of range': TritonBench-G's uniform_sampling.py); a generator
    of the CUDA state's shape stands in, and the app runs."""
    prepared = user_kernel.prepare(_app(tmp_path, PHILOX_APP), "uniform_kernel", tmp_path / "work")
    assert prepared.capture.launch["grid"] == [5, 1, 1] or prepared.capture.launch["programs"] == 5


SPIN_LOCK_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def handoff_kernel(x_ptr, flags_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if pid == 0:   # waits for program 1, which the interpreter runs after it
        while tl.atomic_cas(flags_ptr + 1, 1, 1) != 1:
            pass
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)
    tl.atomic_xchg(flags_ptr + pid, 1)

def test_handoff():
    x = torch.zeros(128, device="cuda")
    flags = torch.zeros(2, dtype=torch.int32, device="cuda")
    handoff_kernel[(2,)](x, flags, BLOCK=64)
    return x

result_gold = test_handoff()
'''

SLOW_APP = '''
import time
import torch
import triton
import triton.language as tl


@triton.jit
def slow_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)

def test_slow():
    x = torch.zeros(4096 * 16, device="cuda")
    for _ in range(1000):
        slow_kernel[(4096,)](x, BLOCK=16)
    return x

result_gold = test_slow()
'''


@pytest.mark.parametrize("stuck_s, timeout_s", [(1e9, 25), (3, 300)], ids=["at-the-limit", "stuck-early"])
def test_a_program_that_spins_on_a_later_one_is_refused_with_the_loop_named(cpu_only, tmp_path, monkeypatch,
                                                                             stuck_s, timeout_s):
    """Under the interpreter (one program at a time) a program spinning on an atomic for a program
    not yet run never returns: the refusal names the kernel, the loop's line and the call, and says a
    GPU runs it (TritonBench-G spinning_lock_reduction); at the app's time limit, or as soon as no
    program has started for STUCK_S seconds (the row does not wait out its budget)."""
    import time
    from swizzleperf.agent.capture import bottleneck, interpreter_gaps
    from swizzleperf.agent.capture.capture import InterpreterGapError
    monkeypatch.setattr(interpreter_gaps, "STUCK_S", stuck_s)
    started = time.monotonic()
    with pytest.raises(InterpreterGapError) as caught:
        bottleneck.profile_app(_app(tmp_path, SPIN_LOCK_APP), tmp_path / "work", timeout_s=timeout_s)
    assert time.monotonic() - started < 90
    text = str(caught.value)
    assert "handoff_kernel (op.py:7, grid 2) waits at line 12 in a loop on tl.atomic_cas" in text
    assert "program 1 of 2" in text and "run the app on a GPU" in text


def test_an_app_stopped_at_its_limit_says_which_launch_it_was_in(cpu_only, tmp_path):
    """A launch that makes progress is a timeout, not a refusal, and says where it was: the kernel,
    its grid, the programs run and what the whole launch needs at that pace."""
    from swizzleperf.agent.capture import bottleneck
    from swizzleperf.agent.capture.capture import AppTimeoutError
    with pytest.raises(AppTimeoutError) as caught:
        bottleneck.profile_app(_app(tmp_path, SLOW_APP), tmp_path / "work", timeout_s=12)
    assert "it was in slow_kernel (op.py:8, grid 4096)" in str(caught.value)
    assert "programs started" in str(caught.value)


def test_spin_wait_finds_loops_on_atomics_and_volatile_loads(tmp_path):
    from swizzleperf.agent.capture.interpreter_gaps import spin_wait
    source = tmp_path / "k.py"
    source.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def waits(flag):
            while tl.load(flag, volatile=True) == 0:
                pass

        @triton.jit
        def loops(x, n):
            i = 0
            while i < n:
                i += tl.atomic_add(x, 1)
    '''))
    assert spin_wait(str(source), 5) == (7, "tl.load(volatile=True)")
    assert spin_wait(str(source), 10) is None   # an atomic in the body, not the test: no wait
    assert spin_wait(str(source), 2) is None and spin_wait(str(tmp_path / "missing.py"), 5) is None


WILD_LOAD_APP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def wild_kernel(x_ptr, out_ptr, far):
    tl.store(out_ptr, tl.load(x_ptr + far))

def test_wild():
    x = torch.zeros(4, device="cuda")
    out = torch.empty(1, device="cuda")
    wild_kernel[(1,)](x, out, 2**40)
    return out

result_gold = test_wild()
'''


def test_an_app_that_dies_of_a_wild_access_is_told_where(cpu_only, tmp_path):
    """A kernel that reads far outside its tensors dies with SIGSEGV under the interpreter (it reads
    host memory unchecked: TritonBench-G token_attn_reduceV, decay_cumsum): the app failed, and the
    line says the signal, the kernel's own line and what the access means, not only "Segmentation fault"."""
    from swizzleperf.agent.capture.capture import AppFailedError
    with pytest.raises(AppFailedError) as caught:
        capture(_app(tmp_path, WILD_LOAD_APP), "wild_kernel", tmp_path / "work")
    assert "Segmentation fault in wild_kernel at op.py:9, in a load of Triton's interpreter" in str(caught.value)


def test_fatal_signal_reads_the_fault_handlers_dump():
    from swizzleperf.agent.capture.interpreter_gaps import fatal_signal
    log = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x7f (most recent call first):\n'
           '  File "/v/lib/python3.11/site-packages/triton/runtime/interpreter.py", line 554 in create_masked_store\n'
           '  File "/tmp/hook/swizzleperf_cuda_on_cpu.py", line 339 in masked_store\n'
           '  File "/home/u/ops/sel.py", line 48 in select_kernel\n  File "/home/u/ops/sel.py", line 90 in <module>\n')
    assert fatal_signal(log, "/tmp/hook") == (
        "Segmentation fault in select_kernel at sel.py:48, in a store of Triton's interpreter: the kernel reached "
        "an address outside its tensors (the interpreter reads and writes host memory unchecked; on a GPU the "
        "same access reads or writes whatever lies there, or faults)")
    assert fatal_signal("Traceback (most recent call last):\nValueError: x") is None
    assert fatal_signal("Fatal Python error: Aborted\n") == "Aborted (no Python frame in its output)"


def test_the_generated_modules_shims_never_start_cuda(monkeypatch):
    """An interpreted verification worker on a GPU machine runs under an address-space limit: a
    cuInit there (torch.cuda.is_available) took the space its threads needed (libgomp 'Thread
    creation failed', an H100). The shims ask torch.cuda.device_count (NVML) and, seeing a GPU,
    leave Triton's driver and Inductor's names alone."""
    import torch
    from swizzleperf.agent.capture import cuda_on_cpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: pytest.fail("CUDA started"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda_on_cpu, "_inductor_shims", lambda: pytest.fail("CPU shims on a GPU machine"))
    monkeypatch.setattr(cuda_on_cpu, "_cpu_driver", lambda: pytest.fail("CPU driver on a GPU machine"))
    cuda_on_cpu.generated_module_shims()


# An autotuned app's head: its own do_bench, a wall clock (the interpreter has no GPU timer).
TIMED_APP_HEAD = '''
import time
import torch
import triton
import triton.language as tl


def wall_clock(kernel_call, quantiles=None):
    t0 = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - t0) * 1e3
    return [ms, ms, ms] if quantiles else ms
'''
INT_OUTPUT = TIMED_APP_HEAD + '''

@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                 do_bench=wall_clock)
@triton.jit
def count_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, x * 3 + 1, mask=mask)


def run():
    n = 256
    x = torch.randint(0, 100, (n,), dtype=torch.int32)
    out = torch.zeros(n, dtype=torch.int32)     # the autotuner's benchmark launches fill it first
    count_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    assert torch.equal(out, x * 3 + 1)


run()
print("int OK")
'''


def test_an_integer_output_the_autotuners_benchmark_filled_first_is_still_the_output(cpu_only, tmp_path):
    """int8_matmul_kernel of TritonBench-G (an int32 output from torch.empty, autotuned) was refused
    as "changed none of its tensor arguments" on an H100: the autotuner's benchmark launches had
    written the product before the app's own launch rewrote the same values, and an integer tensor
    the launch did not change counts as an input (no NaN probe). The hook keeps the tensors as they
    were before the autotuner's first benchmark launch: one the benchmarks changed is an output."""
    app = tmp_path / "app.py"
    app.write_text(INT_OUTPUT)
    captured = capture(f"TRITON_INTERPRET=1 {sys.executable} {app}", "count_kernel", tmp_path / "captures")
    assert "int OK" in (captured.folder / "app.log").read_text()
    assert captured.launch["outputs"] == [{"name": "out_ptr", "write_only": True, "deterministic": True}]


INDEX_BY_PRE_HOOK = TIMED_APP_HEAD + '''

def build_index(nargs, reset_only=False):      # the autotuner's pre_hook fills the index before each launch
    n = nargs["n"]
    nargs["idx_ptr"].copy_((torch.arange(n, dtype=torch.int32) * 7) % n)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                 do_bench=wall_clock, pre_hook=build_index)
@triton.jit
def gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.load(x_ptr + i, mask=m), mask=m)


n = 256
x = torch.randn(n)
idx = torch.full((n,), -1, dtype=torch.int32)
out = torch.empty(n)
gather_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, idx, out, n)
assert torch.equal(out, x[(torch.arange(n) * 7) % n])
print("gather OK")
'''


def test_an_index_the_autotuners_pre_hook_fills_stays_an_input(cpu_only, tmp_path):
    """A review of the change above: an int32 index that the autotuner's ``pre_hook`` fills before
    each launch differed from its copy before the first benchmark launch and was taken for an
    output; poisoned, it sent the replay's gather out of bounds (a crash). Only tensors the kernel
    may store through count (``_stored_params``), and only those are copied."""
    app = tmp_path / "app.py"
    app.write_text(INDEX_BY_PRE_HOOK)
    captured = capture(f"TRITON_INTERPRET=1 {sys.executable} {app}", "gather_kernel", tmp_path / "captures")
    assert "gather OK" in (captured.folder / "app.log").read_text()
    assert [o["name"] for o in captured.launch["outputs"]] == ["out_ptr"]
