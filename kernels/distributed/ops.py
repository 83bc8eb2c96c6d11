"""The overlap kernels as PyTorch custom ops, for a tensor-parallel model (issue #46)
====================================================================================

Two ops, registered under ``torch.ops.swizzleperf`` with fake implementations, so that a model
traced by ``torch.compile`` sees their output shapes without running them::

    swizzleperf::all_gather_matmul(Tensor a_shard, Tensor b, str group_name, int world_size,
                                   str config="") -> Tensor
        a_shard [M/W, K] (this rank's rows), b [K, N]  ->  all_gather(a_shard) @ b  [M, N]
    swizzleperf::matmul_reduce_scatter(Tensor a, Tensor b, str group_name, int world_size,
                                       str config="") -> Tensor
        a [M, K], b [K, N]  ->  reduce_scatter(a @ b) over rows, this rank's  [M/W, N]

The column-parallel input projection (sequence parallelism's all-gather of the tokens, then the
rank's column shard of the weights, ``all_gather_gemm``) and the row-parallel output projection
(the rank's feature slice times its weight rows, summed over the ranks and split by tokens,
``gemm_reduce_scatter``): ``N`` and ``K`` here are the rank's own sizes, as torch's
``symm_mem::fused_all_gather_matmul(A_shard, Bs, gather_dim, group_name)`` and
``fused_matmul_reduce_scatter(A, B, reduce_op, scatter_dim, group_name)`` take them (gather and
scatter along dim 0, the sum as the reduction). ``world_size`` is an argument, not read from
the group, so that the fake implementations know the shapes without a process group.

What a call runs:

- ``world_size == 1``: ``torch.matmul(a, b)`` (no group is looked up): the single-rank path, on
  any device, inside a CUDA graph too;
- ``world_size > 1`` on CUDA tensors in a dtype the kernel takes: the kernel of this package,
  with ``config``: ``""`` (the kernel's default pattern and the per-rank GEMM configuration
  measured for the shape in kernels/schedule/gemm_tuning.py's cache, else its defaults), or the
  JSON object of ``tuned_config`` (a cache file's answer for the shape) or ``answer_config`` (a
  measured ``swizzleperf optimize`` run's report.json): ``{"pattern": ..., knob: value, ...}``.
  The first call at a shape, dtype, device and configuration builds its state (a symmetric heap
  on the group, a collective: every rank makes the same calls in the same order, as SPMD model
  code does); later calls copy the input that peers read into the heap, queue one launch on the
  current stream, and return a copy of the output (the state's output is overwritten by the next
  launch). A weight seen for the first time gets its own descriptors (``MAX_WEIGHTS`` per state);
- ``world_size > 1`` otherwise, or ``{"pattern": "torch_nccl"}`` (a measured run's answer
  "use torch + NCCL"): torch + the group's collectives, ``all_gather_into_tensor`` then
  ``matmul``, ``matmul`` then ``reduce_scatter_tensor``.

The kernels' flags count epochs passed from the host, so a CUDA graph of their launches would
replay one epoch: at ``world_size > 1`` a capture is refused in one line (use
``{"pattern": "torch_nccl"}`` inside graphs). A wait that gives up is recorded in the heap, not
raised at once (reading it synchronises): ``check()`` raises it. ``host_ms()`` gives each state's
host time to queue one call.

Forward only: no autograd formula is registered (a training step's backward of the gather is a
matmul + reduce-scatter, and the other way round: not written yet).

Bad arguments raise ValueError in one line, "X must be Y, got Z", in the real and the fake
implementation alike (so ``torch.compile`` reports them while tracing).
"""
from __future__ import annotations

import json
import time
from collections import OrderedDict
from pathlib import Path

import torch

#: The op's name -> the kernel module of kernels/distributed/ that runs it at ``world_size > 1``.
KERNEL_OF = {"all_gather_matmul": "all_gather_gemm", "matmul_reduce_scatter": "gemm_reduce_scatter"}
#: The configuration's pattern that runs torch + the group's collectives instead of a kernel.
TORCH_NCCL = "torch_nccl"
#: Weights (``b``) a kernel state keeps descriptors for, least recently used dropped first.
MAX_WEIGHTS = 64
#: Bytes of a report.json read by ``answer_config``.
REPORT_MAX_BYTES = 16 << 20

_STATES: dict = {}   # (op, group, shapes, dtype, device, meta) -> _KernelState


# ------------------------------------------------------------------------------ argument checks
def _parse_config(config: str) -> dict:
    """``config`` as a dict: ``{}`` for ``""``, else a JSON object whose ``pattern`` is a string."""
    if not config:
        return {}
    try:
        parsed = json.loads(config)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("pattern", ""), str):
        raise ValueError(f'config must be "" or a JSON object with a string "pattern", got {config[:120]!r}')
    if "swizzle" in parsed:
        raise ValueError("config's swizzle must be absent (the kernel's own tile order: a catalog order is "
                         f"spliced by the agent, run the report's best_command.sh), got {parsed['swizzle']!r}")
    return parsed


def _check_matmul(a: torch.Tensor, b: torch.Tensor, a_name: str, world_size: int, config: str) -> None:
    """The checks both ops make, in the real and the fake implementation."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"{a_name} and b must be 2-D, got {a_name} {tuple(a.shape)} and b {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b's rows must be {a_name}'s columns K = {a.shape[1]}, got b {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"b's dtype must be {a_name}'s {a.dtype}, got {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"b's device must be {a_name}'s {a.device}, got {b.device}")
    _parse_config(config)


def _check_reduce_scatter(a: torch.Tensor, b: torch.Tensor, world_size: int, config: str) -> None:
    _check_matmul(a, b, "a", world_size, config)
    if a.shape[0] % world_size != 0:
        raise ValueError(f"a's rows M must be a multiple of world_size {world_size}, got M = {a.shape[0]}")


# ------------------------------------------------------------------------------ the ops
@torch.library.custom_op("swizzleperf::all_gather_matmul", mutates_args=())
def all_gather_matmul(a_shard: torch.Tensor, b: torch.Tensor, group_name: str, world_size: int,
                      config: str = "") -> torch.Tensor:
    """``all_gather(a_shard) @ b``: a_shard [M/W, K] of every rank in rank order, [M, K], times
    b [K, N], [M, N] (see the module docstring for what runs)."""
    _check_matmul(a_shard, b, "a_shard", world_size, config)
    if world_size == 1:
        return torch.matmul(a_shard, b)
    group = _group(group_name, world_size)
    state = _kernel_state("all_gather_matmul", a_shard, b, group, world_size, config)
    if state is None:
        import torch.distributed as dist
        gathered = a_shard.new_empty(world_size * a_shard.shape[0], a_shard.shape[1])
        dist.all_gather_into_tensor(gathered, a_shard.contiguous(), group=group)
        return torch.matmul(gathered, b)
    return state(a_shard, b)


@all_gather_matmul.register_fake
def _(a_shard, b, group_name, world_size, config=""):
    _check_matmul(a_shard, b, "a_shard", world_size, config)
    return a_shard.new_empty(world_size * a_shard.shape[0], b.shape[1])


@torch.library.custom_op("swizzleperf::matmul_reduce_scatter", mutates_args=())
def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, group_name: str, world_size: int,
                          config: str = "") -> torch.Tensor:
    """This rank's rows of ``sum over ranks of a @ b``: a [M, K] times b [K, N], summed over the
    group, rows ``rank * M/W ..`` kept, [M/W, N] (see the module docstring for what runs)."""
    _check_reduce_scatter(a, b, world_size, config)
    if world_size == 1:
        return torch.matmul(a, b)
    group = _group(group_name, world_size)
    state = _kernel_state("matmul_reduce_scatter", a, b, group, world_size, config)
    if state is None:
        import torch.distributed as dist
        partial = torch.matmul(a, b)
        out = partial.new_empty(a.shape[0] // world_size, b.shape[1])
        dist.reduce_scatter_tensor(out, partial.contiguous(), group=group)
        return out
    return state(a, b)


@matmul_reduce_scatter.register_fake
def _(a, b, group_name, world_size, config=""):
    _check_reduce_scatter(a, b, world_size, config)
    return a.new_empty(a.shape[0] // world_size, b.shape[1])


def _group(group_name: str, world_size: int):
    """The process group named ``group_name``, checked to have ``world_size`` ranks."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group
    if not dist.is_initialized():
        raise ValueError(f"world_size {world_size} must come with an initialised process group, got none "
                         "(torch.distributed.init_process_group first)")
    group = _resolve_process_group(group_name)
    if dist.get_world_size(group) != world_size:
        raise ValueError(f"world_size must be group {group_name!r}'s size {dist.get_world_size(group)}, "
                         f"got {world_size}")
    return group


# ------------------------------------------------------------------------------ configurations
def _sizes(op: str, a: torch.Tensor, b: torch.Tensor, world_size: int) -> dict:
    """The kernel's problem (global sizes) of one call's shapes."""
    if op == "all_gather_matmul":   # rank's rows x its weight columns
        return {"M": world_size * a.shape[0], "N": world_size * b.shape[1], "K": a.shape[1]}
    return {"M": a.shape[0], "N": b.shape[1], "K": world_size * a.shape[1]}


def tuned_config(op: str, a_shape, b_shape, world_size: int, dtype: str = "bfloat16",
                 device_name: str | None = None, num_sms: int | None = None, caches=None,
                 pattern: str | None = None) -> str:
    """The configuration (JSON, for ``config``) of ``op`` at these operand shapes: ``pattern``
    (default: the kernel's first) and the per-rank GEMM configuration measured for the shape on
    the GPU named ``device_name`` (default: the current CUDA device) in the first of ``caches``
    that has one fitting the kernel (default: kernels/schedule/gemm_tuning.py's cache; pass the
    committed agent/distributed/data/gemm_configs_hopper.json after it to fall back on those),
    ranked for the programs the pattern gives its GEMM; only ``pattern`` where none fits. The
    same choice as agent/distributed/problems.py's ``tuned_gemm`` (a measured optimize's start),
    which the kernels' layer cannot import.

    Raises:
        ValueError: an unknown op or pattern.
    """
    from swizzleperf.kernels.schedule import gemm_tuning
    spec = _spec(op)
    pattern = pattern or spec.patterns[0]
    if pattern not in spec.patterns:
        raise ValueError(f"pattern must be one of {spec.patterns}, got {pattern!r}")
    device_name = device_name or torch.cuda.get_device_name()
    if num_sms is None:
        from swizzleperf.kernels.schedule.persistent_gemm import num_sms as sms_of
        num_sms = sms_of()
    dummy = (torch.empty(a_shape, device="meta"), torch.empty(b_shape, device="meta"))
    sizes = _sizes(op, *dummy, world_size)
    shape = spec.compute_shape(sizes, world_size)
    programs = spec.gemm_programs(pattern, {**spec.meta, "NUM_SMS": num_sms})
    for path in caches if caches is not None else (gemm_tuning.cache_path(),):
        for found in gemm_tuning.ranked_configs(shape["M"], shape["N"], shape["K"], dtype, device_name,
                                                programs, path=Path(path)):
            knobs = {k: v for k, v in found.items() if k in spec.knobs or k not in gemm_tuning.SWITCHES or v}
            if any(k not in spec.knobs or v not in spec.knobs[k] for k, v in knobs.items()):
                continue
            if spec.constraints(sizes, world_size, pattern, {**spec.meta, **knobs, "NUM_SMS": num_sms}) is None:
                return json.dumps({"pattern": pattern, **knobs})
    return json.dumps({"pattern": pattern})


def answer_config(report: str | Path, world_size: int | None = None) -> str:
    """The configuration (JSON, for ``config``) a measured ``swizzleperf optimize`` run answered,
    from its ``report.json``: the answer's pattern and knobs over the per-rank GEMM configuration
    the run started from (what its ranks ran), or ``{"pattern": "torch_nccl"}`` where the answer
    is torch + NCCL. Measured at the report's problem and world size; a call applies it to any
    shape the kernel's constraints accept.

    Raises:
        ValueError: a file that is not such a report, a simulated run (it answers nothing), a
            kernel no op runs, a world size other than ``world_size``, an answer with a tile order.
    """
    from swizzleperf.sandbox import untrusted
    what = f"{report}: a run's report"
    try:
        data = untrusted.loads(untrusted.read_bounded(report, REPORT_MAX_BYTES, what), what)
    except untrusted.UntrustedInput as exc:
        raise ValueError(str(exc).split("; received:")[0]) from None
    dist_part = data.get("distributed") if isinstance(data, dict) else None
    if not isinstance(dist_part, dict):
        raise ValueError(f"{what} must hold a distributed run's 'distributed' section, got none")
    if data.get("kernel") not in KERNEL_OF.values():
        raise ValueError(f"{what}'s kernel must be one of {sorted(KERNEL_OF.values())}, got {data.get('kernel')!r}")
    if world_size is not None and dist_part.get("world_size") != world_size:
        raise ValueError(f"{what}'s world size must be {world_size}, got {dist_part.get('world_size')}")
    answer = dist_part.get("answer") or {}
    if data.get("mode") != "measured" or not answer.get("use"):
        raise ValueError(f"{what} must be a measured run's (a simulated one answers nothing), got mode "
                         f"{data.get('mode')!r}")
    if answer["use"] != "configuration":
        return json.dumps({"pattern": TORCH_NCCL})
    config = answer.get("config") or {}
    if not isinstance(config, dict) or "pattern" not in config:
        raise ValueError(f"{what}'s answer must carry its configuration, got {answer.get('name')!r}")
    knobs = (dist_part.get("gemm_config") or {}).get("knobs") or {}
    text = json.dumps({"pattern": config["pattern"], **knobs, **config})
    _parse_config(text)
    return text


def _spec(op: str):
    from swizzleperf.kernels.distributed import load_spec
    if op not in KERNEL_OF:
        raise ValueError(f"op must be one of {sorted(KERNEL_OF)}, got {op!r}")
    return load_spec(KERNEL_OF[op])


def _meta(op: str, sizes: dict, world_size: int, dtype: torch.dtype, device: torch.device,
          config: dict) -> tuple:
    """``(pattern, meta)`` of a call's configuration on a CUDA device, checked against the
    kernel's knobs and constraints."""
    from swizzleperf.kernels.schedule.persistent_gemm import num_sms
    spec = _spec(op)
    if not config:
        config = json.loads(tuned_config(op, _shape_a(op, sizes, world_size), _shape_b(op, sizes, world_size),
                                         world_size, str(dtype).removeprefix("torch."),
                                         torch.cuda.get_device_name(device), num_sms(device)))
    pattern, knobs = config.get("pattern") or spec.patterns[0], {k: v for k, v in config.items() if k != "pattern"}
    if pattern not in spec.patterns:
        raise ValueError(f"config's pattern must be one of {(*spec.patterns, TORCH_NCCL)}, got {pattern!r}")
    unknown = sorted(k for k in knobs if k not in spec.meta)
    if unknown:
        raise ValueError(f"config's knobs must be among {sorted(spec.meta)}, got {', '.join(unknown)}")
    meta = {**spec.meta, **knobs, "NUM_SMS": num_sms(device)}
    refused = spec.constraints(sizes, world_size, pattern, meta)
    if refused:
        raise ValueError(f"{op} at M={sizes['M']}, N={sizes['N']}, K={sizes['K']}, W={world_size}: {refused}")
    return pattern, meta


def _shape_a(op: str, sizes: dict, world_size: int) -> tuple:
    if op == "all_gather_matmul":
        return (sizes["M"] // world_size, sizes["K"])
    return (sizes["M"], sizes["K"] // world_size)


def _shape_b(op: str, sizes: dict, world_size: int) -> tuple:
    if op == "all_gather_matmul":
        return (sizes["K"], sizes["N"] // world_size)
    return (sizes["K"] // world_size, sizes["N"])


# ------------------------------------------------------------------------------ the kernel's state
def _kernel_state(op: str, a: torch.Tensor, b: torch.Tensor, group, world_size: int, config: str):
    """The kernel state of this call's shapes and configuration (built on first use), or None
    where torch + the collectives run instead (not CUDA, a dtype the kernel lacks, ``torch_nccl``).

    Raises:
        ValueError: a configuration the kernel cannot run, or a CUDA graph capture.
    """
    parsed = _parse_config(config)
    spec = _spec(op)
    if (parsed.get("pattern") == TORCH_NCCL or a.device.type != "cuda"
            or str(a.dtype).removeprefix("torch.") not in spec.dtypes):
        return None
    if torch.cuda.is_current_stream_capturing():
        raise ValueError(f"{op} at world_size {world_size} must run outside CUDA graph capture (its flags "
                         f'count epochs from the host), got a capture; pass config {{"pattern": "{TORCH_NCCL}"}}')
    sizes = _sizes(op, a, b, world_size)
    key = (op, group.group_name, tuple(a.shape), tuple(b.shape), a.dtype, a.device, config)
    if key not in _STATES:
        pattern, meta = _meta(op, sizes, world_size, a.dtype, a.device, parsed)
        _STATES[key] = _KernelState(spec, op, sizes, pattern, meta, group, a, b)
    return _STATES[key]


class _KernelState:
    """One kernel's heap and state for one shape and configuration; a call queues one launch."""

    def __init__(self, spec, op: str, sizes: dict, pattern: str, meta: dict, group, a, b) -> None:
        from swizzleperf.kernels.distributed.heap import Heap
        from swizzleperf.kernels.distributed.runner import StepRunner
        self.spec, self.op, self.pattern, self.meta = spec, op, pattern, meta
        dtype = str(a.dtype).removeprefix("torch.")
        self.heap = Heap.create(spec.heap_bytes(sizes, group.size(), dtype), group=group, device=a.device)
        inputs = {"a": a.detach().clone(), "b": b}
        self.base = {k: v for k, v in spec.setup(self.heap, inputs, sizes, meta).items()}
        self.heap.check_symmetric()
        self.heap.barrier()
        self.runner = StepRunner(self.heap)
        self.views: OrderedDict = OrderedDict()   # weight -> the state with it (its own descriptors)
        self.epoch, self.calls, self.host_s = 0, 0, 0.0

    def _view(self, b: torch.Tensor) -> dict:
        key = (b.data_ptr(), tuple(b.shape), tuple(b.stride()))
        if key not in self.views:
            self.views[key] = {**self.base, "b": b}
            while len(self.views) > MAX_WEIGHTS:
                self.views.popitem(last=False)
        self.views.move_to_end(key)
        return self.views[key]

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        started = time.perf_counter()
        state = self._view(b.contiguous() if b.stride(-1) != 1 else b)
        if self.op == "all_gather_matmul":   # this rank's rows of every gathered A it may read
            for gathered in state["gathered_pair"]:
                rows = a.shape[0]
                gathered[self.heap.rank * rows:(self.heap.rank + 1) * rows].copy_(a)
        else:
            state["a"].copy_(a)
        self.epoch += 1
        self.runner.main = torch.cuda.current_stream()
        self.runner(self.spec.steps(self.heap, state, self.pattern, self.epoch, self.meta))
        out = self.spec.output(state).clone()
        self.calls, self.host_s = self.calls + 1, self.host_s + time.perf_counter() - started
        return out


def check() -> None:
    """Raise the first wait that gave up in any kernel state's heap (synchronises each)."""
    for state in _STATES.values():
        torch.cuda.synchronize(state.heap.buffer.device)
        state.heap.check()


def host_ms() -> list:
    """Each kernel state's mean host time to queue one call, ms: ``[{"op", "shapes", "pattern",
    "calls", "host_ms"}]`` (the first call's set-up included)."""
    return [{"op": key[0], "shapes": (key[2], key[3]), "pattern": s.pattern, "calls": s.calls,
             "host_ms": 1e3 * s.host_s / max(s.calls, 1)} for key, s in _STATES.items()]
