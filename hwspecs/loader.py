"""Load the GPU specs in this folder, detect the live GPU and decide what a run targets.

``load_spec("h100")`` reads ``hwspecs/h100.yaml``; ``detect_device()`` asks torch what GPU is
present; ``match_spec`` pairs the two; ``resolve_target`` turns ``--hw`` (or its absence) and the
detected device into a ``Target``: measured on the live GPU, or simulated from a spec.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import dataclass
from importlib import resources

import yaml

from . import HardwareSpec

logger = logging.getLogger(__name__)

DEFAULT_SIMULATED = "mi300x"
#: AMD compute partition modes of an 8-XCD GPU by the XCDs each device gets (ROCm docs, MI300
#: GPU partitioning: SPX one device of 8 XCDs, DPX two of 4, QPX four of 2, CPX eight of 1).
PARTITION_MODES = {1: "CPX", 2: "QPX", 4: "DPX"}
_SYSFS_PARTITION = "/sys/class/drm/card*/device/current_compute_partition"  # the spec simulated when no GPU is present and no --hw is given
VENDORS = ("nvidia", "amd")
DISPATCH_POLICIES = ("in_order", "round_robin_domains", "hashed_domains")
DOMAIN_MISS_PATHS = ("peer_domains", "home_partition", "memory")
_MB = 1 << 20
_DETECT = object()  # resolve_target's default: detect the device now


class UnknownHardwareError(ValueError):
    """A hardware name with no YAML file, or a live GPU that matches no spec."""


@dataclass(frozen=True)
class DeviceInfo:
    """What the driver reports of the live GPU (device 0).

    Attributes:
        name: torch's device name (``"NVIDIA H100 80GB HBM3"``, ``"AMD Instinct MI300X"``).
        vendor: ``"nvidia"`` or ``"amd"``.
        compute_units: SMs (NVIDIA) or CUs (AMD) the driver reports.
        l2_bytes: L2 size the driver reports in bytes (0 if unknown). On AMD it is one XCD's L2.
        arch: ``"sm_90"`` on NVIDIA, the ``gcnArchName`` on AMD (``"gfx942:sramecc+:xnack-"``).
        partition: AMD compute partition mode as the driver reports it (``"SPX"``, ``"CPX"``...;
            amdgpu's ``current_compute_partition`` in sysfs), ``""`` where unknown or NVIDIA.
    """

    name: str
    vendor: str
    compute_units: int
    l2_bytes: int
    arch: str
    partition: str = ""

    @property
    def compute_unit_label(self) -> str:
        return "SM" if self.vendor == "nvidia" else "CU"


@dataclass(frozen=True)
class Target:
    """What a run targets.

    Attributes:
        spec: the spec the run uses (for the simulator, prompts and reports).
        mode: ``"measured"`` (kernels run and are profiled on ``device``) or ``"simulated"``.
        device: the detected GPU, or None where there is none.
        message: one line for the user saying what was chosen and why.
    """

    spec: HardwareSpec
    mode: str
    device: DeviceInfo | None
    message: str


# ----------------------------------------------------------------------------- loading


def list_specs() -> list[str]:
    """Names of the bundled specs (YAML stems), sorted."""
    folder = resources.files(__package__)
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_spec(name: str) -> HardwareSpec:
    """Read ``hwspecs/<name>.yaml`` (name case-insensitive) into a ``HardwareSpec``.

    Raises:
        UnknownHardwareError: no YAML file of that name.
        ValueError: the file lacks a field, has an unexpected key or a value of the wrong type.
    """
    key = name.strip().lower()
    known = list_specs()
    if key not in known:
        raise UnknownHardwareError(f"unknown hardware '{name}': known {', '.join(known)}")
    path = f"hwspecs/{key}.yaml"
    data = yaml.safe_load(resources.files(__package__).joinpath(f"{key}.yaml").read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of spec fields, got {type(data).__name__}")
    _check_keys(path, data)
    values = {f.name: _checked_value(path, f.name, f.type, data[f.name])
              for f in dataclasses.fields(HardwareSpec) if f.name in data}
    _check_choices(path, key, values)
    return HardwareSpec(**values)


def value_sources(name: str) -> dict:
    """``{field: its source}``: the comment after each value in ``hwspecs/<name>.yaml`` (every
    value there names its source on its own line: ``dram_bytes_per_s: 3.35e12  # NVIDIA H100
    datasheet...``), for reports that show a peak with where it came from.

    Raises:
        UnknownHardwareError: no YAML file of that name.
    """
    key = name.strip().lower()
    if key not in list_specs():
        raise UnknownHardwareError(f"unknown hardware '{name}': known {', '.join(list_specs())}")
    sources = {}
    for line in resources.files(__package__).joinpath(f"{key}.yaml").read_text().splitlines():
        field_name, colon, rest = line.partition(":")
        if colon and not line.startswith((" ", "#")) and "  # " in rest:
            sources[field_name.strip()] = rest.split("  # ", 1)[1].strip()
    return sources


def _check_keys(path: str, data: dict) -> None:
    """Raise ValueError naming ``path`` and the first missing or unexpected key."""
    expected = [f.name for f in dataclasses.fields(HardwareSpec)]
    optional = {f.name for f in dataclasses.fields(HardwareSpec)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    missing = [k for k in expected if k not in data and k not in optional]
    if missing:
        raise ValueError(f"{path}: missing key '{missing[0]}' (a spec needs all of {', '.join(expected)})")
    unexpected = [k for k in data if k not in expected]
    if unexpected:
        raise ValueError(f"{path}: unexpected key '{unexpected[0]}' (not a HardwareSpec field)")


def _checked_value(path: str, key: str, annotation: str, value):
    """Return ``value`` converted to the field's type (float for rates, tuple for match_names).

    Raises:
        ValueError: "hwspecs/x.yaml: compute_units must be an integer, got '132'".
    """
    if not isinstance(annotation, str):  # without ``from __future__ import annotations``
        annotation = getattr(annotation, "__name__", str(annotation))
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if annotation == "str" and isinstance(value, str):
        return value
    if annotation == "int" and is_int:
        return value
    if annotation == "int | None" and (is_int or value is None):
        return value
    if annotation == "float" and (is_int or isinstance(value, float)):
        return float(value)
    if annotation == "float | None" and (is_int or isinstance(value, float) or value is None):
        return None if value is None else float(value)
    if annotation == "tuple" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.lower() for v in value)
    wanted = {"str": "a string", "int": "an integer", "int | None": "an integer or null",
              "float": "a number", "float | None": "a number or null",
              "tuple": "a list of strings"}[annotation]
    raise ValueError(f"{path}: {key} must be {wanted}, got {value!r}")


def _check_choices(path: str, key: str, values: dict) -> None:
    """Raise ValueError where name, vendor or dispatch is not one of the allowed values."""
    if values["name"] != key:
        raise ValueError(f"{path}: name must be '{key}' (the file's stem), got '{values['name']}'")
    if values["vendor"] not in VENDORS:
        raise ValueError(f"{path}: vendor must be one of {VENDORS}, got '{values['vendor']}'")
    if values["dispatch"] not in DISPATCH_POLICIES:
        raise ValueError(f"{path}: dispatch must be one of {DISPATCH_POLICIES}, got '{values['dispatch']}'")
    if values["domain_miss_path"] not in DOMAIN_MISS_PATHS:
        raise ValueError(f"{path}: domain_miss_path must be one of {DOMAIN_MISS_PATHS}, "
                         f"got '{values['domain_miss_path']}'")


# ----------------------------------------------------------------------------- the live device


def detect_device() -> DeviceInfo | None:
    """Describe GPU 0 through torch, or return None where there is no usable GPU.

    Never raises and prints nothing: a missing torch, a broken driver or a failed CUDA/HIP
    initialisation all mean "no GPU" here (the cause is logged at DEBUG level).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _detect_with_torch()
    except Exception as exc:  # noqa: BLE001 -- the contract is "never raise": any failure is no GPU
        logger.debug("GPU detection failed, treating as no GPU: %r", exc)
        return None


def _detect_with_torch() -> DeviceInfo | None:
    import torch  # lazily: importing torch is slow and must not happen at package import

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    is_amd = bool(getattr(torch.version, "hip", None))
    arch = getattr(props, "gcnArchName", "") if is_amd else f"sm_{props.major}{props.minor}"
    return DeviceInfo(
        name=props.name,
        vendor="amd" if is_amd else "nvidia",
        compute_units=int(props.multi_processor_count),
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
        arch=arch,
        partition=amd_partition() if is_amd else "",
    )


def amd_partition(pattern: str = _SYSFS_PARTITION) -> str:
    """The compute partition mode amdgpu reports for the first card that has one (``"SPX"``,
    ``"CPX"``...), or ``""`` where the file is missing or unreadable."""
    import glob
    for path in sorted(glob.glob(pattern)):
        try:
            return open(path).read().strip().upper()
        except OSError:
            continue
    return ""


def match_spec(info: DeviceInfo) -> tuple[HardwareSpec | None, str]:
    """Find the spec whose ``match_names`` occur in the device's name (then, failing that, its arch).

    The longest matching substring wins. The device's SM/CU count and L2 size are compared with
    the spec; any difference is named in the message.

    Returns:
        (spec, one-line message), or (None, message saying no spec matched).
    """
    spec, matched_on = _find_spec(info)
    if spec is None:
        return None, (f"detected GPU '{info.name}' matches no spec in hwspecs/ "
                      f"(known: {', '.join(list_specs())}); pass --hw NAME")
    head = f"detected {_device_summary(info)} matches {spec.name}"
    mismatches = []
    if info.vendor == "amd":
        spec, mode, mismatches = _amd_partitioned(info, spec)
        head += f" in {mode}" if mode else ""
    mismatches += _mismatches(info, spec)
    if not mismatches:
        return spec, head
    return spec, f"{head} by {matched_on} but {' and '.join(mismatches)}: using {spec.name}, check the spec"


def _amd_partitioned(info: DeviceInfo, spec: HardwareSpec) -> tuple:
    """``(spec, mode, mismatches)``: the spec for the XCDs this AMD device holds. A device of
    ``k`` XCDs' CUs (``k`` = CUs / CUs per XCD, fewer than the spec's) is a compute partition of
    the GPU (CPX: one XCD and one L2 domain per device); the mode the driver reports, if any, must
    agree. ``mode`` is ``""`` for the whole GPU in SPX mode."""
    per_xcd, mismatches = spec.compute_units_per_domain, []
    xcds, rest = divmod(info.compute_units, per_xcd)
    if rest or not 0 < xcds < spec.l2_domains:
        if info.partition and info.partition != "SPX":
            mismatches.append(f"reports partition mode {info.partition} with {info.compute_units} CUs")
        return spec, info.partition if info.partition not in ("", "SPX") else "", mismatches
    mode = PARTITION_MODES.get(xcds, "")
    if not mode:
        mismatches.append(f"reports {info.compute_units} CUs = {xcds} XCDs of {per_xcd}, which is no partition "
                          f"mode of {spec.display_name} (an MI300A has 6 XCDs)")
    elif info.partition and info.partition != mode:
        mismatches.append(f"reports partition mode {info.partition} where its {info.compute_units} CUs make {mode}")
    label = mode or f"{xcds} XCDs"
    part = dataclasses.replace(spec, compute_units=info.compute_units, l2_domains=xcds, l2_partitions=xcds,
                               display_name=f"{spec.display_name} ({label}: {xcds} XCD{'s' if xcds > 1 else ''} "
                                            f"per device)")
    return part, f"{label} mode ({xcds} of {spec.l2_domains} XCDs per device)" if mode else "", mismatches


def _find_spec(info: DeviceInfo) -> tuple[HardwareSpec | None, str]:
    """Return (spec, "name" or "arch"): name matches take precedence over arch matches."""
    specs = [s for s in (load_spec(n) for n in list_specs()) if s.vendor == info.vendor]
    for matched_on, text in (("name", info.name.lower()), ("arch", info.arch.lower())):
        hits = [(len(m), s) for s in specs for m in s.match_names if m and m in text]
        if hits:
            return max(hits, key=lambda hit: hit[0])[1], matched_on
    return None, ""


def _mismatches(info: DeviceInfo, spec: HardwareSpec) -> list[str]:
    """Differences between what the driver reports and the spec, as phrases."""
    label = info.compute_unit_label
    found = []
    if info.compute_units != spec.compute_units:
        found.append(f"reports {info.compute_units} {label}s where the spec says {spec.compute_units}")
    # torch reports the whole L2 on NVIDIA and one XCD's L2 on AMD: either is consistent.
    if info.l2_bytes and info.l2_bytes not in (spec.l2_bytes_per_domain, spec.l2_bytes_total):
        found.append(f"reports {_fmt_mb(info.l2_bytes)} L2 where the spec says "
                     f"{spec.l2_domains} x {_fmt_mb(spec.l2_bytes_per_domain)}")
    return found


def _fmt_mb(n_bytes: int) -> str:
    """Bytes as MB the way drivers print them (1 MB = 2**20 bytes): "50 MB", "126.5 MB"."""
    if n_bytes % _MB == 0:
        return f"{n_bytes // _MB} MB"
    return f"{n_bytes / _MB:.1f} MB"


def _device_summary(info: DeviceInfo) -> str:
    """ "NVIDIA H100 80GB HBM3 (132 SMs, 50 MB L2)" """
    parts = [f"{info.compute_units} {info.compute_unit_label}s"]
    if info.l2_bytes:
        parts.append(f"{_fmt_mb(info.l2_bytes)} L2")
    return f"{info.name} ({', '.join(parts)})"


# ----------------------------------------------------------------------------- the run's target


def resolve_target(hw: str | None = None, device: DeviceInfo | None | object = _DETECT) -> Target:
    """Decide the spec and mode of a run from ``--hw`` and the live device.

    Args:
        hw: a spec name (``--hw``), or None / ``"auto"`` to follow the detected GPU.
        device: the live GPU; left out, it is detected now. Tests pass a fake DeviceInfo or None.

    Returns:
        measured on the detected GPU when it matches the spec asked for (or, with no ``hw``, any
        spec); simulated otherwise (``DEFAULT_SIMULATED`` when there is neither GPU nor ``hw``).

    Raises:
        UnknownHardwareError: ``hw`` names no spec, or with no ``hw`` the detected GPU matches none.
    """
    if device is _DETECT:
        device = detect_device()
    if hw is None or hw.strip().lower() == "auto":
        return _auto_target(device)
    return _named_target(load_spec(hw), device)


def _auto_target(device: DeviceInfo | None) -> Target:
    if device is None:
        spec = load_spec(DEFAULT_SIMULATED)
        return Target(spec, "simulated", None, f"no GPU detected: simulating {spec.name} ({spec.display_name})")
    spec, message = match_spec(device)
    if spec is None:
        raise UnknownHardwareError(message)
    return Target(spec, "measured", device, message)


def _named_target(spec: HardwareSpec, device: DeviceInfo | None) -> Target:
    if device is None:
        return Target(spec, "simulated", None, f"--hw {spec.name}: simulated (no GPU detected)")
    matched, message = match_spec(device)
    if matched is not None and matched.name == spec.name:
        return Target(matched, "measured", device, message)  # matched: the device's partition of spec
    return Target(spec, "simulated", device, f"--hw {spec.name}: simulated (the detected GPU is {device.name})")


def describe(target: Target) -> str:
    """A few lines for ``swizzleperf hw``: the detected device, the spec's key numbers, the mode."""
    spec, device = target.spec, target.device
    device_line = "no GPU" if device is None else f"{_device_summary(device)}, {device.arch}"
    llc = _fmt_mb(spec.llc_bytes) if spec.llc_bytes else "none"
    partitions = f" ({spec.l2_partitions} partitions)" if spec.l2_partitions != spec.l2_domains else ""
    return "\n".join([
        f"device: {device_line}",
        f"spec:   {spec.name} = {spec.display_name} ({spec.vendor}, {spec.arch})",
        f"        {spec.compute_units} {spec.compute_unit_label}s ({spec.compute_units_per_domain} per L2 domain), "
        f"L2 {spec.l2_domains} x {_fmt_mb(spec.l2_bytes_per_domain)}{partitions}, "
        f"{spec.l2_line_bytes} B lines, {spec.l2_sector_bytes} B sectors",
        f"        LLC {llc}, DRAM {spec.dram_bytes_per_s / 1e12:.2f} TB/s, "
        f"bf16 {spec.peak_bf16_flops / 1e12:.1f} TFLOP/s, dispatch {spec.dispatch}",
        f"mode:   {target.mode}: {target.message}",
    ])
