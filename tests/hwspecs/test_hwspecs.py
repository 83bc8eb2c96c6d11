"""Hardware specs: every YAML loads and names its sources; device matching and target resolution
on fake devices (no GPU needed)."""
import dataclasses
import re
from importlib import resources

import pytest

from swizzleperf.hwspecs import (
    DeviceInfo,
    HardwareSpec,
    UnknownHardwareError,
    describe,
    detect_device,
    list_specs,
    load_spec,
    match_spec,
    resolve_target,
)

EXPECTED_SPECS = ["a100", "b200", "h100", "h200", "mi250x", "mi300x", "mi325x", "mi355x"]
MB = 1 << 20

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "nvidia", 132, 50 * MB, "sm_90")
H200 = DeviceInfo("NVIDIA H200", "nvidia", 132, 60 * MB, "sm_90")
H100_PCIE = DeviceInfo("NVIDIA H100 PCIe", "nvidia", 114, 50 * MB, "sm_90")
UNKNOWN = DeviceInfo("NVIDIA GeForce RTX 4090", "nvidia", 128, 72 * MB, "sm_89")
MI300X = DeviceInfo("AMD Instinct MI300X", "amd", 304, 4 * MB, "gfx942:sramecc+:xnack-")


def _yaml_text(name: str) -> str:
    return resources.files("swizzleperf.hwspecs").joinpath(f"{name}.yaml").read_text()


def test_list_specs_is_sorted_and_complete():
    assert list_specs() == EXPECTED_SPECS


@pytest.mark.parametrize("name", EXPECTED_SPECS)
def test_every_yaml_loads(name):
    spec = load_spec(name)
    assert isinstance(spec, HardwareSpec)
    assert spec.name == name
    assert spec.compute_units % spec.l2_domains == 0
    assert spec.match_names and all(m == m.lower() for m in spec.match_names)
    assert spec.dram_bytes_per_s > 1e12 and spec.peak_bf16_flops > 1e14  # bytes/s and FLOP/s, not TB/s


@pytest.mark.parametrize("name", EXPECTED_SPECS)
def test_every_value_line_names_its_source(name):
    value_lines = [ln for ln in _yaml_text(name).splitlines() if re.match(r"^\w+:", ln)]
    keys = {ln.split(":")[0] for ln in value_lines}
    fields = HardwareSpec.__dataclass_fields__
    required = {k for k, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required <= keys <= set(fields) and len(keys) == len(value_lines)
    for line in value_lines:
        value, sep, comment = line.partition(" #")
        assert sep and len(comment.strip()) >= 8, f"{name}.yaml: no source comment on {line!r}"


def test_load_spec_is_case_insensitive():
    assert load_spec("MI300X") == load_spec("mi300x")


def test_unknown_name_lists_known_specs():
    with pytest.raises(UnknownHardwareError) as err:
        load_spec("x")
    assert str(err.value) == f"unknown hardware 'x': known {', '.join(EXPECTED_SPECS)}"
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("vendor: nvidia", "vendr: nvidia"), "missing key 'vendor'"),
    (lambda t: t + "extra_key: 1  # source\n", "unexpected key 'extra_key'"),
    (lambda t: t.replace("compute_units: 132", "compute_units: '132'"), "compute_units must be an integer"),
])
def test_bad_yaml_names_file_and_key(monkeypatch, tmp_path, edit, expected):
    (tmp_path / "h100.yaml").write_text(edit(_yaml_text("h100")))
    monkeypatch.setattr(resources, "files", lambda package: tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"hwspecs/h100.yaml: {expected}")):
        load_spec("h100")


def test_mi300x_domains():
    spec = load_spec("mi300x")
    assert spec.l2_bytes_total == 8 * 4 * MB
    assert spec.compute_units_per_domain == 38
    assert spec.dispatch == "round_robin_domains"


def test_nvidia_l2_domains():
    for name in ("a100", "b200"):  # not validated against ncu yet: one cache
        spec = load_spec(name)
        assert (spec.l2_domains, spec.l2_sector_bytes, spec.dispatch) == (1, 32, "in_order"), name
    for name, total in (("h100", 50 * MB), ("h200", 60 * MB)):  # two partitions, validated on an H200
        spec = load_spec(name)
        assert (spec.l2_domains, spec.l2_bytes_total, spec.dispatch) == (2, total, "hashed_domains"), name
        assert spec.compute_units_per_domain == 66


def test_match_h100_exact():
    spec, message = match_spec(H100)
    assert spec.name == "h100"
    assert message == "detected NVIDIA H100 80GB HBM3 (132 SMs, 50 MB L2) matches h100"


def test_match_h200():
    spec, message = match_spec(H200)
    assert spec.name == "h200"
    assert "check the spec" not in message


def test_match_h100_with_other_sm_count_reports_mismatch():
    spec, message = match_spec(H100_PCIE)
    assert spec.name == "h100"
    assert message == ("detected NVIDIA H100 PCIe (114 SMs, 50 MB L2) matches h100 by name but reports "
                       "114 SMs where the spec says 132: using h100, check the spec")


def test_match_amd_by_name_accepts_per_xcd_l2():
    spec, message = match_spec(MI300X)
    assert spec.name == "mi300x"
    assert message == "detected AMD Instinct MI300X (304 CUs, 4 MB L2) matches mi300x"


def test_match_amd_by_arch_when_name_is_unhelpful():
    spec, message = match_spec(DeviceInfo("", "amd", 304, 4 * MB, "gfx942:sramecc+:xnack-"))
    assert spec.name == "mi300x"
    mi325x, _ = match_spec(DeviceInfo("AMD Instinct MI325X", "amd", 304, 4 * MB, "gfx942"))
    assert mi325x.name == "mi325x"  # the name wins over the shared gfx942 arch


def test_match_unknown_gpu():
    spec, message = match_spec(UNKNOWN)
    assert spec is None
    assert message == ("detected GPU 'NVIDIA GeForce RTX 4090' matches no spec in hwspecs/ "
                       f"(known: {', '.join(EXPECTED_SPECS)}); pass --hw NAME")


def test_resolve_no_device_simulates_mi300x():
    target = resolve_target(device=None)
    assert (target.spec.name, target.mode, target.device) == ("mi300x", "simulated", None)
    assert target.message == "no GPU detected: simulating mi300x (AMD Instinct MI300X)"
    assert resolve_target("auto", device=None) == target


def test_resolve_h100_device_measures_h100():
    target = resolve_target(None, device=H100)
    assert (target.spec.name, target.mode, target.device) == ("h100", "measured", H100)


def test_resolve_named_matching_device_measures():
    assert resolve_target("H100", device=H100).mode == "measured"


def test_resolve_named_other_hw_simulates_with_reason():
    target = resolve_target("mi300x", device=H100)
    assert (target.spec.name, target.mode) == ("mi300x", "simulated")
    assert target.message == "--hw mi300x: simulated (the detected GPU is NVIDIA H100 80GB HBM3)"


def test_resolve_named_without_device_simulates():
    target = resolve_target("h200", device=None)
    assert (target.spec.name, target.mode) == ("h200", "simulated")
    assert target.message == "--hw h200: simulated (no GPU detected)"


def test_resolve_unknown_device_raises():
    with pytest.raises(UnknownHardwareError, match="matches no spec"):
        resolve_target(None, device=UNKNOWN)


def test_resolve_unknown_name_raises():
    with pytest.raises(UnknownHardwareError, match="unknown hardware 'tpu'"):
        resolve_target("tpu", device=None)


def test_describe_mentions_spec_and_mode():
    text = describe(resolve_target(device=None))
    assert "mi300x" in text and "simulated" in text and "no GPU" in text
    assert "8 x 4 MB" in text and "round_robin_domains" in text
    measured = describe(resolve_target(device=H100))
    assert "h100" in measured and "measured" in measured and "NVIDIA H100 80GB HBM3" in measured


def test_detect_device_never_raises(monkeypatch, capsys):
    torch = pytest.importorskip("torch")

    def broken():
        raise RuntimeError("driver broken")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert detect_device() is None
    assert capsys.readouterr() == ("", "")


def test_detect_device_without_gpu_is_none(monkeypatch):
    torch = pytest.importorskip("torch")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert detect_device() is None
