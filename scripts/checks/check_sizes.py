#!/usr/bin/env python3
"""Optimise dynamic models and check each written file at every size a user deploys it at.

    check_sizes.py MODEL.onnx ... [--rlflow BIN] [--config "--target h100" ...] [--json FILE]

For each model and each configuration (default: `--search none`, `--target ort`, `--target h100`
and `--target h100 --opset keep`; the other two write at the target's opset, 23), runs `rlflow optimise MODEL -o OUT CONFIG --json` and checks OUT:

  1. rlflow exits 0 and OUT passes onnx.checker (full_check);
  2. OUT keeps every symbolic dim of the input's graph inputs (the same dim_param strings);
  3. OUT and MODEL give the same outputs in onnxruntime (CPU, one thread, atol 1e-4, rtol 1e-3) at
     every binding of size_bindings.py: representative, smallest (batch 1 / sequence 1 / past 0),
     odd primes, a decode step where there is a past length, and batch 2;
  4. OUT is no larger than MODEL plus 5% and 16 KiB (rewrites add nodes and may add weights; a
     doubled weight is a defect).

Prints one line per run and a summary line `N passed, M failed`; exits 1 when any run failed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from check_ort import _exceeds, _max_abs_diff, session  # noqa: E402
import size_bindings as sb  # noqa: E402

ATOL, RTOL = 1e-4, 1e-3
CONFIGS = ["--search none", "--target ort", "--target h100", "--target h100 --opset keep"]


def file_bytes(path: Path) -> int:
    import onnx

    total = path.stat().st_size
    m = onnx.load(str(path), load_external_data=False)
    locs = {kv.value for t in m.graph.initializer for kv in t.external_data if kv.key == "location"}
    return total + sum((path.parent / loc).stat().st_size for loc in locs if (path.parent / loc).exists())


def input_dims(model) -> Dict[str, List[str]]:
    return {vi.name: [d.dim_param if not (d.HasField("dim_value") and d.dim_value > 0) else str(d.dim_value)
                      for d in vi.type.tensor_type.shape.dim] for vi in sb.graph_inputs(model)}


def compare(orig_path: Path, out_path: Path, model) -> List[dict]:
    s_orig, s_out = session(str(orig_path)), session(str(out_path))
    names = [o.name for o in s_orig.get_outputs()]
    runs = []
    for label, binding in sb.bindings(model):
        run = {"binding": sb.binding_str(label, binding), "ok": False}
        try:
            # Where the input itself does not run (a conv stack longer than the binding's lengths),
            # every length but the batch is scaled up until it does.
            ref = None
            for scale in (1, 4, 16, 64):
                b = {k: v if sb.role(k) == "batch" else v * scale for k, v in binding.items()}
                feeds = sb.make_feeds(model, b, seed=0)
                try:
                    ref = s_orig.run(None, feeds)
                    run["binding"] = sb.binding_str(label + (f" x{scale}" if scale > 1 else ""), b)
                    break
                except Exception as e:
                    why = (str(e).strip().splitlines() or [""])[0][:200]
            if ref is None:
                run.update(ok=True, skipped="the input does not run: " + why)
                runs.append(run)
                continue
            got = dict(zip([o.name for o in s_out.get_outputs()], s_out.run(None, feeds)))
            worst, good = 0.0, True
            for name, r in zip(names, ref):
                g = got.get(name)
                if g is None or g.shape != r.shape:
                    good = False
                    run["error"] = f"output {name}: shape {None if g is None else list(g.shape)} != {list(r.shape)}"
                    continue
                if r.size:
                    worst = max(worst, _max_abs_diff(r, g))
                    good = good and not _exceeds(r, g, ATOL, RTOL)
            run.update(ok=good, max_abs_diff=worst)
        except Exception as e:  # onnxruntime refused the file at this binding
            run["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        runs.append(run)
    return runs


def check(binary: str, model_path: Path, config: str, tmp: Path) -> dict:
    import onnx

    out = tmp / (model_path.stem + ".opt.onnx")
    for p in (out, Path(str(out) + ".data")):
        if p.exists():
            p.unlink()
    cmd = [binary, "optimise", str(model_path), "-o", str(out), *config.split(), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    rec = {"model": model_path.name, "config": config, "rc": r.returncode, "ok": False}
    if r.returncode != 0 or not out.exists():
        err = [line for line in r.stderr.splitlines() if "error" in line]
        rec["error"] = (err[-1] if err else r.stderr.strip()[-300:]) or "no output file"
        return rec
    try:
        doc = json.loads(r.stdout)
        rec["kept_input"] = doc.get("kept_input", "")
        rec["steps"] = len(doc.get("steps") or [])
        rec["composites"] = doc.get("composites")
        cost = doc.get("cost") or {}
        if cost:
            rec["predicted"] = {"model": cost.get("model"), "before_ms": cost.get("before_ms"), "after_ms": cost.get("after_ms")}
        if doc.get("measured"):
            rec["measured"] = doc["measured"]
    except json.JSONDecodeError:
        pass
    model = onnx.load(str(model_path), load_external_data=False)
    written = onnx.load(str(out), load_external_data=False)
    problems = []
    try:
        onnx.checker.check_model(str(out), full_check=True)
    except Exception as e:
        problems.append(f"checker: {str(e).splitlines()[0][:200]}")
    if input_dims(written) != input_dims(model):
        problems.append(f"input dims changed: {input_dims(model)} -> {input_dims(written)}")
    size_in, size_out = file_bytes(model_path), file_bytes(out)
    rec["size_ratio"] = round(size_out / size_in, 4)
    if size_out > 1.05 * size_in + 16384:
        problems.append(f"the output is {size_out / size_in:.2f}x the input's size")
    rec["runs"] = compare(model_path, out, model)
    problems += [f"{x['binding']}: {x.get('error') or 'max_abs_diff %.3g' % x['max_abs_diff']}" for x in rec["runs"] if not x["ok"]]
    rec["problems"] = problems
    rec["ok"] = not problems
    return rec


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN", str(HERE.parents[1] / "build" / "rlflow")))
    ap.add_argument("--config", action="append", help="rlflow optimise flags, repeatable (default: %s)" % CONFIGS)
    ap.add_argument("--json", type=Path, help="write every record here")
    args = ap.parse_args(argv)
    configs = args.config or CONFIGS
    recs = []
    with tempfile.TemporaryDirectory(prefix="rlflow-sizes-") as tmp:
        for m in args.models:
            for c in configs:
                rec = check(args.rlflow, m, c, Path(tmp))
                recs.append(rec)
                runs = rec.get("runs", [])
                what = "input kept" if rec.get("kept_input") else f"{rec.get('steps', 0)} rewrites"
                print(f"{'OK  ' if rec['ok'] else 'FAIL'} {m.name:<28} {c:<26} rc={rec['rc']} {what:<14} "
                      f"bindings {sum(r['ok'] and 'skipped' not in r for r in runs)}/{len(runs)}"
                      + (f"  size {rec['size_ratio']:.3f}x" if "size_ratio" in rec else "")
                      + ("" if rec["ok"] else "  " + "; ".join(rec.get("problems") or [rec.get("error", "")])), flush=True)
    if args.json:
        args.json.write_text(json.dumps(recs, indent=1, default=float))
    passed = sum(r["ok"] for r in recs)
    print(f"{passed} passed, {len(recs) - passed} failed")
    return 0 if passed == len(recs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
