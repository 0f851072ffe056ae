#!/usr/bin/env python3
"""Does the measured gate give the same answer on a busy machine as on a quiet one?

For each model, `rlflow optimise MODEL -o OUT --target ort --json` (plus the arguments after `--`) runs
RUNS times on a quiet machine and RUNS times beside LOAD busy processes (pure-Python spin loops, one
per process: load LOAD on top of whatever else runs), once per gate clock:
  - `--bench-clock auto`: the default, a 1-thread onnxruntime session timed in its thread's CPU time,
    with the sequential test;
  - `--bench-clock wall --bench-max-rounds 20`: the gate before 2026-12-02 (wall clock, 20 rounds).
Runs of the conditions are interleaved (quiet, loaded, quiet, ...) so drift hits both alike. A run's
answer is the SHA-256 of the file it wrote; the quiet runs' most common answer is the reference.

Prints a markdown table per model and clock: runs, distinct answers, how many loaded runs wrote the
quiet reference, and the chosen candidate's measured speedup and rounds (median over runs). Nothing
is asserted: this is a benchmark (docs/measured.md keeps its dated table).

    scripts/bench/gate_stability tests/data/decoders/llama_past.dynamo20.onnx --runs 10 --load 2
    scripts/bench/gate_stability tests/data/sizes/bart.dynamo20.onnx --runs 5 -- --search greedy
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]


def spin() -> None:
    while True:
        pass


def one_run(binary: str, model: str, out: Path, extra: List[str]) -> Dict:
    cmd = [binary, "optimise", model, "-o", str(out), "--target", "ort", "--json", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    row = {"rc": p.returncode, "answer": None, "speedup": None, "rounds": None, "decode_speedup": None}
    if p.returncode != 0:
        row["error"] = (p.stderr.strip().splitlines() or ["?"])[-1]
        return row
    row["answer"] = hashlib.sha256(out.read_bytes()).hexdigest()[:12]
    r = json.loads(p.stdout)
    m = r.get("measured") or {}
    chosen = [c for c in m.get("candidates", []) if c.get("verdict") == "written"]
    first = chosen[0] if chosen else (m.get("candidates") or [{}])[0]
    if "measured" in first:
        row["speedup"] = first["measured"]["speedup"]
        row["rounds"] = first["measured"]["rounds"]
    if "measured_decode" in first:
        row["decode_speedup"] = first["measured_decode"]["speedup"]
        row["rounds"] = (row["rounds"] or 0) + first["measured_decode"]["rounds"]
    row["rewritten"] = bool(chosen)
    return row


def median(xs: List) -> str:
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.3f}" if xs else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=10, help="runs per condition and clock (default 10)")
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the loaded runs (default 2)")
    ap.add_argument("--clocks", default="auto,wall", help="gates to compare: auto (today's), wall (before 2026-12-02)")
    ap.add_argument("--json", help="also write the runs here")
    args, extra = ap.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]
    binary = os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow"))
    gates = {"auto": ["--bench-clock", "auto"], "wall": ["--bench-clock", "wall", "--bench-max-rounds", "20"]}
    results = []
    with tempfile.TemporaryDirectory(prefix="rlflow-gate-") as tmp:
        for model in args.models:
            for clock in args.clocks.split(","):
                runs: Dict[str, List[Dict]] = {"quiet": [], "loaded": []}
                for k in range(args.runs):
                    for cond in ("quiet", "loaded"):
                        procs = []
                        if cond == "loaded":
                            procs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load)]
                            for p in procs:
                                p.start()
                        try:
                            row = one_run(binary, model, Path(tmp) / "out.onnx", gates[clock] + extra)
                        finally:
                            for p in procs:
                                p.terminate()
                                p.join()
                        runs[cond].append(row)
                        print(f"[gate] {Path(model).name} {clock} {cond} {k + 1}/{args.runs}: {row.get('answer') or row.get('error')} "
                              f"speedup {row['speedup']} decode {row['decode_speedup']} rounds {row['rounds']}", file=sys.stderr)
                ref = collections.Counter(r["answer"] for r in runs["quiet"]).most_common(1)[0][0]
                results.append({"model": model, "clock": clock, "load": args.load, "reference": ref, "runs": runs})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"| model | gate | condition | runs | distinct files | wrote the quiet reference | rewritten | speedup (median) | "
          f"short-binding speedup (median) | rounds (median) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        for cond, rows in res["runs"].items():
            same = sum(r["answer"] == res["reference"] for r in rows)
            cond_s = cond if cond == "quiet" else f"load +{res['load']}"
            gate = "thread CPU, sequential" if res["clock"] == "auto" else "wall clock, 20 rounds"
            print(f"| {Path(res['model']).name} | {gate} | {cond_s} | {len(rows)} | {len(set(r['answer'] for r in rows))} | "
                  f"{same}/{len(rows)} | {sum(bool(r.get('rewritten')) for r in rows)}/{len(rows)} | "
                  f"{median([r['speedup'] for r in rows])} | {median([r['decode_speedup'] for r in rows])} | "
                  f"{median([r['rounds'] for r in rows])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
