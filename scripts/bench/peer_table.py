#!/usr/bin/env python3
"""rlflow against every peer tool on the decoders in tests/data: one `rlflow compare --json` per model.

For each model, `rlflow compare MODEL --peers PEERS --json` runs the peer tools
(onnxslim, onnxsim, onnxoptimizer, onnxscript's ort_fusions, onnxruntime's transformer optimizer) and
rlflow at its defaults, checks every file against the input in onnxruntime at every binding of its
symbolic dims, and times the right ones interleaved with the input (1 thread, thread CPU time) at
prefill and at the short binding (a decode step, else sequence 1). The noise control is compare's
"resaved" peer, the input loaded and saved by onnx: its speedup shows how far from 1.00x noise alone goes.
The load average before and after each model is recorded beside it.

Writes a markdown table (speedup over the input with its 95% CI, per tool and binding; "wrong" for a
file that differs from the input in onnxruntime) and the JSON of every run. Exit status 1 when a
compare run failed or rlflow's own file was wrong.

    scripts/bench/peer_table                                   # tests/data/decoders/*.onnx and tests/data/kv_cache_decoder.onnx
    scripts/bench/peer_table --models tests/data/decoders/llama.dynamo20.onnx --rounds 60
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / "lib")]
import rlflow_json  # noqa: E402

PEERS = ["onnxslim", "onnxsim", "onnxoptimizer", "ort-fusions", "ort-transformers", "resaved"]


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cell(tool: dict, k: int) -> str:
    if tool["status"] != "ok":
        return tool["status"]
    t = tool["timings"]
    if k >= len(t):
        return "-"
    lo, hi = t[k]["speedup_ci"]
    return f"{t[k]['speedup']:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", help="ONNX files (default: the decoders in tests/data)")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--out", default="results/peer_table", help="writes OUT.md and OUT.json")
    ap.add_argument("--bin", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    a = ap.parse_args()
    models = a.models or sorted(str(p) for p in (ROOT / "tests" / "data" / "decoders").glob("*.onnx")) + [
        str(ROOT / "tests" / "data" / "kv_cache_decoder.onnx")]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs, failed = [], False
    peers = a.peers
    for m in models:
        before = load()
        print(f"[peer_table] {m} (load {before})", file=sys.stderr, flush=True)
        r = rlflow_json.rlflow(a.bin, ["compare", m, "--peers", peers, "--rounds", str(a.rounds), "--max-seconds", str(a.max_seconds), "-q"],
                               timeout=3600)
        runs.append({"model": m, "load_before": before, "load_after": load(), "wall_s": r["wall_s"],
                     **({"report": r["doc"]} if r["ok"] else {"error": r["error"]})})
        if not r["ok"]:
            failed = True
            continue
        ours = next(t for t in r["doc"]["tools"] if t["name"] == "rlflow")
        failed = failed or ours["status"] != "ok"
    lines = ["| model | binding | input ms | " + " | ".join(p if p != "resaved" else "resaved (noise control)" for p in peers.split(",")) +
             " | rlflow | rlflow / fastest peer | load |",
             "|---|---|---|" + "---|" * (len(peers.split(",")) + 3)]
    for run in runs:
        name = Path(run["model"]).name
        if "error" in run:
            lines.append(f"| {name} | failed: {run['error'][:120]} |")
            continue
        rep = run["report"]
        tools = {t["name"]: t for t in rep["tools"]}
        for k, timed in enumerate(rep["timed"]):
            vs = rep["rlflow_vs_fastest_peer"][k]
            vs_text = f"{vs['speedup']:.3f} [{vs['speedup_ci'][0]:.3f}, {vs['speedup_ci'][1]:.3f}] ({vs['peer']})" if vs["peer"] else "-"
            row = [name, timed["label"], f"{timed['input_median_ms']:.3f}"]
            row += [cell(tools[p], k) if p in tools else "-" for p in peers.split(",")]
            row += [cell(tools["rlflow"], k), vs_text, f"{run['load_before']} / {run['load_after']}"]
            lines.append("| " + " | ".join(row) + " |")
        for t in rep["tools"]:
            if t["status"] == "wrong":
                lines.append(f"| {name} | {t['name']} wrong: {t['error'][:160]} |")
        for f in rep["input_fails"]:
            lines.append(f"| {name} | note: {f[:160]} |")
    Path(str(out) + ".md").write_text("\n".join(lines) + "\n")
    Path(str(out) + ".json").write_text(json.dumps(runs, indent=1))
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
