"""The custom ops of kernels/distributed/ops.py on a CPU: their schemas, ``opcheck`` at W = 1,
fake tensors at W = 2, 4, 8, ``torch.compile`` and ``torch.export`` tracing through the fake
implementations, W = 1 numerics, the one-line errors, the configuration helpers, and torch + the
group's collectives at W = 2 over gloo (two CPU processes). The kernels' own path at W > 1 needs
GPUs (``multigpu``, at the end); the single-rank path in a CUDA graph needs one (``gpu``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from swizzleperf.kernels.distributed import KERNELS, load_spec, ops

ROOT = Path(__file__).resolve().parents[3]
AG, RS = torch.ops.swizzleperf.all_gather_matmul, torch.ops.swizzleperf.matmul_reduce_scatter
# (rows of a_shard or a, K, N): a typical small shape and a weird one (odd rows, K and N)
SHAPES = [(64, 32, 48), (13, 7, 5)]


def test_schemas():
    assert str(AG.default._schema) == ('swizzleperf::all_gather_matmul(Tensor a_shard, Tensor b, str group_name, '
                                       'SymInt world_size, str config="") -> Tensor')
    assert str(RS.default._schema) == ('swizzleperf::matmul_reduce_scatter(Tensor a, Tensor b, str group_name, '
                                       'SymInt world_size, str config="") -> Tensor')
    assert set(ops.KERNEL_OF.values()) <= set(KERNELS)


@pytest.mark.parametrize("rows,K,N", SHAPES)
@pytest.mark.parametrize("op", [AG, RS])
def test_opcheck_at_one_rank(op, rows, K, N):
    torch.manual_seed(rows)
    torch.library.opcheck(op, (torch.randn(rows, K), torch.randn(K, N), "unused", 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,K,N", SHAPES)
def test_one_rank_is_torch_matmul(rows, K, N, dtype):
    """W = 1 is ``torch.matmul`` itself: bit for bit, on fresh random inputs."""
    for seed in (0, 1):
        generator = torch.Generator().manual_seed(1000 * seed + rows)
        a = torch.randn(rows, K, generator=generator).to(dtype)
        b = torch.randn(K, N, generator=generator).to(dtype)
        assert torch.equal(AG(a, b, "g", 1), torch.matmul(a, b))
        assert torch.equal(RS(a, b, "g", 1), torch.matmul(a, b))
        assert ops.all_gather_matmul(a, b, "g", 1).dtype == dtype


@pytest.mark.parametrize("world_size", [2, 4, 8])
@pytest.mark.parametrize("rows,K,N", SHAPES)
def test_fake_shapes(world_size, rows, K, N):
    """The fake implementations: [W * rows, N] after the gather, [M / W, N] after the scatter,
    the inputs' dtype and device (a CUDA device too, on this CPU-only torch)."""
    with FakeTensorMode():
        for device in ("cpu", "cuda"):
            a = torch.empty(rows, K, dtype=torch.bfloat16, device=device)
            b = torch.empty(K, N, dtype=torch.bfloat16, device=device)
            out = AG(a, b, "tp", world_size)
            assert (tuple(out.shape), out.dtype, out.device.type) == ((world_size * rows, N), torch.bfloat16, device)
            full = torch.empty(world_size * rows, K, dtype=torch.bfloat16, device=device)
            out = RS(full, b, "tp", world_size)
            assert (tuple(out.shape), out.dtype, out.device.type) == ((rows, N), torch.bfloat16, device)


def _block(world_size: int):
    """A tensor-parallel MLP: gather the tokens, up projection, ReLU, down projection, scatter."""
    def block(x, w_up, w_down):
        h = torch.relu(AG(x, w_up, "tp", world_size))
        return RS(h, w_down, "tp", world_size) + 1.0
    return block


def test_compile_fullgraph_traces_the_fake_ops():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=lambda g, _: g)(gm, example_inputs)   # aot_eager

    torch.manual_seed(0)
    x, w_up, w_down = torch.randn(13, 16), torch.randn(16, 24), torch.randn(24, 8)
    compiled = torch.compile(_block(1), fullgraph=True, backend=backend)
    assert torch.equal(compiled(x, w_up, w_down), _block(1)(x, w_up, w_down))
    assert len(graphs) == 1
    assert "swizzleperf.all_gather_matmul" in graphs[0] and "swizzleperf.matmul_reduce_scatter" in graphs[0]


def test_export_at_four_ranks_uses_the_fake_shapes():
    """At W = 4 no group exists here: tracing runs only the fake implementations."""
    class Block(torch.nn.Module):
        def forward(self, x, w_up, w_down):
            return _block(4)(x, w_up, w_down)

    args = (torch.randn(3, 16), torch.randn(16, 24), torch.randn(24, 8))
    program = torch.export.export(Block(), args, strict=False)
    shapes = {n.target: tuple(n.meta["val"].shape) for n in program.graph.nodes
              if n.op == "call_function" and "swizzleperf" in str(n.target)}
    assert shapes == {AG.default: (12, 24), RS.default: (3, 8)}


def _cases():
    f, h = torch.randn(6, 4), torch.randn(4, 5)
    return [
        ("1-D", lambda: AG(torch.randn(4), h, "g", 1), "a_shard and b must be 2-D, got a_shard (4,) and b (4, 5)"),
        ("K", lambda: RS(f, torch.randn(3, 5), "g", 1), "b's rows must be a's columns K = 4, got b (3, 5)"),
        ("dtype", lambda: AG(f, h.double(), "g", 1), "b's dtype must be a_shard's torch.float32, got torch.float64"),
        ("world", lambda: AG(f, h, "g", 0), "world_size must be at least 1, got 0"),
        ("config", lambda: AG(f, h, "g", 1, "push"), 'config must be "" or a JSON object with a string "pattern", '
                                                     "got 'push'"),
        ("swizzle", lambda: RS(f, h, "g", 1, '{"pattern": "bulk_sync", "swizzle": "grouped-m:8"}'),
         "config's swizzle must be absent"),
        ("group", lambda: AG(f, h, "g", 2), "world_size 2 must come with an initialised process group, got none"),
    ]


@pytest.mark.parametrize("name,call,message", _cases(), ids=[c[0] for c in _cases()])
def test_bad_arguments_one_line(name, call, message):
    with pytest.raises(ValueError) as caught:
        call()
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_rows_that_do_not_split_one_line_in_fake_and_compile():
    with FakeTensorMode(), pytest.raises(ValueError, match=r"^a's rows M must be a multiple of world_size 4, got M = 6$"):
        RS(torch.empty(6, 4), torch.empty(4, 5), "tp", 4)
    with pytest.raises(Exception, match=r"a's rows M must be a multiple of world_size 1|b's rows must be a's columns K = 4"):
        torch.compile(lambda a, b: RS(a, b, "tp", 1), fullgraph=True, backend="eager")(torch.randn(6, 4),
                                                                                      torch.randn(3, 5))


# ------------------------------------------------------------------------------ configurations
def test_tuned_config_is_the_measured_optimizes_start():
    """``tuned_config`` (the kernels' layer) picks what agent/distributed/problems.py's
    ``tuned_gemm`` picks for every bench problem of both kernels, from the committed file."""
    from swizzleperf.agent.distributed.problems import COMMITTED_GEMM_CONFIGS, tuned_gemm
    devices = sorted({key.split("|")[1] for key in json.loads(COMMITTED_GEMM_CONFIGS.read_text())})
    for op, kernel in ops.KERNEL_OF.items():
        spec = load_spec(kernel)
        for problem in spec.bench_problems:
            sizes, world = spec.problems[problem], 2
            for device in devices:
                knobs, _ = tuned_gemm(spec, sizes, world, "bfloat16", device, 132, caches=(COMMITTED_GEMM_CONFIGS,),
                                      pattern=spec.patterns[0])
                config = json.loads(ops.tuned_config(op, ops._shape_a(op, sizes, world), ops._shape_b(op, sizes, world),
                                                     world, "bfloat16", device, 132, caches=(COMMITTED_GEMM_CONFIGS,)))
                assert config == {"pattern": spec.patterns[0], **knobs}, (op, problem, device)
    untuned = ops.tuned_config("all_gather_matmul", (7, 16), (16, 8), 2, "bfloat16", "NVIDIA H100 80GB HBM3", 132,
                               caches=(COMMITTED_GEMM_CONFIGS,))
    assert json.loads(untuned) == {"pattern": "push"}


def _report(tmp_path, **changes) -> Path:
    base = {"kernel": "gemm_reduce_scatter", "mode": "measured",
            "distributed": {"world_size": 2, "gemm_config": {"knobs": {"BLOCK_N": 256, "WARP_SPECIALIZE": 1}},
                            "answer": {"use": "configuration", "name": "bulk_sync WARP_SPECIALIZE=0",
                                       "config": {"pattern": "bulk_sync", "WARP_SPECIALIZE": 0}}}}
    base.update(changes)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(base))
    return path


def test_answer_config_from_a_measured_report(tmp_path):
    assert json.loads(ops.answer_config(_report(tmp_path), world_size=2)) == {
        "pattern": "bulk_sync", "BLOCK_N": 256, "WARP_SPECIALIZE": 0}
    torch_answer = {"world_size": 2, "answer": {"use": "torch + NCCL", "line": "use torch + NCCL"}}
    assert json.loads(ops.answer_config(_report(tmp_path, distributed=torch_answer))) == {"pattern": "torch_nccl"}
    committed = sorted(ROOT.glob("bench/results/dist_optimize_h100x2*/runs/*/report.json"))
    answered = [p for p in committed if (json.loads(p.read_text())["distributed"].get("answer") or {}).get("config")]
    assert answered, "no committed measured run answers with a configuration"
    for path in answered:   # every committed answer with its configuration reads, and runs at W = 1
        config = ops.answer_config(path)
        assert AG(torch.randn(4, 3), torch.randn(3, 2), "g", 1, config).shape == (4, 2)


@pytest.mark.parametrize("changes,message", [
    ({"mode": "simulated"}, "must be a measured run's (a simulated one answers nothing), got mode 'simulated'"),
    ({"kernel": "flash_decode"}, "kernel must be one of ['all_gather_gemm', 'gemm_reduce_scatter'], got 'flash_decode'"),
])
def test_answer_config_refusals(tmp_path, changes, message):
    with pytest.raises(ValueError) as caught:
        ops.answer_config(_report(tmp_path, **changes))
    assert message in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="world size must be 4, got 2"):
        ops.answer_config(_report(tmp_path), world_size=4)


@pytest.fixture
def h100_sms(monkeypatch):
    """The kernels' SM count of an H100 (132) where this CPU has none (the interpreter's 4)."""
    from swizzleperf.kernels.schedule import persistent_gemm
    monkeypatch.setattr(persistent_gemm, "num_sms", lambda device=None: 132)


def test_kernel_meta_of_a_configuration(h100_sms):
    """What a call at W > 1 on CUDA launches with: the kernel's meta under the configuration."""
    sizes = {"M": 1024, "N": 512, "K": 2048}
    pattern, meta = ops._meta("matmul_reduce_scatter", sizes, 2, torch.bfloat16, torch.device("cpu"),
                              {"pattern": "producer_consumer", "COMM_SMS": 8, "BLOCK_N": 128})
    spec = load_spec("gemm_reduce_scatter")
    assert pattern == "producer_consumer"
    assert meta == {**spec.meta, "COMM_SMS": 8, "BLOCK_N": 128, "NUM_SMS": 132}


@pytest.mark.parametrize("config,message", [
    ({"pattern": "pull"}, "config's pattern must be one of ('bulk_sync', 'producer_consumer', 'epilogue_reduce', "
                          "'push_copy_engine', 'torch_nccl'), got 'pull'"),
    ({"pattern": "bulk_sync", "TILE": 3}, "config's knobs must be among ['BLOCK_K', "),
    ({"pattern": "epilogue_reduce", "STREAM_K": 2}, "matmul_reduce_scatter at M=1024, N=512, K=2048, W=2: "
                                                    "epilogue_reduce takes STREAM_K 0 or 1"),
])
def test_kernel_configuration_refusals_one_line(h100_sms, config, message):
    with pytest.raises(ValueError) as caught:
        ops._meta("matmul_reduce_scatter", {"M": 1024, "N": 512, "K": 2048}, 2, torch.bfloat16,
                  torch.device("cpu"), config)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


# ------------------------------------------------------------------------------ W = 2 on gloo
_GLOO_RANK = r"""
import sys, torch, torch.distributed as dist
from swizzleperf.kernels.distributed import ops
rank, path = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2)
name = dist.group.WORLD.group_name
torch.manual_seed(rank)
a_shard, b = torch.randn(5, 6), torch.randn(6, 3)     # rows, K; rank's weight columns
a, b_rows = torch.randn(10, 4), torch.randn(4, 7)     # M, rank's K slice; its weight rows
gathered = ops.all_gather_matmul(a_shard, b, name, 2)
scattered = ops.matmul_reduce_scatter(a, b_rows, name, 2, '{"pattern": "torch_nccl"}')
shards, partials = [torch.empty_like(a_shard) for _ in range(2)], [torch.empty(10, 7) for _ in range(2)]
dist.all_gather(shards, a_shard)
dist.all_gather(partials, a @ b_rows)
torch.testing.assert_close(gathered, torch.cat(shards) @ b)
torch.testing.assert_close(scattered, sum(partials)[5 * rank:5 * (rank + 1)])
try:
    ops.all_gather_matmul(a_shard, b, name, 4)
except ValueError as exc:
    print("REFUSED", exc)
print("OK", rank, flush=True)
dist.destroy_process_group()
import os
os._exit(0)   # past gloo's threads at the interpreter's exit (bench/tp_block_bench.py says why)
"""


def test_two_cpu_ranks_run_torch_and_the_collectives(tmp_path):
    """On CPU tensors at W = 2 the ops run torch + the group's collectives (gloo here)."""
    script = tmp_path / "rank.py"
    script.write_text(_GLOO_RANK)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(tmp_path / "store")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err[-3000:]
        assert "OK" in out and "REFUSED world_size must be group" in out and "size 2, got 4" in out, out


# ------------------------------------------------------------------------------ GPUs
@pytest.mark.gpu
def test_single_rank_path_in_a_cuda_graph():
    a, b = torch.randn(256, 128, device="cuda"), torch.randn(128, 64, device="cuda")
    ups, downs = AG(a, b, "g", 1), RS(a, b, "g", 1)   # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        up, down = AG(a, b, "g", 1), RS(a, b, "g", 1)
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(up, a @ b)
    torch.testing.assert_close(down, a @ b)
    del ups, downs


@pytest.mark.multigpu
def test_kernels_on_two_gpus():
    """Both ops at W = 2 through the package's kernels (default and tuned configurations, each
    pattern), against torch in fp32 with the kernels' tolerances; a capture refused."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           str(Path(__file__).with_name("_ops_ranks.py"))], capture_output=True, text=True,
                          env=env, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("OK") == 2, done.stdout[-3000:]
