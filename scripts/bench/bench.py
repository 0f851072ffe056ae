#!/usr/bin/env python3
"""The optimisation benchmark: every zoo model x every search strategy, measured end to end.

For each (model, strategy):
  1. `rlflow optimise MODEL --search S --target T [--cost-model C] --json`: the search under the target's cost
     model (ort: the onnxruntime CPU profile; h100: recorded H100 timings), then optimise's own never-slower
     check (the result is measured against the input on the target and kept only if the lower 95% bound of its
     speedup is >= 0.99; otherwise the input graph is written);
  2. `rlflow bench MODEL OUT --target ort --threads 1,all`: an independent measurement of the written file in
     onnxruntime, interleaved rounds in random order, median speedup with its 95% confidence interval;
  3. the written file against the original in onnxruntime (scripts/checks/check_ort.py).
Also the recorded H100 cost of the input and of the written graph (`rlflow cost --cost-model recorded`): a
prediction for an H100, labelled so. Writes results/bench.md and results/bench.json.

    scripts/bench/bench [--models resnet18 bert_base] [--strategies greedy taso] [--rounds 30] [--time-limit 60]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("lib", "checks")]
import check_ort  # noqa: E402
from rlflow_json import ZOO, rlflow  # noqa: E402



def recorded_ms(binary: str, model: str) -> float | None:
    r = rlflow(binary, ["cost", model, "--cost-model", "recorded"], 600)
    return r["doc"].get("total_ms") if r["ok"] else None


def ci(run: dict, k: int) -> str:
    f = run["files"][k]
    return f"{f['speedup']:.3f}x [{f['speedup_ci'][0]:.3f}, {f['speedup_ci'][1]:.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=ZOO)
    ap.add_argument("--strategies", nargs="+", default=["greedy", "taso"])
    ap.add_argument("--target", default="ort", help="optimise --target (default ort)")
    ap.add_argument("--cost-model", default=None, help="optimise --cost-model (default: the target's)")
    ap.add_argument("--rounds", type=int, default=30, help="rlflow bench rounds")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlflow-bench-") as tmp:
        for name in args.models:
            model = ROOT / "models" / f"{name}.onnx"
            if not model.exists():
                subprocess.run([str(ROOT / "scripts" / "corpus" / "export_models"), name], check=True)
            h100_before = recorded_ms(args.binary, str(model))
            for strat in args.strategies:
                out = Path(tmp) / f"{name}.{strat}.onnx"
                cmd = ["optimise", str(model), "-o", str(out), "--search", strat, "--target", args.target,
                       "--time-limit", str(args.time_limit)]
                if args.cost_model:
                    cmd += ["--cost-model", args.cost_model]
                if args.budget:
                    cmd += ["--budget", str(args.budget)]
                r = rlflow(args.binary, cmd, None)
                row = {"model": name, "strategy": strat, "ok": r["ok"], "wall_s": r["wall_s"]}
                if not r["ok"]:
                    row["error"] = r["error"]
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
                    continue
                doc = r["doc"]
                c = doc.get("cost") or {}
                row.update(search_s=doc["time_s"]["search"], stop=(doc.get("search_report") or {}).get("stop_reason"),
                           found=len(doc.get("steps", [])) if doc.get("measured") is None else
                           max((cand["steps"] for cand in doc["measured"]["candidates"]), default=0),
                           written_steps=len(doc.get("steps", [])), cost_model=c.get("model"),
                           predicted_speedup=c.get("speedup"), gate=doc.get("measured"), kept=doc.get("kept_input"))
                b = rlflow(args.binary, ["bench", str(model), str(out), "--target", "ort", "--threads", "1,all",
                                         "--rounds", str(args.rounds)], None)
                row["bench"] = b["doc"]["runs"] if b["ok"] else None
                if not b["ok"]:
                    row["bench_error"] = b["error"]
                row["ort_check"] = check_ort.check(str(model), str(out), 1e-4, 0)["ok"]
                row["h100_recorded_before_ms"] = h100_before
                row["h100_recorded_after_ms"] = recorded_ms(args.binary, str(out))
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(rows, indent=2))

    lines = ["| model | strategy | search s (stop) | rewrites found / written | predicted speedup (cost model) | "
             "measured by optimise's check | written file, ORT 1 thread | written file, ORT all threads | "
             "H100 recorded cost before → after ms (predicted) | ORT check |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["ok"]:
            lines.append(f"| {r['model']} | {r['strategy']} | failed: {r.get('error')} ||||||||")
            continue
        gate = r["gate"]
        if gate and "speedup" in gate:
            g = f"{gate['speedup']:.3f}x [{gate['speedup_ci'][0]:.3f}, {gate['speedup_ci'][1]:.3f}]: " + \
                ("written" if gate["decision"].startswith("rewritten") else "input kept")
        else:
            g = "not needed (no rewrite)" if not r["found"] else "not measured"
        bench = r["bench"] or []
        m1 = ci(bench[0], 1) if len(bench) > 0 else r.get("bench_error", "n/a")
        ma = ci(bench[1], 1) if len(bench) > 1 else "n/a"
        hb, ha = r["h100_recorded_before_ms"], r["h100_recorded_after_ms"]
        h = f"{hb:.3f} → {ha:.3f}" if hb is not None and ha is not None else "n/a"
        lines.append(f"| {r['model']} | {r['strategy']} | {r['search_s']:.1f} ({r['stop']}) | {r['found']} / {r['written_steps']} | "
                     f"{r['predicted_speedup']:.3f}x ({r['cost_model']}) | {g} | {m1} | {ma} | {h} | "
                     f"{'ok' if r['ort_check'] else 'FAIL'} |")
    table = "\n".join(lines)
    Path(args.out + ".md").write_text(table + "\n")
    print(table)
    return 0 if all(r["ok"] and r.get("ort_check") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
