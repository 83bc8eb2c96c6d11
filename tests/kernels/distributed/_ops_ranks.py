"""One rank of test_ops.py's ``test_kernels_on_two_gpus`` (torchrun): both custom ops at W ranks
through the package's kernels, every pattern at a small shape and the default configuration at a
weird one, two calls each (the second reuses the state: epochs, a new weight), against torch in
fp32 with the kernels' tolerances; a CUDA graph capture refused. Prints "OK rank" at the end."""
from __future__ import annotations

import json

import torch
import torch.distributed as dist

from swizzleperf.kernels.distributed import load_spec, ops
from swizzleperf.kernels.distributed.runner import relative_error, start_torchrun_rank

start_torchrun_rank()
rank, world = dist.get_rank(), dist.get_world_size()
name = dist.group.WORLD.group_name


def gathered(t: torch.Tensor) -> list:
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return parts


def check(op: str, config: str, rows: int, K: int, N: int) -> None:
    tolerance = load_spec(ops.KERNEL_OF[op]).tolerance["bfloat16"]
    for call in range(2):
        torch.manual_seed(100 * rank + call)
        if op == "all_gather_matmul":
            a, b = torch.randn(rows, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
            out = ops.all_gather_matmul(a, b, name, world, config)
            expected = torch.cat(gathered(a)).float() @ b.float()
        else:
            a, b = torch.randn(world * rows, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()
            out = ops.matmul_reduce_scatter(a, b, name, world, config)
            expected = sum(gathered(a.float() @ b.float()))[rank * rows:(rank + 1) * rows]
        ops.check()
        error = relative_error(out, expected)
        assert error <= tolerance, f"rank {rank}: {op} {config or 'default'} call {call}: error {error:.3g}"


for op, kernel in ops.KERNEL_OF.items():
    for pattern in load_spec(kernel).patterns:
        check(op, json.dumps({"pattern": pattern}), 512, 256, 384)
    check(op, "", 300, 200, 136)
    check(op, json.dumps({"pattern": ops.TORCH_NCCL}), 300, 200, 136)
a, b = torch.randn(512, 256, device="cuda").bfloat16(), torch.randn(256, 384, device="cuda").bfloat16()
torch.cuda.synchronize()
try:
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        ops.all_gather_matmul(a, b, name, world)
    raise AssertionError("a capture at W > 1 must be refused")
except ValueError as exc:
    assert "must run outside CUDA graph capture" in str(exc), exc
print("host ms per call:", [round(s["host_ms"], 3) for s in ops.host_ms()], flush=True)
print("OK", rank, flush=True)
dist.destroy_process_group()
