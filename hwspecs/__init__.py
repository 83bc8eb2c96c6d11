"""Hardware specs (one YAML file per GPU in this folder), their loader and live-device detection.
The bottom layer: imports nothing of the package but itself."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HardwareSpec:
    """What the optimizer knows of one GPU model. Every value comes from a YAML file in this folder
    that names its source (vendor document, or measured where and when).

    Attributes:
        name: key of the spec, the YAML file's stem (``"h100"``, ``"mi300x"``).
        display_name: marketing name (``"NVIDIA H100 SXM5 80GB"``).
        vendor: ``"nvidia"`` or ``"amd"``.
        arch: ``"sm_90"``, ``"gfx942"``...
        compute_units: SMs (NVIDIA) or CUs (AMD) enabled on the part.
        l2_domains: caches that hold data independently: AMD XCDs (each its own L2); on H100 and
            H200 the two L2 partitions, each modelled as holding its own copy of what its SMs read
            (validated against ncu: bench/results/simulator_validation.md); 1 on NVIDIA parts
            not yet validated, whose partitions are then treated as one cache.
        l2_partitions: NVIDIA L2 partitions joined by the fabric (2 on A100/H100/H200); equals
            ``l2_domains`` on AMD.
        l2_bytes_per_domain: L2 capacity of one domain in bytes.
        l2_line_bytes: L2 cache-line size in bytes.
        l2_sector_bytes: smallest L2 transfer unit in bytes (32 on NVIDIA; 128 on AMD).
        l2_associativity: ways per set, or None where not documented.
        llc_bytes: memory-side last-level cache (AMD Infinity Cache) in bytes, or 0 if none.
        dram_bytes_per_s: peak memory bandwidth in bytes/s (vendor figure).
        peak_bf16_flops: dense bf16 matrix peak in FLOP/s (vendor figure).
        peak_fp16_flops: dense fp16 matrix peak in FLOP/s (vendor figure); None where not given.
        peak_fp32_flops: fp32 vector (non-matrix) peak in FLOP/s: what a kernel without
            ``tl.dot`` can reach, whatever its input dtype (vendor figure); None where not given.
        l2_bytes_per_s: aggregate L2 bandwidth in bytes/s; a vendor figure, or an estimate that
            its YAML comment says is one and how it was derived; None where neither exists.
        shared_memory_per_cu_bytes: shared memory / LDS per SM or CU in bytes.
        l1_bytes_per_cu: L1 data cache per SM or CU in bytes (on NVIDIA the capacity L1 and
            shared memory share: what a kernel without shared memory gets).
        dispatch: ``"round_robin_domains"`` (AMD: workgroup p to XCD p % l2_domains, each XCD
            running its share in order), ``"in_order"`` (programs issued in id order to one L2)
            or ``"hashed_domains"`` (NVIDIA partitions: issued in id order, the partition of a
            program's SM a fixed hash of its id, since neighbouring ids land far apart).
        domain_miss_path: where a read that misses in its domain's L2 goes: ``"peer_domains"``
            (NVIDIA L2 partitions: to the other partitions, over the L2 fabric, and to DRAM
            only when none holds the line), ``"home_partition"`` (NVIDIA L2 partitions as the
            H100's partition probe measured them, bench/results/l2_measure_h100/: each line has a
            home partition; a read from the other partition's SMs is served by the home, filled
            there from DRAM when the home lacks it, and the line is then held in both, so it is
            a hit for the home's SMs and takes room in both halves; not yet any spec's default:
            on the GEMM it raises predicted hit rates further above ncu, simulator_validation.md)
            or ``"memory"`` (AMD XCDs and one-domain parts: to the LLC, if any, and DRAM).
        match_names: lower-case substrings of the device name (torch's ``name`` or AMD's
            ``gcnArchName``) that identify this GPU on a live device.
        link_bytes_per_s: the GPU's interconnect bandwidth to its peers, one direction, all
            links (bytes/s); None where not known (the overlap model then refuses the spec).
        peer_bytes_per_s: the most one GPU can send to ONE peer (bytes/s): the whole link
            bandwidth behind a switch (NVSwitch), one link's where each pair has its own (xGMI).
        copy_engine_bytes_per_s: a copy engine's peer copy rate (bytes/s).
        sm_copy_bytes_per_s / sm_copy_half_programs: peer copies by SM programs (Triton
            ``put``): rate = sm_copy_bytes_per_s x P / (P + sm_copy_half_programs) for P programs.
        link_latency_s: one-way latency of a store or flag to a peer (s); None where not measured.
        matmul_tile_rates: measured per-SM bf16 matmul rates of the bundled Triton GEMM tile
            configurations, ``"BLOCK_MxBLOCK_NxBLOCK_K:num_warps:num_stages=FLOP/s"`` each (one
            program per SM); empty where not measured (the overlap model then scales the peak).
        matmul_tile_fixed_s: seconds per tile beyond its FLOPs (prologue, epilogue), measured
            with the rates; None where not measured.
        matmul_last_wave_exp: a persistent GEMM's last wave with a fraction f of the programs
            busy costs f ** this of a full wave (measured with the rates); None where not measured.
    """

    name: str
    display_name: str
    vendor: str
    arch: str
    compute_units: int
    l2_domains: int
    l2_partitions: int
    l2_bytes_per_domain: int
    l2_line_bytes: int
    l2_sector_bytes: int
    l2_associativity: int | None
    llc_bytes: int
    dram_bytes_per_s: float
    peak_bf16_flops: float
    shared_memory_per_cu_bytes: int
    l1_bytes_per_cu: int
    dispatch: str
    domain_miss_path: str
    match_names: tuple = field(default_factory=tuple)
    link_bytes_per_s: float | None = None
    peer_bytes_per_s: float | None = None
    copy_engine_bytes_per_s: float | None = None
    sm_copy_bytes_per_s: float | None = None
    sm_copy_half_programs: float | None = None
    link_latency_s: float | None = None
    matmul_tile_rates: tuple = ()
    matmul_tile_fixed_s: float | None = None
    matmul_last_wave_exp: float | None = None
    peak_fp16_flops: float | None = None
    peak_fp32_flops: float | None = None
    l2_bytes_per_s: float | None = None

    @property
    def l2_bytes_total(self) -> int:
        return self.l2_domains * self.l2_bytes_per_domain

    @property
    def compute_units_per_domain(self) -> int:
        return self.compute_units // self.l2_domains

    @property
    def compute_unit_label(self) -> str:
        """``"SM"`` on NVIDIA, ``"CU"`` on AMD (for messages)."""
        return "SM" if self.vendor == "nvidia" else "CU"


# The loader needs HardwareSpec defined above, so it is imported last.
from .loader import (  # noqa: E402
    DEFAULT_SIMULATED,
    DeviceInfo,
    Target,
    UnknownHardwareError,
    describe,
    detect_device,
    list_specs,
    load_spec,
    match_spec,
    value_sources,
    resolve_target,
)

__all__ = [
    "DEFAULT_SIMULATED",
    "DeviceInfo",
    "HardwareSpec",
    "Target",
    "UnknownHardwareError",
    "describe",
    "detect_device",
    "list_specs",
    "load_spec",
    "match_spec",
    "resolve_target",
    "value_sources",
]
