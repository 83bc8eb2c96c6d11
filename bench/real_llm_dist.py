"""What a real local model proposed in a distributed run, against what the built-in policy would have
(issue #22.6).

    python -m bench.real_llm_dist RUN_DIR --out summary.md

Reads the run's report.json and transcript.jsonl; rebuilds the policy's plan for the same kernel,
problem, W and GPU (agent/proposers/overlap_policy.py, from an empty history: what it would have
proposed first), and says for each of the model's proposals: its verdict and figures, whether it is
a configuration of the kernel's declared space at all, whether the policy would have proposed it
within the same number of iterations (and at which place of its plan otherwise), and whether it
carries a tile-order source the policy can never write.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def policy_plan(report: dict) -> tuple:
    """``(plan, space, key, predicted)``: the canonical texts of the policy's plan (first proposal
    first) for the run's kernel, problem, W and GPU from an empty history; those of the declared
    space; the function that makes a text canonical; the raw prediction (ms) of each planned one."""
    from swizzleperf import hwspecs
    from swizzleperf.agent.distributed.evaluator import DistEvaluator, DistTarget
    from swizzleperf.agent.proposers.base import ProposalContext
    from swizzleperf.agent.proposers.overlap_policy import OverlapPolicy, _key
    from swizzleperf.agent.verification.load import load_spec
    kernel = Path(report["kernel_path"])
    d = report["distributed"]
    target = DistTarget(hwspecs.load_spec(report["hardware"]), d["world_size"], report["mode"], report["target"])
    ev = DistEvaluator(kernel_path=kernel, module_source=kernel.read_text(), spec=load_spec(kernel),
                       problem_name=d["problem"], world_size=d["world_size"], target=target,
                       candidates_dir=Path("/nonexistent"), problem_sizes=d["sizes"])
    policy = OverlapPolicy(ev)
    baseline = ev.baseline()[1]
    context = ProposalContext(kernel_name=ev.spec.name, kernel_source="", target_name=ev.spec.rewrite_target,
                              target_source=baseline, hardware=target.spec, mode=target.mode, problem=ev.problem,
                              meta={}, tile_grid=(), swizzle_args=(), analysis="", profile={})
    seen, plan, predicted = {_key(baseline, ev)}, [], {}
    for _, entry in policy.plan(context):
        key = _key(entry["source"], ev)
        if key not in seen:
            seen.add(key)
            plan.append(key)
            predicted[key] = (entry.get("predicted") or {}).get("predicted_time_ms")
    space = {_key(e["source"], ev) for e in ev.ranked_space()}
    return plan, space, (lambda text: _key(text, ev)), predicted


def summarize(run_dir: Path, command: str = "bash bench/real_llm_dist.sh") -> str:
    report = json.loads((run_dir / "report.json").read_text())
    plan, space, key, predicted = policy_plan(report)
    requests = [json.loads(line) for line in (run_dir / "transcript.jsonl").read_text().splitlines() if line.strip()] \
        if (run_dir / "transcript.jsonl").exists() else []
    attempts = [a for a in report["attempts"]]
    n = len(attempts)
    d = report["distributed"]
    lines = [f"# A real model on the distributed optimize: {report['kernel']} at {d['problem']}, W = {d['world_size']}, "
             f"{report['hardware']} ({report['mode']})", "", f"`{command}`", "",
             f"- proposer: {report['proposer']}; {report['iterations']} iterations; stopped: {report['stop_reason']}",
             f"- tokens: {report['prompt_tokens']} in, {report['completion_tokens']} out, {len(requests)} requests "
             f"(transcript.jsonl)",
             f"- the policy's first {n} proposals for the same kernel, problem, W and GPU: "
             + ", ".join(f"`{p}`" for p in plan[:n]), "",
             "| # | the model's proposal | verdict | time (ms) | in the declared space | the policy would propose it | "
             "a tile-order source |", "|---|---|---|---|---|---|---|"]
    novel = proposed = 0
    for a in attempts:
        if a["verdict"] == "NO_CANDIDATE":
            lines.append(f"| {a['iteration']} | none: {(a.get('reason') or '')[:160]} | NO_CANDIDATE | | | | |")
            continue
        proposed += 1
        source = _source_of(run_dir, a)
        try:
            k = key(source) if source else None
        except Exception:  # an attempt whose text does not parse: it is in no space
            k = None
        place = plan.index(k) + 1 if k in plan else None
        would = ("yes, as its proposal " + str(place) if place and place <= n else
                 f"later (place {place} of its plan)" if place else "never")
        swizzle = bool(source) and '"swizzle"' in source and "def " in source
        novel += would.startswith(("never", "later"))
        t = a.get("time_ms") if a.get("time_ms") is not None else a.get("predicted_time_ms")
        t_text = "n/a" if t is None else f"{t:.3f}" + ("" if a.get("time_ms") is not None else " predicted")
        lines.append(f"| {a['iteration']} | `{(k or source or a['name'])[:160]}` | {a['verdict']} | {t_text} | "
                     f"{'yes' if k in space else 'no'} | {would} | {'yes' if swizzle else 'no'} |")
    lines += ["", f"{novel} of the model's {proposed} proposals are ones the policy would not have made within "
                  f"{n} iterations (proposed later in its plan, or never)."]
    best = report.get("best") or {}
    model_times = [a.get("predicted_time_ms") for a in attempts if a["verdict"] == "PASS" and a.get("predicted_time_ms")]
    policy_times = [(predicted.get(p), p) for p in plan[:n] if predicted.get(p) is not None]
    if model_times and policy_times:
        fastest = min(policy_times)
        lines.append(f"The model's best proposal is predicted at {min(model_times):.3f} ms; the policy's first {n} "
                     f"proposals at best {fastest[0]:.3f} ms (`{fastest[1]}`): predictions of the same model, not "
                     f"measurements.")
    lines += [f"The run's best: {best.get('name')} ({(d.get('answer') or {}).get('line', '')})."]
    return "\n".join(lines) + "\n"


def _source_of(run_dir: Path, attempt: dict) -> str | None:
    """The configuration text of an attempt: its candidate's config file, else its name."""
    for path in sorted((run_dir / "candidates").glob(f"candidate{attempt['iteration']:03d}-*.config.json")) \
            if (run_dir / "candidates").exists() else []:
        return path.read_text()
    return attempt.get("config") and json.dumps(attempt["config"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", required=True)
    parser.add_argument("--command", default="bash bench/real_llm_dist.sh")
    args = parser.parse_args(argv)
    text = summarize(Path(args.run_dir), args.command)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
