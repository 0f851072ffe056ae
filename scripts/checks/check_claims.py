#!/usr/bin/env python3
"""Is every prediction `rlflow optimise` makes a prediction about the file it wrote?

    check_claims.py [--targets ort,h100] [--log FILE] [MODEL.onnx ...]   (default: the zoo in models/)

For each model and target: `rlflow optimise M -o OUT --target T --measure off --json`, then
`rlflow cost OUT --cost-model K --json` with the cost model optimise used. The claim (cost.after_ms)
must equal the written file's cost within 0.5%, and so must the search's own figure for its best
graph (before re-import). The table also gives the predicted speedup and, for the recorded H100
cost, how many op lookups hit the measured table (the rest are priced by the calibrated profile).
Exit 1 if a claim or a search figure misses. Every speedup here is predicted, by the cost model named in its row.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from check_hf_corpus import run_rlflow  # noqa: E402

CLAIM_RTOL = 0.005


def check(binary, model, target, out_dir, timeout):
    out = out_dir / f"{model.stem}.{target}.onnx"
    r = run_rlflow(binary, ["optimise", str(model), "-o", str(out), "--target", target, "--measure", "off", "--json"], timeout)
    row = {"model": model.stem, "target": target, "rc": r["rc"], "error": r["error"], "wall_s": r["wall_s"]}
    cost = (r["doc"] or {}).get("cost") or {}
    if r["rc"] != 0 or "after_ms" not in cost:
        row["ok"] = r["rc"] == 0
        return row
    c = run_rlflow(binary, ["cost", str(out), "--cost-model", cost["model"], "--json"], timeout)
    file_ms = (c["doc"] or {}).get("total_ms")
    row.update(model_kind=cost["model"], before_ms=cost["before_ms"], after_ms=cost["after_ms"], speedup=cost["speedup"],
               search_after_ms=cost.get("search_after_ms"), file_ms=file_ms, kept=(r["doc"] or {}).get("kept_input"))
    table = cost.get("table")
    if table:
        row["hits"] = f"{table['hits']}/{table['hits'] + table['misses']}"
    row["ok"] = file_ms is not None and abs(cost["after_ms"] - file_ms) <= CLAIM_RTOL * max(file_ms, 1e-12)
    # The search's own figure for its best graph is the written file's too (issue 39: the cost prices
    # what the runtime runs, so no search earns credit for a fusion the file cannot carry).
    search = cost.get("search_after_ms")
    row["search_ok"] = file_ms is not None and search is not None and abs(search - file_ms) <= CLAIM_RTOL * max(file_ms, 1e-12)
    out.unlink(missing_ok=True)
    return row


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--targets", default="ort,h100")
    ap.add_argument("--rlflow", default=str(ROOT / "build" / "rlflow"))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--log", help="append a dated markdown section with the table to this file")
    a = ap.parse_args(argv)
    models = a.models or sorted((ROOT / "models").glob("*.onnx"))
    if not models:
        print("no models: run scripts/corpus/export_models first, or name models", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlflow_claims_") as d:
        for m in models:
            for t in [t for t in a.targets.split(",") if t]:
                rows.append(check(a.rlflow, m, t, Path(d), a.timeout))
                r = rows[-1]
                print(f"  {r['model']:<26} {t:<5} {'ok' if r['ok'] else 'MISS'} {r['wall_s']:6.1f}s {r.get('error') or ''}",
                      file=sys.stderr, flush=True)
    head = ("| model | target | cost model | before ms | after ms (claim) | written file ms | predicted speedup | search's figure | "
            "table hits | claim = file | search = file |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for r in rows:
        if "after_ms" not in r:
            lines.append(f"| {r['model']} | {r['target']} | | | | | | | | rc {r['rc']}: {r.get('error') or ''} | |")
            continue
        lines.append(f"| {r['model']} | {r['target']} | {r['model_kind']} | {r['before_ms']:.4f} | {r['after_ms']:.4f} | "
                     f"{r['file_ms']:.4f} | {r['speedup']:.3f}x{' (kept input)' if r['kept'] else ''} | "
                     f"{r['before_ms'] / r['search_after_ms']:.3f}x | {r.get('hits', '-')} | {'yes' if r['ok'] else 'NO'} | "
                     f"{'yes' if r.get('search_ok') else 'NO'} |")
    text = "\n".join(lines)
    print(text)
    missed = [f"{r['model']}/{r['target']}" for r in rows if not r["ok"]]
    print(f"{len(rows) - len(missed)} of {len(rows)} claims describe the written file" + (f"; missed: {' '.join(missed)}" if missed else ""))
    apart = [f"{r['model']}/{r['target']}" for r in rows if "after_ms" in r and not r.get("search_ok")]
    print(f"{len(rows) - len(apart)} of {len(rows)} search figures are the written file's" + (f"; apart: {' '.join(apart)}" if apart else ""))
    missed += apart
    if a.log:
        with open(a.log, "a") as f:
            f.write(f"\n## {time.strftime('%Y-%m-%d')}: `scripts/checks/check_claims {' '.join(argv)}`\n\n"
                    "Every speedup is predicted (no GPU; `--measure off`), by the cost model in its row: ort = the analytic "
                    "onnxruntime CPU profile, recorded = replayed H100 op timings (misses priced by the calibrated h100 "
                    "profile). \"search's figure\" is the speedup the search computed for its best graph before export.\n\n"
                    + text + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
