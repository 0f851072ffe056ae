#!/usr/bin/env python3
"""The optimisation benchmark: every zoo model x every search strategy.

For each (model, strategy): `rlflow optimise --search S --cost-model C --json` (C = the cost model the
search optimises under, default analytic), then
  - cost before/after under the analytic and the cpu cost models (`rlflow cost --json`),
  - search wall time and peak RSS of the optimise run,
  - onnxruntime CPU latency (one thread, median of --runs after warm-up) of the original and the
    optimised model, their runs interleaved so load on the machine affects both alike, and the ratio.
Writes a markdown table and a JSON file (results/bench.md, results/bench.json by default).

    scripts/bench [--models resnet18 bert_base] [--strategies greedy taso] [--runs 30]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import check_ort  # noqa: E402

ZOO = ["squeezenet1_1", "resnet18", "resnet50", "inception_v3", "vit_b_16", "bert_base"]


def rlflow(binary: str, args: list[str]) -> tuple[dict, float, int, int]:
    """Runs rlflow with --json; returns (document, wall seconds, peak RSS MiB, exit code)."""
    t0 = time.monotonic()
    p = subprocess.Popen([binary, *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    out = p.stdout.read()
    err = p.stderr.read()
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        doc = {"ok": False, "error": (err.strip().splitlines() or ["no output"])[-1]}
    return doc, wall, usage.ru_maxrss // 1024, code


def ort_session(path: str):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def paired_latency(original: str, optimised: str, feeds: dict, runs: int) -> tuple[float, float]:
    """Medians (ms) of the two models' runs, interleaved so that load drift hits both alike."""
    a, b = ort_session(original), ort_session(optimised)
    for _ in range(3):
        a.run(None, feeds)
        b.run(None, feeds)
    ta, tb = [], []
    for _ in range(runs):
        for sess, acc in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            acc.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ta), statistics.median(tb)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=ZOO)
    ap.add_argument("--strategies", nargs="+", default=["greedy", "taso"])
    ap.add_argument("--search-cost-model", default="analytic")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlflow-bench-") as tmp:
        for name in args.models:
            model = ROOT / "models" / f"{name}.onnx"
            if not model.exists():
                subprocess.run([str(ROOT / "scripts" / "export_models"), name], check=True)
            import onnx

            feeds = check_ort.make_inputs(onnx.load(str(model), load_external_data=False), 0)
            for strat in args.strategies:
                out = Path(tmp) / f"{name}.{strat}.onnx"
                cmd = ["optimise", str(model), "-o", str(out), "--search", strat, "--cost-model", args.search_cost_model,
                       "--time-limit", str(args.time_limit)]
                if args.budget:
                    cmd += ["--budget", str(args.budget)]
                doc, wall, rss, code = rlflow(args.binary, cmd)
                row = {"model": name, "strategy": strat, "exit": code, "wall_s": wall, "peak_rss_mb": rss}
                if code == 0:
                    row["search_s"] = doc.get("time_s", {}).get("search")
                    row["stop"] = doc.get("search_report", {}).get("stop_reason")
                    row["steps"] = len(doc.get("steps", []))
                    # Costs of the optimised graph itself (before export splits fused activations
                    # back into their own nodes): the search model's, and the analytic model's.
                    c = doc.get("cost") or {}
                    row[f"{c.get('model')}_before"] = c.get("before_ms")
                    row[f"{c.get('model')}_after"] = c.get("after_ms")
                    if "analytic" in c:
                        row["analytic_before"] = c["analytic"]["before_ms"]
                        row["analytic_after"] = c["analytic"]["after_ms"]
                    row["ort_before_ms"], row["ort_after_ms"] = paired_latency(str(model), str(out), feeds, args.runs)
                    row["ort_speedup"] = row["ort_before_ms"] / row["ort_after_ms"]
                    row["ort_check"] = check_ort.check(str(model), str(out), 1e-4, 0)["ok"]
                else:
                    row["error"] = doc.get("error")
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(rows, indent=2))

    def f(v, fmt="{:.3f}"):
        return "n/a" if v is None else fmt.format(v)

    lines = ["| model | strategy | analytic cost before → after (ms) | cpu cost before → after (ms) | steps | search s | peak RSS MB | ORT before ms | ORT after ms | ORT speedup | ORT check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["exit"] != 0:
            lines.append(f"| {r['model']} | {r['strategy']} | failed: {r.get('error')} |||||||||")
            continue
        lines.append(f"| {r['model']} | {r['strategy']} | {f(r.get('analytic_before'))} → {f(r.get('analytic_after'))} | "
                     f"{f(r.get('cpu_before'))} → {f(r.get('cpu_after'))} | {r['steps']} | {f(r['search_s'], '{:.1f}')} | {r['peak_rss_mb']} | "
                     f"{f(r['ort_before_ms'], '{:.2f}')} | {f(r['ort_after_ms'], '{:.2f}')} | {f(r['ort_speedup'], '{:.3f}')}x | "
                     f"{'ok' if r['ort_check'] else 'FAIL'} |")
    table = "\n".join(lines)
    Path(args.out + ".md").write_text(table + "\n")
    print(table)
    return 0 if all(r["exit"] == 0 and r.get("ort_check") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
