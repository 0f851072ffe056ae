#!/usr/bin/env python3
"""Search-engine throughput: how fast `rlflow optimise` matches and applies rules, per zoo model.

    scripts/bench/bench_search                                   # every zoo model in models/
    scripts/bench/bench_search --models bert_base --time-limit 25
    scripts/bench/bench_search --strategy greedy -- --all-rules  # after --: more rlflow optimise options

Each model runs once: `rlflow optimise MODEL --search taso --cost-model analytic --device-profile h100
--budget 1000 --time-limit 25 --no-verify --measure off --json` (the analytic cost is deterministic
and cheap, so the table measures the engine, not the cost model), under GNU time for the peak RSS.
Columns: expansions/s (graphs whose rewrites were enumerated, per search second), matches/s
(matches offered to apply, per second spent matching), applies/s (rewritten graphs built, per second
spent applying), the search seconds and why it stopped, the peak RSS of the whole process, and the
refused matches by reason. Targets (issue 13): BERT-base converges in <= 10 s, peak RSS <= 1 GB.
Reported, never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from rlflow_json import ZOO, split_passthrough  # noqa: E402
GNU_TIME = "/usr/bin/time"


def run_one(binary: str, model: Path, args: argparse.Namespace, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlflow-bench-search-") as tmp:
        report = os.path.join(tmp, "time.txt")
        cmd = [GNU_TIME, "-v", "-o", report, binary, "optimise", str(model), "-o", os.path.join(tmp, "out.onnx"),
               "--search", args.strategy, "--cost-model", "analytic", "--device-profile", args.profile,
               "--budget", str(args.budget), "--time-limit", str(args.time_limit), "--no-verify",
               "--measure", "off", "--json", *extra]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        text = Path(report).read_text() if Path(report).exists() else ""
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    rss_mb = int(m.group(1)) / 1024 if m else float("nan")
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = None
    if p.returncode != 0 or not isinstance(doc, dict) or "search_report" not in doc:
        lines = [line for line in p.stderr.strip().splitlines() if line.strip() and "Command exited" not in line]
        return {"model": model.stem, "error": f"exit {p.returncode}: {lines[-1] if lines else 'no output'}"}
    r = doc["search_report"]
    sec = r["seconds"]
    offered = r["generated"] + r["rejected"]
    return {
        "model": model.stem,
        "ops": doc["before"]["ops"],
        "expanded": r["expanded"],
        "generated": r["generated"],
        "unique_graphs": r["unique_graphs"],
        "expansions_per_s": r["expanded"] / sec["total"] if sec["total"] > 0 else 0.0,
        "matches_per_s": offered / sec["match"] if sec["match"] > 0 else 0.0,
        "applies_per_s": r["generated"] / sec["apply"] if sec["apply"] > 0 else 0.0,
        "seconds": sec,
        "stop_reason": r["stop_reason"],
        "peak_rss_mb": rss_mb,
        "rejections": r.get("rejections", {}),
        "speedup_predicted": doc["cost"]["speedup"],
    }


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    out = [f"search {args.strategy}, cost analytic/{args.profile} (predicted), budget {args.budget}, "
           f"time limit {args.time_limit:g} s",
           "",
           "| model | ops | expanded | expansions/s | matches/s | applies/s | s match / apply / cost / total | stopped | "
           "peak RSS MB | refused (reason: count) | predicted speedup |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | ---: |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | | | | | | | FAIL: {r['error'].replace('|', '/')} | | | |")
            continue
        s = r["seconds"]
        refused = ", ".join(f"{k}: {v}" for k, v in sorted(r["rejections"].items())) or "none"
        out.append(f"| {r['model']} | {r['ops']} | {r['expanded']} | {r['expansions_per_s']:.1f} | {r['matches_per_s']:.0f} "
                   f"| {r['applies_per_s']:.0f} | {s['match']:.2f} / {s['apply']:.2f} / {s['cost']:.2f} / {s['total']:.2f} "
                   f"| {r['stop_reason']} | {r['peak_rss_mb']:.0f} | {refused} | {r['speedup_predicted']:.3f}x |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    argv, extra = split_passthrough(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=None, help="zoo names or .onnx paths (default: the zoo models in models/)")
    ap.add_argument("--strategy", default="taso", choices=["taso", "greedy", "exhaustive"])
    ap.add_argument("--profile", default="h100", help="analytic device profile (default h100)")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--time-limit", type=float, default=25.0)
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    ap.add_argument("--json", metavar="OUT", type=Path, help="also write the rows as JSON")
    args = ap.parse_args(argv)
    if not os.access(GNU_TIME, os.X_OK):
        print(f"bench_search: {GNU_TIME} (GNU time) is needed for the peak RSS", file=sys.stderr)
        return 2
    names = args.models if args.models else [z for z in ZOO if (ROOT / "models" / f"{z}.onnx").is_file()]
    if not names:
        print("bench_search: no models (run scripts/corpus/export_models first, or pass --models)", file=sys.stderr)
        return 2
    rows = []
    for name in names:
        path = Path(name) if name.endswith(".onnx") else ROOT / "models" / f"{name}.onnx"
        if not path.is_file():
            rows.append({"model": name, "error": f"no such model file: {path}"})
            continue
        print(f"[bench_search] {path.name}", file=sys.stderr)
        rows.append(run_one(args.binary, path, args, extra))
    print(markdown(rows, args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
