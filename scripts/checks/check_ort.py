#!/usr/bin/env python3
"""Check an optimised ONNX model against its original with onnxruntime.

    check_ort.py ORIGINAL OPTIMISED [--atol 1e-4] [--rtol 0] [--seed 0]
                 [--input-shape name:1,3,224,224 ...] [--json]

1. onnx.checker (full_check) on OPTIMISED;
2. seeded inputs built from ORIGINAL's graph inputs (float ~ N(0,1), integer
   inputs small non-negative ints, bool random; unknown/symbolic dims are 1
   unless --input-shape says otherwise);
3. both models run in onnxruntime on the CPU with one intra-op thread;
4. every output is compared by name (by position if the names differ).

Prints one line, `OK name max_abs_diff=...` or `FAIL name ...`; exit 0 when the
checker passes and every output is within tolerance, 1 otherwise, 2 on usage
errors. Also importable: check(orig, opt, atol, seed) -> dict.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

# Keep onnxruntime quiet about its own graph rewrites; errors still surface as exceptions.
os.environ.setdefault("ORT_LOGGING_LEVEL", "3")


def parse_input_shapes(specs: Optional[Sequence[str]]) -> Dict[str, List[int]]:
    """['x:1,3,224,224', ...] -> {'x': [1, 3, 224, 224]}"""
    shapes: Dict[str, List[int]] = {}
    for spec in specs or ():
        name, sep, dims = spec.rpartition(":")
        if not sep or not name:
            raise ValueError(f"--input-shape '{spec}': expected NAME:D1,D2,...")
        try:
            shapes[name] = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            raise ValueError(f"--input-shape '{spec}': dimensions must be integers") from None
        if any(d < 0 for d in shapes[name]):
            raise ValueError(f"--input-shape '{spec}': dimensions must be non-negative")
    return shapes


def graph_inputs(model) -> list:
    """Real graph inputs: IR < 4 models also list every initializer as an input."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def input_shape(value_info, overrides: Dict[str, List[int]]) -> List[int]:
    if value_info.name in overrides:
        return list(overrides[value_info.name])
    dims = value_info.type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims]


def symbolic_inputs(model) -> Dict[str, List[int]]:
    """Inputs with symbolic/unknown dims, with every name set to 1 (a dim written as an expression
    over names, "past_sequence_length + sequence_length", evaluated: 2)."""
    import size_bindings

    ones = {name: 1 for name in size_bindings.symbols(model)}
    out = {}
    for vi in graph_inputs(model):
        dims = vi.type.tensor_type.shape.dim
        if any(not (d.HasField("dim_value") and d.dim_value > 0) for d in dims):
            out[vi.name] = [max(1, s) for s in size_bindings.input_shape(vi, ones)]
    return out


def make_inputs(model, seed: int, overrides: Optional[Dict[str, List[int]]] = None) -> Dict[str, np.ndarray]:
    from onnx import helper

    overrides = overrides or {}
    unknown = set(overrides) - {i.name for i in graph_inputs(model)}
    if unknown:
        raise ValueError(f"--input-shape names unknown input(s): {', '.join(sorted(unknown))}")
    rng = np.random.default_rng(seed)
    feeds: Dict[str, np.ndarray] = {}
    for vi in graph_inputs(model):
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input '{vi.name}' is not a tensor; only tensor inputs are supported")
        elem = vi.type.tensor_type.elem_type
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        shape = input_shape(vi, overrides)
        if np.issubdtype(dtype, np.floating):
            arr = rng.standard_normal(shape).astype(dtype)
        elif np.issubdtype(dtype, np.integer):
            # BERT's token types index a table of two segments
            arr = rng.integers(0, 2 if "token_type" in vi.name.lower() else 4, size=shape).astype(dtype)
        elif dtype == np.bool_:
            arr = rng.random(shape) < 0.5
        else:
            raise ValueError(f"input '{vi.name}' has unsupported dtype {dtype}")
        feeds[vi.name] = arr
    return feeds


def session(path: str, log_severity: int = 3):
    """An onnxruntime session used as the oracle: CPU, one thread, and no graph rewrites.

    ORT's own rewrites are not always faithful: onnxruntime 1.19 fuses Pad into a following
    AveragePool with count_include_pad=0 and so changes the result (inception_v3 differs by 2.5).
    The oracle must run the model as written.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = log_severity
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return float(np.any(a != b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    if np.any(nan_a != nan_b):
        return math.inf
    same = (a64 == b64) | (nan_a & nan_b)  # equal infinities and matching NaNs count as equal
    diff = np.where(same, 0.0, np.abs(a64 - b64))
    return float(diff.max()) if diff.size else 0.0


def _exceeds(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> bool:
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return bool(np.any(a != b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return not np.allclose(b64, a64, atol=atol, rtol=rtol, equal_nan=True)


# Half-precision outputs are compared at their own precision, as rlflow's verification does
# (exec::CompareOptions::half_ulps): atol and rtol widen to 16 machine epsilons of the dtype,
# atol relative to the largest reference magnitude of the output.
HALF_ULPS = 16
HALF_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def output_tolerance(ref: np.ndarray, atol: float, rtol: float) -> tuple:
    """(atol, rtol) for comparing against `ref`: widened for float16 (bfloat16 arrives as float32 from ORT)."""
    eps = HALF_EPS.get(str(ref.dtype))
    if eps is None:
        return atol, rtol
    finite = np.abs(ref[np.isfinite(ref)].astype(np.float64))
    scale = max(1.0, float(finite.max()) if finite.size else 0.0)
    return max(atol, HALF_ULPS * eps * scale), max(rtol, HALF_ULPS * eps)


def check(orig, opt, atol: float = 1e-4, seed: int = 0, input_shapes: Optional[Dict[str, List[int]]] = None,
          rtol: float = 0.0) -> dict:
    """Compare OPT against ORIG. Never raises for bad models; the result says what went wrong.

    Returns {name, ok, checker_ok, checker_error, max_abs_diff, outputs: [...], error}.
    """
    import onnx

    orig, opt = str(orig), str(opt)
    result = {
        "name": Path(orig).name[: -len(".onnx")] if orig.endswith(".onnx") else Path(orig).name,
        "original": orig,
        "optimised": opt,
        "ok": False,
        "checker_ok": False,
        "checker_error": None,
        "max_abs_diff": None,
        "atol": atol,
        "rtol": rtol,
        "seed": seed,
        "outputs": [],
        "error": None,
    }
    for p in (orig, opt):
        if not os.path.isfile(p):
            result["error"] = f"no such file: {p}"
            return result

    try:
        onnx.checker.check_model(opt, full_check=True)  # by path: fine for > 2 GB models
        result["checker_ok"] = True
    except Exception as e:
        result["checker_error"] = _first_line(e)

    try:
        orig_model = onnx.load(orig, load_external_data=False)
        feeds = make_inputs(orig_model, seed, input_shapes)
    except Exception as e:
        result["error"] = f"original: {_first_line(e)}"
        return result

    try:
        s_orig = session(orig)
        ref = s_orig.run(None, feeds)
        ref_names = [o.name for o in s_orig.get_outputs()]
    except Exception as e:
        result["error"] = f"onnxruntime on original: {_first_line(e)}"
        return result

    try:
        s_opt = session(opt)
        opt_in = [i.name for i in s_opt.get_inputs()]
        orig_in = list(feeds)
        if set(opt_in) == set(orig_in):
            opt_feeds = feeds
        elif len(opt_in) == len(orig_in):  # renamed inputs: match by position
            opt_feeds = {n: feeds[o] for n, o in zip(opt_in, orig_in)}
        else:
            result["error"] = f"input mismatch: original {orig_in}, optimised {opt_in}"
            return result
        got = s_opt.run(None, opt_feeds)
        got_names = [o.name for o in s_opt.get_outputs()]
    except Exception as e:
        result["error"] = f"onnxruntime on optimised: {_first_line(e)}"
        return result

    if len(got) != len(ref):
        result["error"] = f"output count differs: original {len(ref)}, optimised {len(got)}"
        return result
    by_name = sorted(ref_names) == sorted(got_names)
    got_by_name = dict(zip(got_names, got))

    ok = True
    worst = 0.0
    for i, (name, r) in enumerate(zip(ref_names, ref)):
        g = got_by_name[name] if by_name else got[i]
        entry = {"name": name, "shape": list(r.shape), "max_abs_diff": None, "ok": False}
        if tuple(r.shape) != tuple(g.shape):
            entry["error"] = f"shape {list(g.shape)} != {list(r.shape)}"
            ok = False
        else:
            d = _max_abs_diff(r, g)
            entry["max_abs_diff"] = d
            a, rt = output_tolerance(r, atol, rtol)
            if (a, rt) != (atol, rtol):
                entry["atol"], entry["rtol"] = a, rt
            entry["ok"] = not _exceeds(r, g, a, rt)
            ok = ok and entry["ok"]
            worst = max(worst, d)
        result["outputs"].append(entry)
    result["max_abs_diff"] = worst
    result["ok"] = bool(ok and result["checker_ok"])
    return result


def _first_line(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:400]


def _json_safe(x):
    """Strict JSON: non-finite floats (a NaN appearing in only one model) become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def format_line(r: dict) -> str:
    d = r.get("max_abs_diff")
    diff = f"max_abs_diff={d:.3g}" if d is not None else "max_abs_diff=n/a"
    widened = [o for o in r.get("outputs", []) if "atol" in o]
    if widened:
        diff += f" (half precision: atol {max(o['atol'] for o in widened):.3g}, rtol {max(o['rtol'] for o in widened):.3g})"
    if r["ok"]:
        return f"OK {r['name']} {diff}"
    why = []
    if r.get("error"):
        why.append(r["error"])
    if not r.get("checker_ok"):
        why.append(f"checker: {r.get('checker_error') or 'not run'}")
    for o in r.get("outputs", []):
        if not o["ok"]:
            why.append(f"output {o['name']}: " + (o.get("error") or f"max_abs_diff={o['max_abs_diff']:.3g} > atol"))
    return f"FAIL {r['name']} {diff} ({'; '.join(why)})"


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original")
    ap.add_argument("optimised")
    ap.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    ap.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    ap.add_argument("--input-shape", action="append", default=[], metavar="NAME:D,D,..",
                    help="shape for an input with symbolic dims (repeatable)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the line")
    args = ap.parse_args(argv)
    try:
        shapes = parse_input_shapes(args.input_shape)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in (args.original, args.optimised):
        if not os.path.isfile(p):
            print(f"error: no such file: {p}", file=sys.stderr)
            return 2
    r = check(args.original, args.optimised, atol=args.atol, seed=args.seed, input_shapes=shapes, rtol=args.rtol)
    if args.json:
        print(json.dumps(_json_safe(r), indent=1, allow_nan=False))
    else:
        print(format_line(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
