"""The real-model results page (#14, #25): per run, the proposer, its iterations and verdicts, how
many verified candidates differ from every earlier order (tile maps compared), the best order
found against the baseline and the expert, and what the model cost in requests, tokens (with how
many were the server's own counts) and time; then, for every LLM run, where each verified
candidate comes from: a copy of a source printed in the prompt that asked for it, that source with
one constant changed, or not in the prompt.

    python -m bench.real_llm_summary runs WORKDIR          # the runs table (needs the record)
    python -m bench.real_llm_summary page WORKDIR... --out summary.md

``runs`` reads the SQLite record and the candidates' tile maps, so it runs before bench/real_llm.sh
prunes a workdir to text (it keeps the table as ``WORKDIR/runs.md``); ``page`` needs only the run
folders' ``report.json`` and ``transcript.jsonl`` and each workdir's ``runs.md``.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import tokenize
from pathlib import Path

import numpy as np

from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval import history


def summarise(workdir: Path) -> str:
    """The runs table of a workdir's record (markdown)."""
    record = RunRecord(workdir)
    with record.connect() as db:
        runs = db.execute("SELECT run_id, kernel, proposer, status, started_at, finished_at, run_dir FROM runs "
                          "ORDER BY started_at").fetchall()
    lines = ["| run | kernel | proposer | status | iterations | verdicts | verified and new | best (L2) | "
             "baseline (L2) | expert (L2) | requests | prompt / completion tokens (server's) | minutes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run_id, kernel, proposer, status, started, finished, run_dir in runs:
        it = record.iterations(run_id)
        requests = record.requests(run_id)
        candidates = it[it.kind == "candidate"]
        verdicts = candidates.verdict.value_counts().to_dict()
        new = _verified_and_new(it, workdir / run_dir if not Path(run_dir).is_absolute() else Path(run_dir))
        best = it[it.is_best == 1]
        base, expert = it[it.kind == "baseline"], it[it.kind == "expert"]
        server = requests.tokens_source.str.startswith("server").sum() if not requests.empty else 0
        sent = (requests.tokens_source != "none: not sent").sum() if not requests.empty else 0
        tokens = (f"{int(requests.prompt_tokens.sum())} / {int(requests.completion_tokens.sum())} "
                  f"({server} of {sent} sent requests)") if not requests.empty else "-"
        lines.append(
            f"| {run_id} | {kernel} | {proposer.split(' at ')[0]}{_evidence_note(proposer)} | {status} | "
            f"{len(candidates)} | {', '.join(f'{k} {v}' for k, v in verdicts.items())} | {new} of {len(candidates)} | "
            f"{_l2(best)} | {_l2(base)} | {_l2(expert)} | {len(requests)} | {tokens} | "
            f"{((finished or started) - started) / 60:.1f} |")
    return "\n".join(lines) + "\n"


def _evidence_note(proposer: str) -> str:
    found = re.search(r" \((ranking evidence off)\)$", proposer)
    return f" ({found.group(1)})" if found else ""


def _verified_and_new(it, run_dir: Path) -> int:
    """Candidates that passed verification with a tile map no earlier attempt (baseline and
    expert included) had."""
    seen, new = set(), 0
    for row in it.itertuples():
        found = sorted((run_dir / "candidates").glob(f"{row.kind}{row.iteration:03d}-*.map.npy"))
        path = found[0] if found else None
        if row.verdict != "PASS" or path is None:
            continue
        digest = hashlib.sha1(np.load(path).tobytes()).hexdigest()
        if row.kind == "candidate" and digest not in seen:
            new += 1
        seen.add(digest)
    return new


def _l2(rows) -> str:
    if rows.empty or rows.l2_hit_rate.isna().all():
        return "-"
    row = rows.iloc[0]
    return f"{row['name']} {row.l2_hit_rate:.1%}"


# ------------------------------------------------------------------------------ provenance
def provenance(run_dir: Path) -> list:
    """Each candidate an LLM run took (from its transcript) with its verdict (from report.json)
    and where its source comes from, against the sources printed in the prompt that asked for it
    (system and user messages; docstrings and layout aside): ``{"iteration", "verdict", "kind":
    "copy" | "one constant" | "not in the prompt", "of": the prompt's label of that source
    ("grouped-n:32", "the baseline", "attempt 3"), "change": "32 -> 16", "top_untried": the first
    order of the prompt's ranking not tried yet, or ''}``."""
    requests = history.read_transcript(run_dir)
    if requests.empty:
        return []
    report = json.loads((Path(run_dir) / "report.json").read_text())
    verdicts = {a["iteration"]: a["verdict"] for a in report.get("attempts", [])}
    out = []
    for iteration, group in requests.groupby("iteration"):
        taken = group[(group.outcome == "ok") & (group.rejected.fillna("") == "")]
        if not len(taken):
            continue
        row = taken.iloc[-1]
        source = history.function_source(row.reply, history._target_name(row.messages))
        prompt = [m.get("content") or "" for m in row.messages or [] if m.get("role") in ("system", "user")]
        out.append({"iteration": int(iteration), "verdict": verdicts.get(int(iteration), ""),
                    **classify(source, prompt_sources(prompt)), "top_untried": top_untried(prompt)})
    return out


def prompt_sources(messages: list) -> list:
    """``[(label, source)]`` of every python code block in the prompt's messages, labelled by what
    the prompt says it is: a catalog order (the ```name`:`` line above it), the baseline, or an
    attempt of the history (its ``### Attempt N`` heading)."""
    out = []
    for text in messages:
        heading = ""
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("### Attempt"):
                heading = " ".join(line.split()[1:3]).rstrip(":").lower()
            if line.strip().startswith("```") and line.strip() != "```":
                end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
                if end is None:
                    continue
                above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                named = re.fullmatch(r"`([^`]+)`:", above)
                label = named.group(1) if named else "the baseline" if "current" in above else heading or above[:40]
                out.append((label, "\n".join(lines[i + 1:end])))
    return out


def top_untried(messages: list) -> str:
    """The first order of the prompt's ranking table that is marked not tried ('' without one)."""
    for text in messages:
        for line in text.split("\n"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 4 and cells[3] == "no" and "%" in cells[1]:
                return cells[0]
    return ""


def classify(source: str, sources: list) -> dict:
    """``{"kind", "of", "change"}``: ``source`` against the prompt's ``[(label, source)]``."""
    mine = _tokens(source)
    if mine is None:
        return {"kind": "no code", "of": "", "change": ""}
    for label, text in sources:
        if _tokens(text) == mine:
            return {"kind": "copy", "of": label, "change": ""}
    for label, text in sources:
        theirs = _tokens(text)
        if theirs is None or len(theirs) != len(mine):
            continue
        diff = [(a, b) for a, b in zip(theirs, mine) if a != b]
        if len(diff) == 1 and diff[0][0][0] == diff[0][1][0] == tokenize.NUMBER:
            return {"kind": "one constant", "of": label, "change": f"{diff[0][0][1]} -> {diff[0][1][1]}"}
    return {"kind": "not in the prompt", "of": "", "change": ""}


def _tokens(source: str) -> list | None:
    """The code's tokens without comments, strings (docstrings), layout and redundant ``()``
    around a whole expression statement; None for text that does not tokenize."""
    if not source.strip():
        return None
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER, tokenize.STRING}
    try:
        return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source.strip() + "\n").readline)
                if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def provenance_table(workdirs: list) -> tuple:
    """``(markdown lines, totals)`` over every LLM run folder of ``workdirs``."""
    lines = ["| run | kernel | ranking evidence | candidates with code | verified | a copy of a source in its prompt | "
             "that source with one constant changed | not in the prompt | the best |",
             "|---|---|---|---|---|---|---|---|---|"]
    totals = {}
    for workdir in workdirs:
        for run_dir in sorted((Path(workdir) / "runs").glob("*/report.json")):
            report = json.loads(run_dir.read_text())
            if not str(report.get("proposer", "")).startswith("llm:"):
                continue
            every = [r for r in provenance(run_dir.parent) if r["kind"] != "no code"]
            rows = [r for r in every if r["verdict"] == "PASS"]
            own = sum(r["kind"] == "not in the prompt" for r in every)
            evidence = "off" if "ranking evidence off" in report["proposer"] else "on"
            kinds = {k: [r for r in rows if r["kind"] == k] for k in ("copy", "one constant", "not in the prompt")}
            for k, found in kinds.items():
                totals.setdefault(evidence, {}).setdefault(k, 0)
                totals[evidence][k] += len(found)
            for key, n in (("verified", len(rows)), ("proposed", len(every)), ("own", own)):
                totals[evidence][key] = totals[evidence].get(key, 0) + n
            lines.append(f"| {report['run_id']} | {report['kernel']} | {evidence} | {len(every)} ({own} not in the "
                         f"prompt) | {len(rows)} | "
                         f"{_listed(kinds['copy'])} | {_listed(kinds['one constant'])} | "
                         f"{len(kinds['not in the prompt'])} | {_best(report, rows)} |")
    return lines, totals


def _listed(rows: list) -> str:
    if not rows:
        return "0"
    return f"{len(rows)}: " + ", ".join(f"#{r['iteration']} {r['of']}" + (f" ({r['change']})" if r["change"] else "")
                                        for r in rows)


def _best(report: dict, rows: list) -> str:
    best = report.get("best") or {}
    if best.get("name") in (None, "baseline") or best.get("iteration", 0) == 0:
        return "the baseline (nothing better)"
    mine = next((r for r in rows if r["iteration"] == best["iteration"]), None)
    l2 = f"{best['l2_hit_rate']:.1%}" if best.get("l2_hit_rate") is not None else "n/a"
    if mine is None:
        return f"#{best['iteration']} {l2}"
    what = {"copy": f"a copy of {mine['of']}", "one constant": f"{mine['of']} with {mine['change']}",
            "not in the prompt": "not in its prompt"}[mine["kind"]]
    top = f"; the prompt's top-ranked untried order: {mine['top_untried']}" if mine["top_untried"] else ""
    return f"#{best['iteration']} {l2}: {what}{top}"


def page(workdirs: list) -> str:
    """summary.md: each workdir's runs table (its ``runs.md``), then where the LLM's verified
    candidates come from."""
    out = ["# Real-model runs (bench/results/real_llm/)", "",
           "Commands: `bash bench/real_llm.sh run` (the runs with the ranking evidence, 2026-11-24: `work/`), "
           "`bash bench/real_llm.sh run-no-evidence` (the same runs with `--no-evidence`: `work_no_evidence/`), "
           "then `python -m bench.real_llm_summary page " + " ".join(Path(w).name for w in workdirs)
           + " --out summary.md` (run in bench/results/real_llm/). Every figure is simulated:mi300x (no GPU); "
           "every request is in each run folder's transcript.jsonl.", ""]
    for workdir in workdirs:
        table = Path(workdir) / "runs.md"
        notes = Path(workdir) / "NOTES.md"
        out += [f"## {Path(workdir).name}/", "", table.read_text().rstrip() if table.exists() else
                "(no runs.md: the table is written before the record is pruned)", ""]
        out += [notes.read_text().rstrip(), ""] if notes.exists() else []
    lines, totals = provenance_table(workdirs)
    out += ["## Where the model's verified candidates come from", "",
            "Each candidate the run took, against the sources printed in the prompt that asked for it "
            "(docstrings and layout aside): the catalog orders of the simulator's ranking (the prompt's "
            "evidence), the baseline, the attempts it shows. \"One constant changed\": the same code but one "
            "number.", "", *lines, ""]
    for evidence, t in sorted(totals.items(), reverse=True):
        out.append(f"- ranking evidence {evidence}: {t['proposed']} candidates with code, {t['own']} of them not in "
                   f"their prompt; {t['verified']} verified: {t['copy']} copies of a source in the prompt, "
                   f"{t['one constant']} with one constant changed, {t['not in the prompt']} not in the prompt.")
    return "\n".join(out) + "\n"


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("runs", "page"))
    parser.add_argument("workdirs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = summarise(args.workdirs[0]) if args.what == "runs" else page(args.workdirs)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
