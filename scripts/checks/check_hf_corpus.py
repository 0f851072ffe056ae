#!/usr/bin/env python3
"""Run rlflow over the HuggingFace corpus (scripts/corpus/export_hf_models) and check every file it writes.

    check_hf_corpus.py [--size small|full] [--targets ort,h100] [--json FILE] [--no-fail]
                       [--out-dir DIR] [--timeout S] [--from-json FILE] [names...]

For each model in models/hf/<size>/ (names: a model, e.g. `bert`, selects bert and bert_dynamic;
`bert_dynamic` selects only that file):
  1. `rlflow optimise M -o OUT --search none --json`          (the round trip)
  2. `rlflow optimise M -o OUT --target T --json` for each T   (default ort and h100)
recording exit code, first `rlflow: error:` line, wall time, and from the JSON the verification
method, rules applied, the speedup (measured where the target runs here, else predicted) and why the
input was kept. A model with symbolic dims is first tried as it is; if rlflow exits 3 asking for
--input-shape, that is recorded and it is retried with --input-shape for every input (batch 1,
sequence 128) so that the rest can be measured.

Every file written is checked against its input in onnxruntime (scripts/checks/check_ort.py's oracle session:
CPU, one thread, no graph rewrites): onnx.checker (full_check), then both run on the same seeded
inputs (input_ids uniform in [0, vocab), attention_mask ones, floats N(0, 1)) and compared with
atol 1e-4 / rtol 1e-3. A dynamic model whose written file still has symbolic input dims is run at
every binding of size_bindings.py (representative, smallest, odd primes, a decode step where there
is a past length, batch 2), where no baked-in size survives; otherwise at batch 1 / sequence 128.

Prints a table; --json FILE writes every record. Exits 1 if any model failed (an rlflow exit code
other than 0, or an output that does not match), unless --no-fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from check_ort import _exceeds, _json_safe, _max_abs_diff, graph_inputs, session  # noqa: E402
import size_bindings as sb  # noqa: E402

ATOL, RTOL = 1e-4, 1e-3
SEED = 0
CLAIM_RTOL = 0.005  # a prediction describes the written file: within 0.5% of that file's cost
SEQ = 128
# Shapes at which a model is run in onnxruntime: (batch, sequence); sequence applies to text inputs only.
SHAPES_STATIC = [(1, SEQ)]


def first_error(stderr: str) -> Optional[str]:
    for line in stderr.splitlines():
        if line.startswith("rlflow: error:"):
            return line.strip()
    return None


def run_rlflow(binary: str, args: List[str], timeout: float) -> dict:
    """{rc, wall_s, doc, error}: never raises. doc is the --json document (None if unparsable)."""
    cmd = [binary, *args]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"rc": None, "wall_s": time.monotonic() - t0, "doc": None, "error": f"timed out after {timeout:g} s"}
    except OSError as e:
        return {"rc": None, "wall_s": time.monotonic() - t0, "doc": None, "error": f"cannot run {binary}: {e}"}
    wall = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout) if "--json" in args else None
    except json.JSONDecodeError:
        doc = None
    err = first_error(p.stderr)
    if p.returncode != 0 and err is None:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        err = (f"killed by signal {-p.returncode}: " if p.returncode < 0 else "") + (lines[-1] if lines else "no output")
    return {"rc": p.returncode, "wall_s": wall, "doc": doc, "error": err, "cmd": " ".join(cmd)}


def summarise_json(doc: Optional[dict]) -> dict:
    """The fields of `optimise --json` the table reports."""
    if not isinstance(doc, dict) or not doc.get("ok", False):
        return {}
    ver = doc.get("verification") or {}
    out = {
        "verify": ver.get("method") or ("off" if ver.get("enabled") is False else None),
        "verify_note": ver.get("note"),
        "max_abs_diff": ver.get("max_abs_diff"),
        "rules_applied": doc.get("rules_applied") or {},
        "steps": len(doc.get("steps") or []),
        "predicted_speedup": (doc.get("cost") or {}).get("speedup"),
        "cost_model": (doc.get("cost") or {}).get("model"),
        "kept_input": doc.get("kept_input"),
        "ops_before": (doc.get("before") or {}).get("ops"),
        "ops_after": (doc.get("after") or {}).get("ops"),
        "opaque_ops": (doc.get("before") or {}).get("opaque_ops"),
        "composites": doc.get("composites"),
    }
    m = doc.get("measured")
    if isinstance(m, dict):
        out["measured_speedup"] = m.get("speedup")
        out["measured_ci"] = m.get("speedup_ci")
        out["decision"] = m.get("decision")
    if doc.get("predicted"):
        out["predicted_reason"] = doc["predicted"].get("reason")
    return out


# ---- inputs ---------------------------------------------------------------------------------------

vocab_size = sb.vocab_size  # the embedding size that input ids are drawn below


def concrete_shape(vi, batch: int, seq: int) -> List[int]:
    """Symbolic dims: 'batch'-like -> batch, anything else (sequence) -> seq; fixed dims stay."""
    shape = []
    for k, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(d.dim_value)
        elif k == 0 or "batch" in d.dim_param.lower():
            shape.append(batch)
        else:
            shape.append(seq)
    return shape


def has_symbolic_inputs(model) -> bool:
    return any(not (d.HasField("dim_value") and d.dim_value > 0)
               for vi in graph_inputs(model) for d in vi.type.tensor_type.shape.dim)


def make_feeds(model, batch: int, seq: int, seed: int = SEED) -> Dict[str, np.ndarray]:
    from onnx import helper

    rng = np.random.default_rng(seed)
    vocab = vocab_size(model) or 4
    feeds = {}
    for vi in graph_inputs(model):
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = concrete_shape(vi, batch, seq)
        if "mask" in vi.name:
            feeds[vi.name] = np.ones(shape, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, vocab, size=shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def input_shape_args(model, batch: int = 1, seq: int = SEQ) -> List[str]:
    args = []
    for vi in graph_inputs(model):
        args += ["--input-shape", f"{vi.name}:{','.join(map(str, concrete_shape(vi, batch, seq)))}"]
    return args


# ---- the onnxruntime check ------------------------------------------------------------------------

def ort_check(orig_path: str, opt_path: str, dynamic: bool) -> dict:
    """onnx.checker on OPT, then ORIG and OPT in onnxruntime at each shape. Never raises."""
    import onnx

    res = {"ok": False, "checker_ok": False, "dims_kept": None, "runs": [], "error": None}
    try:
        onnx.checker.check_model(opt_path, full_check=True)
        res["checker_ok"] = True
    except Exception as e:
        res["error"] = f"checker: {_line(e)}"
    try:
        orig = onnx.load(orig_path, load_external_data=False)
        opt = onnx.load(opt_path, load_external_data=False)
        res["dims_kept"] = has_symbolic_inputs(opt) if dynamic else None
        s_orig, s_opt = session(orig_path), session(opt_path)
    except Exception as e:
        res["error"] = res["error"] or f"load: {_line(e)}"
        return res
    # A dynamic file is run at every binding of size_bindings.py (smallest, odd primes, a decode
    # step, ...), which no baked-in size survives; a static one at batch 1 / sequence 128.
    if dynamic and res["dims_kept"]:
        runs = [(sb.binding_str(label, b), lambda b=b: sb.make_feeds(orig, b, SEED)) for label, b in sb.bindings(orig)]
    else:
        runs = [(f"{batch}x{seq}", lambda batch=batch, seq=seq: make_feeds(orig, batch, seq)) for batch, seq in SHAPES_STATIC]
    ok = res["checker_ok"]
    for where, feeds_at in runs:
        run = {"binding": where, "ok": False, "max_abs_diff": None}
        try:
            feeds = feeds_at()
            ref = s_orig.run(None, feeds)
            ref_names = [o.name for o in s_orig.get_outputs()]
            opt_in = [i.name for i in s_opt.get_inputs()]
            opt_feeds = feeds if set(opt_in) == set(feeds) else dict(zip(opt_in, feeds.values()))
            got = dict(zip([o.name for o in s_opt.get_outputs()], s_opt.run(None, opt_feeds)))
            if sorted(got) != sorted(ref_names):
                got = dict(zip(ref_names, got.values()))
            worst, good = 0.0, True
            for name, r in zip(ref_names, ref):
                g = got[name]
                if r.shape != g.shape:
                    good, run["error"] = False, f"output {name}: shape {list(g.shape)} != {list(r.shape)}"
                    continue
                worst = max(worst, _max_abs_diff(r, g))
                good = good and not _exceeds(r, g, ATOL, RTOL)
            run.update(ok=good, max_abs_diff=worst)
        except Exception as e:
            run["error"] = _line(e)
        ok = ok and run["ok"]
        res["runs"].append(run)
        if not run["ok"] and not res["error"]:
            res["error"] = f"{where}: " + (run.get("error") or f"max_abs_diff {run['max_abs_diff']:.3g}")
    res["ok"] = bool(ok)
    return res


def _line(e: Exception) -> str:
    return ((str(e).strip() or type(e).__name__).splitlines() or [""])[0][:300]


# ---- one model ------------------------------------------------------------------------------------

def check_model(binary: str, path: Path, targets: List[str], out_dir: Path, timeout: float) -> dict:
    import onnx

    stem = path.stem
    dynamic = stem.endswith("_dynamic")
    model = onnx.load(str(path), load_external_data=False)
    rec = {"model": stem, "file": str(path), "dynamic": dynamic, "ops": len(model.graph.node),
           "symbolic_inputs": has_symbolic_inputs(model), "runs": {}}
    jobs = [("roundtrip", ["--search", "none"])] + [(t, ["--target", t]) for t in targets]
    for label, extra in jobs:
        out = out_dir / f"{stem}.{label}.onnx"
        if out.exists():
            out.unlink()
        base = ["optimise", str(path), "-o", str(out), *extra, "--json"]
        r = run_rlflow(binary, base, timeout)
        entry = {"rc": r["rc"], "wall_s": round(r["wall_s"], 2), "error": r["error"]}
        if r["rc"] == 3 and r["error"] and "--input-shape" in r["error"]:
            # rlflow cannot take symbolic dims yet: record that, then fix batch 1 / sequence 128.
            entry["needs_input_shape"] = True
            entry["first_try"] = {"rc": r["rc"], "error": r["error"], "wall_s": round(r["wall_s"], 2)}
            r = run_rlflow(binary, base + input_shape_args(model), timeout)
            entry.update(rc=r["rc"], wall_s=round(r["wall_s"], 2), error=r["error"], input_shape=input_shape_args(model)[1::2])
        entry.update(summarise_json(r["doc"]))
        if r["rc"] == 0 and out.exists():
            entry["ort"] = ort_check(str(path), str(out), dynamic)
            if label != "roundtrip":
                entry["claim"] = claim_check(binary, r["doc"], out, entry.get("input_shape"), timeout)
        elif r["rc"] == 0:
            entry["ort"] = {"ok": False, "error": "rlflow exited 0 but wrote no file"}
        rec["runs"][label] = entry
        print(f"  {stem:<26} {label:<9} rc={entry['rc']} {entry['wall_s']:6.1f}s"
              + (f"  {entry['error']}" if entry.get("error") else "")
              + (f"  ort: {'ok' if entry['ort']['ok'] else entry['ort'].get('error')}" if "ort" in entry else ""),
              file=sys.stderr, flush=True)
        if out.exists() and not os.environ.get("RLFLOW_KEEP_OUTPUTS"):
            out.unlink()
    rec["ok"] = all(e["rc"] == 0 and e.get("ort", {}).get("ok") and not e.get("needs_input_shape")
                    and e.get("claim", {}).get("ok", True) for e in rec["runs"].values())
    return rec


def claim_check(binary: str, doc: Optional[dict], out: Path, input_shape: Optional[List[str]], timeout: float) -> dict:
    """The prediction `optimise` reports must describe the file it wrote: its after_ms equals what
    `rlflow cost OUT` gives for that file under the same cost model (within CLAIM_RTOL)."""
    cost = (doc or {}).get("cost") or {}
    if "after_ms" not in cost:
        return {"ok": True, "note": "no prediction"}
    args = ["cost", str(out), "--cost-model", cost["model"], "--json"]
    for spec in input_shape or []:
        args += ["--input-shape", spec]
    r = run_rlflow(binary, args, timeout)
    if r["rc"] != 0 or not isinstance(r["doc"], dict):
        return {"ok": False, "error": f"rlflow cost exited {r['rc']}: {r['error']}"}
    file_ms, claimed = r["doc"]["total_ms"], cost["after_ms"]
    ok = abs(claimed - file_ms) <= CLAIM_RTOL * max(abs(file_ms), 1e-12)
    return {"ok": ok, "claimed_ms": claimed, "file_ms": file_ms,
            **({} if ok else {"error": f"claimed {claimed:.6g} ms, the written file costs {file_ms:.6g} ms"})}


# ---- the table ------------------------------------------------------------------------------------

def _speedup(e: dict) -> str:
    if e.get("rc") != 0:
        return "-"
    if e.get("measured_speedup") is not None:
        s = f"{e['measured_speedup']:.2f}m"
        return s + ("(kept)" if e.get("decision") == "input graph written" else "")
    if e.get("predicted_speedup") is not None:
        return f"{e['predicted_speedup']:.2f}p" + ("(kept)" if e.get("kept_input") else "")
    return "?"


def _rc(e: Optional[dict]) -> str:
    if e is None:
        return ""
    rc = "T/O" if e["rc"] is None else str(e["rc"])
    return ("3>" + rc) if e.get("needs_input_shape") else rc


def _match(e: Optional[dict]) -> str:
    if e is None or "ort" not in e:
        return "-"
    o = e["ort"]
    if o["ok"]:
        n = len(o.get("runs", []))
        return "ok" + (f"x{n}" if n > 1 else "")
    return "FAIL" if o.get("checker_ok", True) else "CHK"


def _verify(e: Optional[dict]) -> str:
    v = (e or {}).get("verify")
    return {"reference executor": "num", "structural": "struct", None: "-"}.get(v, v)


def _rules(e: Optional[dict]) -> str:
    """Rewrites applied, plus the composites (GELU, LayerNorm, HardSwish) fused on import: '12+2f'."""
    if not e or e.get("rc") != 0:
        return "-"
    fused = sum(v for k, v in (e.get("composites") or {}).items() if k != "removed_nodes")
    return str(sum(e.get("rules_applied", {}).values())) + (f"+{fused}f" if fused else "")


def print_table(recs: List[dict], targets: List[str]) -> None:
    cols = ["model", "rt", *targets, "verify(" + "/".join(targets) + ")", "rules", "speedup(" + "/".join(targets) + ")",
            "match(rt/" + "/".join(targets) + ")", "dims kept", "first error / kept reason"]
    rows = []
    for r in recs:
        runs = r["runs"]
        rt = runs.get("roundtrip")
        es = [runs.get(t) for t in targets]
        dims = "-"
        if r["dynamic"]:
            kept = [e["ort"].get("dims_kept") for e in [rt, *es] if e and "ort" in e]
            dims = "/".join("yes" if k else "no" for k in kept) or "-"
        err = next((e.get("first_try", {}).get("error") or e.get("error") for e in [rt, *es]
                    if e and (e.get("error") or e.get("first_try"))), None)
        if err and any(e and e.get("needs_input_shape") for e in [rt, *es]):
            later = next((e.get("error") for e in [rt, *es] if e and e.get("error")), None)
            if later:
                err += "  | with --input-shape: " + later
        if not err:
            err = next((f"{lab}: {e['ort']['error']}" for lab, e in zip(["rt", *targets], [rt, *es])
                        if e and "ort" in e and e["ort"].get("error")), None)
        if not err:
            err = next((f"{lab}: claim: {e['claim']['error']}" for lab, e in zip(targets, es)
                        if e and e.get("claim", {}).get("error")), None)
        if not err:
            k = next((e.get("kept_input") for e in es if e and e.get("kept_input")), None)
            err = f"kept: {k}" if k else ""
        err = err.replace("rlflow: error: ", "").replace(r["file"] + ": ", "")
        rows.append([r["model"], _rc(rt), *[_rc(e) for e in es], "/".join(_verify(e) for e in es),
                     "/".join(_rules(e) for e in es), "/".join(_speedup(e) for e in es),
                     "/".join(_match(e) for e in [rt, *es]), dims, err])
    widths = [max(len(c), *(len(row[i]) for row in rows)) if i < len(cols) - 1 else 0 for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    print("rc: rlflow exit code (3>0: exit 3 asking for --input-shape, then 0 with it); verify: num = reference "
          "executor, struct = structural only; rules: rewrites applied (+Nf: composites fused); speedup: m measured here, p predicted by the cost model, (kept) = "
          "input graph written; match: onnxruntime vs the input, atol 1e-4 rtol 1e-3 (xN: at N bindings of size_bindings.py); "
          "CHK: onnx.checker failed")


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--targets", default="ort,h100", help="comma-separated optimise targets (default ort,h100)")
    ap.add_argument("--models-dir", default=str(ROOT / "models" / "hf"))
    ap.add_argument("--json", metavar="FILE", help="write every record as JSON")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even if a model fails")
    ap.add_argument("--out-dir", help="keep rlflow's outputs here (default: a temporary folder, deleted)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per rlflow run (default 600)")
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    ap.add_argument("--from-json", metavar="FILE", help="print the table of an earlier --json FILE and exit")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if args.from_json:
        doc = json.loads(Path(args.from_json).read_text())
        print_table(doc["models"], doc["targets"])
        return 0

    if not os.access(args.rlflow, os.X_OK):
        print(f"error: no rlflow binary at {args.rlflow} (run scripts/setup/build)", file=sys.stderr)
        return 2
    mdir = Path(args.models_dir) / args.size
    files = sorted(p for p in mdir.glob("*.onnx") if ".tmp." not in p.name) if mdir.is_dir() else []
    if not files:
        print(f"no models in {mdir}: exporting them (scripts/corpus/export_hf_models --size {args.size})", file=sys.stderr)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus" / "export_hf_models.py"), "--size", args.size,
                        "--out", args.models_dir], check=False)
        files = sorted(p for p in mdir.glob("*.onnx") if ".tmp." not in p.name)
    if args.names:
        files = [p for p in files if p.stem in args.names or p.stem.removesuffix("_dynamic") in args.names]
        if not files:
            print(f"error: no model in {mdir} matches {' '.join(args.names)}", file=sys.stderr)
            return 2

    recs = []
    with tempfile.TemporaryDirectory(prefix="hf_corpus_") as tmp:
        out_dir = Path(args.out_dir) if args.out_dir else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.out_dir:
            os.environ["RLFLOW_KEEP_OUTPUTS"] = "1"
        for p in files:
            recs.append(check_model(args.rlflow, p, targets, out_dir, args.timeout))

    print_table(recs, targets)
    failed = [r["model"] for r in recs if not r["ok"]]
    print(f"{len(recs) - len(failed)} of {len(recs)} models pass" + (f"; failing: {' '.join(failed)}" if failed else ""))
    if args.json:
        doc = {"size": args.size, "targets": targets, "atol": ATOL, "rtol": RTOL, "rlflow": args.rlflow,
               "date": time.strftime("%Y-%m-%d"), "models": recs}
        Path(args.json).write_text(json.dumps(_json_safe(doc), indent=1) + "\n")
    return 0 if (not failed or args.no_fail) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
