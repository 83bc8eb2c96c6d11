"""The roof: how close one measured candidate is to what the GPU can do, and how much any tile
order could still gain.

Inputs are the launch's FLOPs (the problem's own arithmetic, ``KernelSpec.flops``), the bytes it
moved (DRAM, and L2 where known: ncu's counters on NVIDIA, rocprof's on AMD, else the simulator's
prediction, each labelled), its time, and the peaks of the hardware spec (every one in
``hwspecs/*.yaml`` with its source):

- achieved TFLOP/s = flops / time; GB/s = bytes / time; each as a share of its peak: the compute
  peak is the dtype's dense matrix peak for a kernel whose FLOPs run on tensor / matrix cores
  (``KernelSpec.compute == "matrix"``), the fp32 vector peak otherwise;
- the **binding roof**: ``"latency / too few waves"`` when the launch has fewer programs than one
  wave (the spec's SMs / CUs x programs resident on each) or no share reaches ``LOW_SHARE``
  (40 %): no throughput limit explains the time; else the roof with the largest share
  (``"compute"``, ``"DRAM"``, ``"L2"``);
- the **tile-order ceiling**: a tile order changes which bytes move, never the FLOPs nor the bytes
  the problem must move at least (``KernelSpec.min_bytes``, the compulsory traffic). So no order
  can make the launch faster than ``floor = max(flops / compute peak, min_bytes / DRAM peak)``,
  and the most any order can gain is ``time / floor - 1``. ``roof_share = floor / time`` is "at
  N % of the roof". The bound is sound for peaks that are true upper bounds (vendor peaks are);
  it is loose where the peak is not reachable (cuBLAS reaches about 67-80 % of the H100's dense
  bf16 peak), so it says when to stop, never that a gain is there.

A simulated run has no time: its roof carries the predicted bytes (labelled predicted), the
floor, and the roof that would bind under the predicted traffic (the largest of flops / compute
peak, predicted DRAM bytes / DRAM peak); achieved rates and shares are "not measured".
"""
from __future__ import annotations

#: Below this share of every peak, no throughput limit explains the time (module docstring).
LOW_SHARE = 0.40
#: The default of ``--roof-margin``: a run whose ceiling is at most this stops at the baseline.
DEFAULT_MARGIN = 0.03
NOT_MEASURED = "not measured"
_DTYPE_PEAK = {"bfloat16": "peak_bf16_flops", "float16": "peak_fp16_flops"}


def peaks(hw, dtype: str, compute: str = "vector") -> dict:
    """The peaks a roof compares with, from the hardware spec ``hw``: ``{flops, flops_field,
    flops_what, dram_bytes_per_s, l2_bytes_per_s, spec}`` (None where the spec has no such peak:
    an fp32 matrix kernel, an L2 bandwidth nobody published or estimated)."""
    field = _DTYPE_PEAK.get(dtype) if compute == "matrix" else "peak_fp32_flops"
    what = (f"dense {dtype} matrix" if compute == "matrix" else "fp32 vector")
    return {"flops": getattr(hw, field, None) if field else None, "flops_field": field, "flops_what": what,
            "dram_bytes_per_s": hw.dram_bytes_per_s, "l2_bytes_per_s": getattr(hw, "l2_bytes_per_s", None),
            "spec": hw.name}


def floor_ms(flops: float, min_bytes: float, peak: dict) -> float | None:
    """The fastest any tile order could run: max(flops / compute peak, min_bytes / DRAM peak), ms;
    None where neither term is known."""
    terms = [flops / peak["flops"] if peak.get("flops") and flops else 0.0,
             min_bytes / peak["dram_bytes_per_s"] if peak.get("dram_bytes_per_s") and min_bytes else 0.0]
    return 1e3 * max(terms) if max(terms) > 0 else None


def binding(shares: dict, programs: int | None, wave: int | None) -> tuple:
    """``(binding roof, why)`` from the shares of each peak (module docstring's rule)."""
    if programs and wave and programs < wave:
        return "latency / too few waves", f"{programs} programs, fewer than one wave of {wave}"
    known = {k: v for k, v in shares.items() if v is not None}
    if not known:
        return "unknown", "no peak and achieved rate to compare"
    name, share = max(known.items(), key=lambda kv: kv[1])
    if share < LOW_SHARE:
        return "latency / too few waves", (f"every share under {LOW_SHARE:.0%} (the largest: {name} "
                                           f"{share:.0%})")
    return name, f"{name} at {share:.0%} of its peak, the largest share"


def measured(flops: float, min_bytes: float, hw, dtype: str, compute: str = "vector", *, time_ms: float,
             dram_bytes: float | None = None, dram_source: str = "", l2_bytes: float | None = None,
             l2_source: str = "", programs: int | None = None, wave: int | None = None) -> dict:
    """The roof of a measured launch: achieved rates, their shares, the binding roof, the floor and
    the ceiling (module docstring), plain JSON-like values."""
    peak = peaks(hw, dtype, compute)
    seconds = time_ms * 1e-3
    tflops = flops / seconds / 1e12 if flops else 0.0
    gbps = None if dram_bytes is None else dram_bytes / seconds / 1e9
    l2_gbps = None if l2_bytes is None else l2_bytes / seconds / 1e9
    shares = {"compute": _share(tflops * 1e12 if flops else None, peak["flops"]),
              "DRAM": _share(None if gbps is None else gbps * 1e9, peak["dram_bytes_per_s"]),
              "L2": _share(None if l2_gbps is None else l2_gbps * 1e9, peak["l2_bytes_per_s"])}
    bound, why = binding(shares, programs, wave)
    floor = floor_ms(flops, min_bytes, peak)
    out = {"status": "measured", "flops": flops, "flops_source": "the problem's arithmetic (KernelSpec.flops)",
           "min_bytes": min_bytes, "dram_bytes": dram_bytes, "dram_source": dram_source,
           "l2_bytes": l2_bytes, "l2_source": l2_source, "time_ms": time_ms,
           "tflops": tflops, "gbps": gbps, "l2_gbps": l2_gbps, "shares": shares, "peaks": peak,
           "binding": bound, "binding_why": why, "floor_ms": floor,
           "roof_share": None if floor is None else floor / time_ms,
           "max_gain": None if floor is None else max(0.0, time_ms / floor - 1.0)}
    out["line"] = line(out)
    return out


def predicted(flops: float, min_bytes: float, hw, dtype: str, compute: str = "vector", *,
              dram_bytes: float | None = None, dram_source: str = "", programs: int | None = None,
              wave: int | None = None) -> dict:
    """The roof of a simulated launch: no time, so no achieved rate (``"not measured"``); the
    predicted DRAM bytes (labelled predicted), the floor and the roof that would bind under the
    predicted traffic."""
    peak = peaks(hw, dtype, compute)
    times = {"compute": flops / peak["flops"] if peak["flops"] and flops else None,
             "DRAM": dram_bytes / peak["dram_bytes_per_s"] if dram_bytes and peak["dram_bytes_per_s"] else None}
    known = {k: v for k, v in times.items() if v}
    if programs and wave and programs < wave:
        bound, why = "latency / too few waves", f"{programs} programs, fewer than one wave of {wave}"
    elif known:
        bound = max(known, key=known.get)
        why = f"predicted: {bound} would take longest at its peak ({1e3 * known[bound]:.3f} ms)"
    else:
        bound, why = "unknown", "no peak to compare the predicted traffic with"
    out = {"status": "predicted", "flops": flops, "flops_source": "the problem's arithmetic (KernelSpec.flops)",
           "min_bytes": min_bytes, "dram_bytes": dram_bytes, "dram_source": f"{dram_source} (predicted)",
           "l2_bytes": None, "l2_source": NOT_MEASURED, "time_ms": None, "tflops": NOT_MEASURED,
           "gbps": NOT_MEASURED, "l2_gbps": NOT_MEASURED,
           "shares": {"compute": NOT_MEASURED, "DRAM": NOT_MEASURED, "L2": NOT_MEASURED}, "peaks": peak,
           "binding": bound, "binding_why": why, "floor_ms": floor_ms(flops, min_bytes, peak),
           "roof_share": NOT_MEASURED, "max_gain": NOT_MEASURED}
    out["line"] = line(out)
    return out


def _share(achieved: float | None, peak: float | None) -> float | None:
    return achieved / peak if achieved is not None and peak else None


def line(roof: dict) -> str:
    """One line for the report, the prompt and the screen: "68 % of the dense bfloat16 matrix peak
    (672 TFLOP/s), DRAM 2780 GB/s (58 %), bound by compute; at 71 % of the roof: no tile order can
    gain more than 41 %", or for a simulated run what was predicted and that rates are not
    measured."""
    if roof["status"] != "measured":
        floor = "" if roof["floor_ms"] is None else f"; no order can run under {roof['floor_ms']:.3f} ms"
        dram = "" if roof["dram_bytes"] is None else f"{roof['dram_bytes'] / 1e9:.2f} GB DRAM predicted, "
        return f"{dram}would be {roof['binding']}-bound{floor}; achieved rates not measured"
    s, p = roof["shares"], roof["peaks"]
    parts = [f"{roof['tflops']:.1f} TFLOP/s" + (f" ({s['compute']:.0%} of the {p['flops_what']} peak)"
                                                if s["compute"] is not None else "")] if roof["flops"] else []
    if roof["gbps"] is not None:
        parts.append(f"DRAM {roof['gbps']:.0f} GB/s" + (f" ({s['DRAM']:.0%})" if s["DRAM"] is not None else ""))
    if roof["l2_gbps"] is not None:
        parts.append(f"L2 {roof['l2_gbps']:.0f} GB/s" + (f" ({s['L2']:.0%})" if s["L2"] is not None else ""))
    text = ", ".join(parts) + f"; bound by {roof['binding']}"
    return text + (f"; {stop_line(roof)}" if roof["roof_share"] is not None else "")


def stop_line(roof: dict) -> str:
    """ "at N % of the roof: no tile order can gain more than M %" (measured roofs only); below half
    the roof (M over 100 %) the roof bounds nothing an order could gain, and the line says that
    instead of a bound in the thousands of per cent."""
    share = f"at {100 * roof['roof_share']:.0f} % of the roof"
    if roof["max_gain"] > 1.0:
        return f"{share}: far below it, the roof bounds no order's gain here"
    return f"{share}: no tile order can gain more than {100 * roof['max_gain']:.0f} %"


def at_roof(metrics: dict, margin: float = DEFAULT_MARGIN) -> str | None:
    """The stop reason when a measured candidate is at the roof: no tile order can gain more than
    ``margin`` or the candidate's own relative spread (time_spread_ms / time_ms), whichever is
    larger; else None (also for a simulated or unmeasured candidate)."""
    roof = (metrics or {}).get("roof") or {}
    gain = roof.get("max_gain")
    if roof.get("status") != "measured" or not isinstance(gain, (int, float)):
        return None
    time_ms, spread = metrics.get("time_ms"), metrics.get("time_spread_ms")
    noise = spread / time_ms if time_ms and spread else 0.0
    limit = max(margin, noise)
    if gain > limit:
        return None
    return (f"{stop_line(roof)} (bound by {roof['binding']}; the margin is {100 * limit:.1f} %): "
            f"stopped instead of spending iterations")
