"""The run's outputs in its folder: the best kernel file, its diff, report.json and report.md."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from swizzleperf.agent import lessons
from swizzleperf.agent.verify import Verdict


def figures(attempt: dict | None) -> dict | None:
    """The headline figures of an attempt for the report (None for a missing attempt)."""
    if not attempt:
        return None
    m = attempt.get("metrics") or {}
    return {"name": attempt.get("name"), "iteration": attempt.get("iteration"),
            "verdict": attempt.get("verdict"), "reason": attempt.get("reason", ""),
            "l2_hit_rate": m.get("l2_hit_rate"), "source": m.get("l2_source"),
            "time_ms": m.get("time_ms"), "time_spread_ms": m.get("time_spread_ms"),
            "time_source": m.get("time_source"), "dram_bytes": m.get("dram_bytes"),
            "dram_source": m.get("dram_source"), "predicted_l2_hit_rate": m.get("predicted_l2_hit_rate"),
            "predicted_source": m.get("predicted_source"), "tflops": m.get("tflops"),
            "notes": m.get("notes", ""), "cross_domain_bytes": m.get("predicted_cross_domain_bytes"),
            **{k: m[k] for k in _DISTRIBUTED_FIGURES if m.get(k) is not None}}


#: The figures of each attempt in report.json's ``attempts``.
_ATTEMPT_FIGURES = ("l2_hit_rate", "time_ms", "dram_bytes", "predicted_cross_domain_bytes",
                    "predicted_time_ms")

#: What a distributed candidate's metrics add (agent/distributed.py): the overlap model's figures.
_DISTRIBUTED_FIGURES = ("predicted_time_ms", "predicted_compute_ms", "predicted_comm_ms",
                        "predicted_hidden_share", "predicted_breakdown", "torch_nccl_predicted_ms",
                        "config")


def build_report(state: dict, run: dict, target_message: str, extra: dict | None = None) -> dict:
    """report.json's content from the loop's final state and the run's row; ``extra`` is what the
    run's evaluator adds (a distributed run: world size, problem, torch + NCCL's figures)."""
    best, baseline, expert = state.get("best"), state.get("baseline"), state.get("expert")
    history = state.get("history", [])
    report = {"kernel": run["kernel"], "kernel_path": run["kernel_path"], "hardware": run["hardware"],
              "mode": run["mode"], "target": target_message, "run_id": run["run_id"],
              "run_dir": run["run_dir"], "proposer": run["proposer"],
              "iterations": int(state.get("iteration", 0)), "stop_reason": state.get("stop_reason", ""),
              "baseline": figures(baseline), "expert": figures(expert), "best": figures(best),
              "attempts": [{k: h.get(k) for k in ("iteration", "name", "verdict", "reason", "lesson")}
                           | {k: (h.get("metrics") or {}).get(k) for k in _ATTEMPT_FIGURES}
                           for h in history],
              "confirmation": state.get("confirmation"),
              "prompt_tokens": sum(h.get("prompt_tokens") or 0 for h in history),
              "completion_tokens": sum(h.get("completion_tokens") or 0 for h in history),
              "cost_usd": sum(h.get("cost_usd") or 0.0 for h in history), **(extra or {})}
    if best:
        verified = best.get("verdict") == Verdict.PASS.value
        report["best"].update(permutation_verified=verified, numerics_verified=verified,
                              swizzle_source=best.get("source", ""), kind=best.get("kind"))
        report["best"].update(_comparisons(best, baseline, expert, run["mode"]))
    return report


def _comparisons(best: dict, baseline: dict | None, expert: dict | None, mode: str) -> dict:
    out = {}
    for label, other in (("baseline", baseline), ("expert", expert)):
        bm, om = best.get("metrics") or {}, (other or {}).get("metrics") or {}
        if other is not None and (other is best or other.get("source") == best.get("source")):
            # the same order twice: no change, whatever two samples say
            out[f"same_as_{label}"] = True
            if bm.get("time_ms") and om.get("time_ms"):
                out[f"speedup_vs_{label}"], out[f"beyond_noise_vs_{label}"] = 1.0, False
        elif bm.get("time_ms") and om.get("time_ms"):
            out[f"speedup_vs_{label}"] = om["time_ms"] / bm["time_ms"]
            out[f"beyond_noise_vs_{label}"] = lessons.beyond_noise(best, other, mode)
        if bm.get("l2_hit_rate") is not None and om.get("l2_hit_rate") is not None:
            out[f"l2_gain_vs_{label}"] = bm["l2_hit_rate"] - om["l2_hit_rate"]
    return out


def write_outputs(run_dir: Path, report: dict, best: dict | None, kernel_filename: str) -> None:
    """Write report.json, report.md and, when there is a verified best, the best kernel and diff."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if best and best.get("kernel_file") and Path(best["kernel_file"]).exists():
        shutil.copyfile(best["kernel_file"], run_dir / kernel_filename)
        (run_dir / "best.diff").write_text(best.get("diff", ""))
        report["best_kernel_file"] = str(run_dir / kernel_filename)
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (run_dir / "report.md").write_text(render_markdown(report))


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _ms(f: dict) -> str:
    if f.get("time_ms") is None:
        return "not measured"
    return f"{f['time_ms']:.3f} ± {f['time_spread_ms']:.3f} ms"


def render_markdown(report: dict) -> str:
    """report.md: the headline table, the stop reason, every attempt, the best swizzle."""
    lines = [f"# swizzleperf run {report['run_id']}: {report['kernel']} on {report['hardware']} "
             f"({report['mode']})", "", f"- {report['target']}", f"- proposer: {report['proposer']}",
             f"- iterations: {report['iterations']}; stopped: {report['stop_reason']}",
             f"- tokens: {report['prompt_tokens']} in, {report['completion_tokens']} out; "
             f"cost ${report['cost_usd']:.4f}", "",
             *(distributed_table(report) if report.get("distributed") else _order_table(report))]
    best = report.get("best") or {}
    for label in ("baseline", "expert"):
        key = f"speedup_vs_{label}"
        if best.get(f"same_as_{label}"):
            lines.append(f"\nthe best is the {label}'s own order: no change")
        elif key in best:
            noise = "" if best[f"beyond_noise_vs_{label}"] else " (within the measured spread: no real change)"
            lines.append(f"\nspeedup vs {label}: {best[key]:.3f}x{noise}")
    lines += _expert_lines(report)
    lines += _workload_lines(report.get("workload"))
    lines += ["", "## Attempts", "", "| # | name | verdict | L2 hit rate | DRAM | cross-domain | time (ms) | lesson / reason |",
              "|---|---|---|---|---|---|---|---|"]
    for a in report["attempts"]:
        text = (a.get("lesson") or "") if a.get("verdict") == Verdict.PASS.value else \
            f"{a.get('reason') or ''} ({(a.get('lesson') or '').split(': ', 1)[-1].rstrip('.')})"
        text = " ".join(text.split()).replace("|", "/")
        t = "" if a.get("time_ms") is None else f"{a['time_ms']:.3f}"
        if not t and a.get("predicted_time_ms") is not None:
            t = f"{a['predicted_time_ms']:.3f} (predicted)"
        lines.append(f"| {a['iteration']} | {a['name']} | {a['verdict']} | {_pct(a.get('l2_hit_rate'))} | "
                     f"{_gb(a.get('dram_bytes'))} | {_gb(a.get('predicted_cross_domain_bytes'))} | {t} | {text} |")
    if best.get("swizzle_source"):
        title = "Best configuration" if report.get("distributed") else "Best swizzle"
        fence = "json" if report.get("distributed") else "python"
        lines += ["", f"## {title} ({best['name']}, verified: permutation {best['permutation_verified']}, "
                      f"numerics {best['numerics_verified']})", "", f"```{fence}", best["swizzle_source"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _gb(n) -> str:
    return "" if n is None else f"{n / 1e9:.2f} GB"


def _expert_lines(report: dict) -> list:
    """Why the expert scored what it did: its figures against the baseline's."""
    expert, baseline = report.get("expert"), report.get("baseline")
    if not expert or not baseline or expert.get("verdict") != Verdict.PASS.value or expert.get("l2_hit_rate") is None:
        return []
    text = (f"\nexpert {expert['name']}: L2 hit rate {_pct(expert['l2_hit_rate'])} against the baseline's "
            f"{_pct(baseline.get('l2_hit_rate'))} ({expert['source']})")
    if expert.get("dram_bytes") is not None and baseline.get("dram_bytes") is not None:
        text += f", DRAM {_gb(expert['dram_bytes'])} against {_gb(baseline['dram_bytes'])} ({expert['dram_source']})"
    if expert.get("time_ms") is not None and baseline.get("time_ms") is not None:
        text += f", {_ms(expert)} against {_ms(baseline)}"
    return [text + "."]


def _workload_lines(workload: dict | None) -> list:
    if not workload:
        return []
    sizes = ", ".join(f"{k}={v}" for k, v in workload["problem"].items())
    meta = ", ".join(f"{k}={v}" for k, v in workload["meta"].items())
    return ["", "## Workload", "", f"- problem: {sizes}; dtype {workload['dtype']}",
            f"- meta-parameters: {meta or 'none'}",
            f"- tile grid {' x '.join(map(str, workload['tile_grid']))} = {workload['programs']} programs; "
            f"{workload['programs_per_wave']} programs per wave ({workload['wave_note']})"]


def _order_table(report: dict) -> list:
    lines = ["| order | L2 hit rate | source | time | time source | DRAM bytes |", "|---|---|---|---|---|---|"]
    for label in ("baseline", "expert", "best"):
        f = report.get(label)
        if f:
            dram = "n/a" if f.get("dram_bytes") is None else f"{f['dram_bytes'] / 1e9:.2f} GB ({f['dram_source']})"
            lines.append(f"| {label}: {f['name']} | {_pct(f['l2_hit_rate'])} | {f['source']} | "
                         f"{' | '.join(time_cells(f))} | {dram} |")
    return lines + [f"\n{note}" for note in order_notes(report)]


def time_cells(f: dict) -> tuple:
    """``(time, time source)`` of one order, in that order, for report.md and the console alike:
    ``("3.355 ± 0.013 ms", "measured:events:NVIDIA H200")`` or ``("not measured", "n/a")``."""
    if f.get("time_ms") is None:
        return "not measured", "n/a"
    return _ms(f), f.get("time_source") or "n/a"


def order_notes(report: dict) -> list:
    """Why a single-GPU run's order table reads as it does where a newcomer would ask: DRAM bytes
    that stay put while the L2 hit rate moves (the simulated GPU's last-level cache or its other
    L2 partition serves the misses), and an expert below the baseline on a GPU whose dispatch sends
    neighbouring programs to different L2 domains. One sentence each, from the report's figures."""
    if report.get("distributed") or not report.get("hardware"):
        return []
    from swizzleperf import hwspecs
    try:
        spec = hwspecs.load_spec(report["hardware"])
    except hwspecs.UnknownHardwareError:
        return []
    return [note for note in (_same_dram_note(report, spec), _expert_domain_note(report, spec)) if note]


def _verified(report: dict) -> list:
    """The verified orders' figures: baseline, expert, best and every attempt."""
    orders = [report.get(label) for label in ("baseline", "expert", "best")] + list(report.get("attempts") or [])
    return [f for f in orders if f and f.get("verdict") == Verdict.PASS.value]


def _same_dram_note(report: dict, spec) -> str:
    orders = [f for f in _verified(report) if f.get("dram_bytes") is not None and f.get("l2_hit_rate") is not None]
    source = (report.get("baseline") or {}).get("dram_source") or ""
    rates = [f["l2_hit_rate"] for f in orders]
    if len(orders) < 2 or not source.startswith("simulated") or len({f["dram_bytes"] for f in orders}) > 1 \
            or max(rates) - min(rates) < 0.01:
        return ""
    head = (f"DRAM bytes are the same for every order ({_gb(orders[0]['dram_bytes'])}) while the L2 hit rate "
            f"ranges {min(rates):.0%}-{max(rates):.0%}: ")
    if spec.llc_bytes:
        cache = f"{spec.llc_bytes / 2 ** 20:.0f} MiB last-level cache" + (" (Infinity Cache)" if spec.vendor == "amd" else "")
        return (head + f"in the simulator every L2 miss here is served by the {spec.name}'s {cache} once its data "
                f"was first read from DRAM, so the orders differ in the traffic between the L2s and that cache "
                f"(and in L2 hit rate), not in DRAM bytes.")
    if spec.l2_domains > 1 and spec.domain_miss_path == "peer_domains":
        return (head + f"in the simulator a miss in one L2 partition of the {spec.name} is served by the other "
                f"partition once its data was first read from DRAM, so the orders differ in the traffic between "
                f"the partitions (and in L2 hit rate), not in DRAM bytes.")
    return ""


def _expert_domain_note(report: dict, spec) -> str:
    expert, baseline = report.get("expert"), report.get("baseline")
    if not expert or not baseline or expert.get("verdict") != Verdict.PASS.value \
            or baseline.get("verdict") != Verdict.PASS.value or None in (expert.get("l2_hit_rate"), baseline.get("l2_hit_rate")) \
            or expert["l2_hit_rate"] > baseline["l2_hit_rate"] - 0.01 \
            or spec.dispatch != "round_robin_domains" or spec.l2_domains < 2:
        return ""
    domain = "XCD" if spec.vendor == "amd" else "L2 domain"
    text = (f"The expert {expert['name']} scores below the baseline on the {spec.name}: its dispatch sends program "
            f"p to {domain} p % {spec.l2_domains}, each {domain} with its own {spec.l2_bytes_per_domain / 2 ** 20:.0f} "
            f"MiB L2, so programs that the order places side by side to share data run on different {domain}s")
    if expert.get("cross_domain_bytes") is not None and baseline.get("cross_domain_bytes") is not None:
        text += (f": {_gb(expert['cross_domain_bytes'])} of its L2 misses were at that moment in another {domain}'s "
                 f"L2, against {_gb(baseline['cross_domain_bytes'])} for the baseline")
    return text + f". Orders that keep the programs sharing data on one {domain} (the xcd-* orders) avoid this."


def distributed_table(report: dict) -> list:
    """The configurations against each other and against torch + NCCL (a distributed run)."""
    d = report["distributed"]
    torch_nccl = d["torch_nccl"]
    lines = [f"- problem {d['problem']} ({', '.join(f'{k}={v}' for k, v in d['sizes'].items())}), "
             f"{d['world_size']} ranks", "",
             "| configuration | time (ms) | source | compute (ms) | communication (ms) | hidden | "
             "per-rank GEMM L2 | vs torch + NCCL |", "|---|---|---|---|---|---|---|---|"]
    for label in ("baseline", "expert", "best"):
        f = report.get(label)
        if not f or f.get("verdict") != Verdict.PASS.value:
            continue
        measured = f.get("time_ms") is not None
        t = f["time_ms"] if measured else f.get("predicted_time_ms")
        source = f.get("time_source") if measured else f.get("predicted_source")
        ratio = torch_nccl["time_ms"] / t if t else None
        claim = "n/a" if ratio is None else (f"{ratio:.2f}x" if measured else f"{ratio:.2f}x predicted, not measured")
        l2 = "n/a" if f.get("l2_hit_rate") is None else f"{f['l2_hit_rate']:.1%} ({f['source']})"
        lines.append(f"| {label}: {f['name']} | {_num(t)} | {source} | {_num(f.get('predicted_compute_ms'))} | "
                     f"{_num(f.get('predicted_comm_ms'))} | {_pct(f.get('predicted_hidden_share'))} | {l2} | {claim} |")
    lines.append(f"| torch + NCCL | {_num(torch_nccl['time_ms'])} | {torch_nccl['source']} | "
                 f"{_num(torch_nccl['compute_ms'])} | {_num(torch_nccl['comm_ms'])} | 0.0% | n/a | 1.00x |")
    best = report.get("best") or {}
    t = best.get("time_ms") if best.get("time_ms") is not None else best.get("predicted_time_ms")
    if best.get("verdict") == Verdict.PASS.value and t and t > torch_nccl["time_ms"]:
        kind = "measured" if best.get("time_ms") is not None else "predicted"
        lines += ["", f"The library wins: torch + NCCL is {t / torch_nccl['time_ms']:.2f}x faster than the "
                      f"best configuration found ({kind})."]
    return lines


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
