"""AMD device detection (hwspecs/loader.py) as the rocprofv3 path needs it: gcnArchName and CU count,
the compute partition mode, and a mismatch said, not ignored."""
import pytest

from swizzleperf.hwspecs import DeviceInfo, loader, match_spec, resolve_target

MB = 1 << 20


@pytest.mark.parametrize("name, cus, arch, partition, spec, domains, phrase", [
    ("AMD Instinct MI300X", 304, "gfx942:sramecc+:xnack-", "SPX", "mi300x", 8, "matches mi300x"),
    ("AMD Instinct MI325X", 304, "gfx942:sramecc+:xnack-", "", "mi325x", 8, "matches mi325x"),
    ("", 304, "gfx942:sramecc+:xnack-", "", "mi300x", 8, "matches mi300x"),
    ("AMD Instinct MI350X", 256, "gfx950:sramecc+:xnack-", "", "mi355x", 8, "matches mi355x"),
    ("AMD Instinct MI300X", 38, "gfx942:sramecc+:xnack-", "CPX", "mi300x", 1, "in CPX mode (1 of 8 XCDs per device)"),
    ("AMD Instinct MI300X", 152, "gfx942:sramecc+:xnack-", "DPX", "mi300x", 4, "in DPX mode (4 of 8 XCDs per device)"),
    ("AMD Instinct MI300X", 76, "gfx942:sramecc+:xnack-", "QPX", "mi300x", 2, "in QPX mode (2 of 8 XCDs per device)"),
])
def test_amd_devices_match_by_arch_and_cus(name, cus, arch, partition, spec, domains, phrase):
    matched, message = match_spec(DeviceInfo(name, "amd", cus, 4 * MB, arch, partition))
    assert (matched.name, matched.l2_domains, matched.compute_units) == (spec, domains, cus)
    assert phrase in message and "check the spec" not in message


def test_a_cpx_device_is_measured_with_one_l2_domain():
    target = resolve_target("mi300x", device=DeviceInfo("AMD Instinct MI300X", "amd", 38, 4 * MB, "gfx942", "CPX"))
    assert (target.mode, target.spec.l2_domains, target.spec.compute_units_per_domain) == ("measured", 1, 38)
    assert target.spec.display_name == "AMD Instinct MI300X (CPX: 1 XCD per device)"


@pytest.mark.parametrize("device, said", [
    (DeviceInfo("AMD Instinct MI300X", "amd", 38, 4 * MB, "gfx942", "SPX"),
     "reports partition mode SPX where its 38 CUs make CPX"),
    (DeviceInfo("AMD Instinct MI300A", "amd", 228, 4 * MB, "gfx942:sramecc+:xnack-"),
     "reports 228 CUs = 6 XCDs of 38, which is no partition mode of AMD Instinct MI300X (an MI300A has 6 XCDs)"),
    (DeviceInfo("AMD Instinct MI300X", "amd", 300, 4 * MB, "gfx942"), "reports 300 CUs where the spec says 304"),
])
def test_a_mismatch_is_reported(device, said):
    _, message = match_spec(device)
    assert said in message and message.endswith("check the spec")


def test_the_partition_mode_is_read_from_sysfs(tmp_path):
    card = tmp_path / "card1" / "device"
    card.mkdir(parents=True)
    (card / "current_compute_partition").write_text("cpx\n")
    assert loader.amd_partition(str(tmp_path / "card*" / "device" / "current_compute_partition")) == "CPX"
    assert loader.amd_partition(str(tmp_path / "none*" / "x")) == ""
