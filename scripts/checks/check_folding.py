#!/usr/bin/env python3
"""Differential test of rlflow's constant folding against onnxruntime and onnx.reference.

Builds random constant graphs (every input a Constant, special values drawn often: NaN, +-inf, -0.0,
the integer extremes, empty tensors, bool bytes other than 0 and 1), has rlflow fold them
(`rlflow optimise --search none`: import folds every all-constant node) and compares each folded
output with what onnxruntime computes on the original graph, bit for bit in NaN and inf positions.

  check_folding.py [--rlflow PATH] [--cases N] [--seed S] [--batch K] [--json FILE] [--keep DIR]

A case fails when rlflow's value differs from onnxruntime's, when rlflow refuses (exit 3) a graph
that onnxruntime runs, or when rlflow accepts one onnxruntime refuses (an integer division by zero).
onnx.reference is the second oracle: a case where rlflow differs from it while it agrees with
onnxruntime fails too; where the two oracles disagree (the spec leaves the value open) rlflow follows
onnxruntime, and those cases are counted and listed. Exits 1 on any failure.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

OPSET = 18
F32, F64, I64, I32, I8, U8, BOOL = np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.bool_
FLOATS, INTS = [F32, F64], [I64, I32]

SPECIAL = {
    "f": [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3e9, -3e9, 1e30, -1e30, 1e-40, 65504.0, 300.0],
    I64: [np.iinfo(I64).min, np.iinfo(I64).max, 0, -1, 1, 2, -7, 2**31, -(2**31) - 1],
    I32: [np.iinfo(I32).min, np.iinfo(I32).max, 0, -1, 1, 3, -7],
}


def values(rng, dtype, shape, nonzero=False):
    n = int(np.prod(shape)) if shape else 1
    if dtype in FLOATS:
        v = rng.normal(0, 3, n)
        pick = rng.random(n) < 0.4
        v[pick] = rng.choice(SPECIAL["f"], int(pick.sum()))
    elif dtype == BOOL:
        v = rng.random(n) < 0.5
    else:
        lim = 20
        v = rng.integers(-lim, lim, n).astype(np.int64)
        pick = rng.random(n) < 0.3
        v[pick] = rng.choice(np.array(SPECIAL[dtype], dtype=np.int64), int(pick.sum()))
        if nonzero:
            v[v == 0] = 3
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(v).astype(dtype).reshape(shape)


def shape(rng, allow_empty=True):
    rank = int(rng.integers(0, 4))
    dims = [int(rng.integers(1, 5)) for _ in range(rank)]
    if allow_empty and rank and rng.random() < 0.12:
        dims[int(rng.integers(0, rank))] = 0
    return dims


def const(name, arr, bool_bytes=None):
    t = nh.from_array(np.asarray(arr), name)
    if bool_bytes is not None:  # a bool tensor whose bytes are not only 0 and 1 (ORT reads any nonzero as true)
        t = onnx.TensorProto(name=name, data_type=T.BOOL, dims=list(np.shape(arr)), raw_data=bool_bytes)
    return h.make_node("Constant", [], [name], value=t)


class Case:
    def __init__(self, desc, nodes, out):
        self.desc, self.nodes, self.out = desc, nodes, out


def make_case(rng, k):
    """One random all-constant subgraph ending in output `y{k}`."""
    p = f"c{k}_"
    y = f"y{k}"
    nodes = []

    def c(arr, bool_bytes=None):
        name = f"{p}{len(nodes)}"
        nodes.append(const(name, arr, bool_bytes))
        return name

    binary_f = ["Add", "Sub", "Mul", "Div", "Min", "Max", "Pow", "Equal", "Less", "Greater", "Mod"]
    binary_i = ["Add", "Sub", "Mul", "Div", "Min", "Max", "Mod", "Equal", "Less", "Greater"]
    unary_f = ["Neg", "Abs", "Sqrt", "Sign", "Exp", "Log", "Floor", "Ceil", "Round", "Relu", "Sigmoid", "Tanh",
               "Reciprocal", "IsNaN", "IsInf", "Erf"]
    unary_i = ["Neg", "Abs", "Sign", "Relu"]
    reduces = ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd"]
    kind = rng.choice(["binary", "unary", "cast", "reduce", "where", "not", "shape", "range", "clip", "argmax"],
                      p=[0.22, 0.16, 0.16, 0.14, 0.06, 0.04, 0.1, 0.04, 0.04, 0.04])
    if kind == "binary":
        dt = rng.choice(FLOATS + INTS)
        op = str(rng.choice(binary_f if dt in FLOATS else binary_i))
        s = shape(rng)
        s2 = s[int(rng.integers(0, len(s) + 1)):] if s else []
        if rng.random() < 0.3 and s2:
            s2 = [1 if rng.random() < 0.5 else d for d in s2]
        a, b = values(rng, dt, s), values(rng, dt, s2)
        attrs = {}
        if op == "Mod":
            attrs["fmod"] = 1 if dt in FLOATS else int(rng.integers(0, 2))
        nodes.append(h.make_node(op, [c(a), c(b)], [y], **attrs))
        desc = f"{op}{attrs or ''}({dt.__name__}{s}, {dt.__name__}{s2})"
    elif kind == "unary":
        dt = rng.choice(FLOATS + INTS)
        op = str(rng.choice(unary_f if dt in FLOATS else unary_i))
        s = shape(rng)
        nodes.append(h.make_node(op, [c(values(rng, dt, s))], [y]))
        desc = f"{op}({dt.__name__}{s})"
    elif kind == "cast":
        src = rng.choice(FLOATS + INTS + [BOOL])
        to = rng.choice([T.FLOAT, T.DOUBLE, T.INT64, T.INT32, T.INT8, T.UINT8, T.BOOL])
        s = shape(rng)
        if src == BOOL and rng.random() < 0.5 and s and 0 not in s:
            n = int(np.prod(s))
            raw = bytes(int(v) for v in rng.choice([0, 1, 2, 7, 255], n))
            a = c(np.zeros(s, BOOL), raw)
            desc = f"Cast(to={to})(bool bytes {list(raw)[:6]}{s})"
        else:
            a = c(values(rng, src, s))
            desc = f"Cast(to={to})({src.__name__}{s})"
        nodes.append(h.make_node("Cast", [a], [y], to=int(to)))
    elif kind == "reduce":
        dt = rng.choice(FLOATS + INTS)
        op = str(rng.choice(reduces))
        s = shape(rng)
        while not s:
            s = shape(rng)
        xv = values(rng, dt, s)
        ins = [c(xv)]
        axes = sorted(set(int(a) for a in rng.integers(-len(s), len(s), int(rng.integers(0, len(s) + 1)))))
        if axes and len({a % len(s) for a in axes}) == len(axes):
            ins.append(c(np.array(axes, I64)))
        else:
            axes = []
        keep = int(rng.integers(0, 2))
        nodes.append(h.make_node(op, ins, [y], keepdims=keep))
        desc = f"{op}(keepdims={keep}, axes={axes})({dt.__name__}{s})"
        if dt in FLOATS and op in ("ReduceSum", "ReduceMean"):
            # The order of a sum is the runtime's: allow for cancellation between large terms.
            finite = np.abs(xv[np.isfinite(xv)]).astype(np.float64)
            case = Case(desc, nodes, y)
            case.atol = 1e-6 * max(1.0, float(finite.sum()))
            return case
    elif kind == "where":
        dt = rng.choice(FLOATS + INTS)
        s = shape(rng)
        cond = c(values(rng, BOOL, s))
        nodes.append(h.make_node("Where", [cond, c(values(rng, dt, s)), c(values(rng, dt, s[1:]))], [y]))
        desc = f"Where({dt.__name__}{s})"
    elif kind == "not":
        s = shape(rng)
        nodes.append(h.make_node("Not", [c(values(rng, BOOL, s))], [y]))
        desc = f"Not(bool{s})"
    elif kind == "shape":
        dt = rng.choice(FLOATS + INTS)
        s = shape(rng)
        while not s:
            s = shape(rng)
        x = c(values(rng, dt, s))
        op = str(rng.choice(["Transpose", "Concat", "Slice", "Gather", "Unsqueeze", "Squeeze", "Expand", "Reshape", "Tile"]))
        r = len(s)
        extra = ""
        if op == "Transpose":
            nodes.append(h.make_node(op, [x], [y], perm=[int(v) for v in rng.permutation(r)]))
        elif op == "Concat":
            ax = int(rng.integers(-r, r))
            s2 = list(s)
            s2[ax] = int(rng.integers(0, 3))
            nodes.append(h.make_node(op, [x, c(values(rng, dt, s2))], [y], axis=ax))
        elif op == "Slice":
            ax = int(rng.integers(0, r))
            st, en = int(rng.integers(-5, 5)), int(rng.choice([-(2**63), 2**63 - 1, 2, -1, 0, 10]))
            step = int(rng.choice([1, 2, -1, -2]))
            nodes.append(h.make_node(op, [x, c(np.array([st], I64)), c(np.array([en], I64)), c(np.array([ax], I64)),
                                          c(np.array([step], I64))], [y]))
            extra = f" starts={st} ends={en} axis={ax} step={step}"
        elif op == "Gather":
            ax = int(rng.integers(0, r))
            if s[ax] == 0:
                return None
            idx = rng.integers(-s[ax], s[ax], int(rng.integers(0, 4)))
            nodes.append(h.make_node(op, [x, c(idx.astype(I64))], [y], axis=ax))
        elif op == "Unsqueeze":
            nodes.append(h.make_node(op, [x, c(np.array([int(rng.integers(-r - 1, r + 1))], I64))], [y]))
        elif op == "Squeeze":
            ones = [i for i, d in enumerate(s) if d == 1]
            ins = [x] + ([c(np.array(ones[:1], I64))] if ones and rng.random() < 0.6 else [])
            nodes.append(h.make_node(op, ins, [y]))
        elif op == "Expand":
            tgt = [int(rng.integers(1, 3)) if d == 1 else d for d in s]
            if rng.random() < 0.4:
                tgt = [2] + tgt
            nodes.append(h.make_node(op, [x, c(np.array(tgt, I64))], [y]))
        elif op == "Reshape":
            n = int(np.prod(s))
            tgt = [n] if rng.random() < 0.5 else [-1, 1] if n else [0, 1] + ([] if r < 2 else [])
            if not n:
                tgt = list(s[::-1])
            nodes.append(h.make_node(op, [x, c(np.array(tgt, I64))], [y]))
        elif op == "Tile":
            nodes.append(h.make_node(op, [x, c(rng.integers(0, 3, r).astype(I64))], [y]))
        desc = f"{op}({dt.__name__}{s}){extra}"
    elif kind == "range":
        dt = rng.choice([F32, I64, I32])
        if dt == F32:
            st, li, de = (float(rng.choice([0, -2.5, 1, np.nan, np.inf])), float(rng.choice([5, 3.5, -1, 1e30, np.nan])),
                          float(rng.choice([1, 0.5, -1, 0.0, np.inf])))
        else:
            st, li, de = int(rng.integers(-5, 5)), int(rng.choice([7, -3, 2**62])), int(rng.choice([1, 2, -1, 0, 3]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 2**62 as int32 wraps, on purpose
            bounds = [c(np.array(v).astype(dt)) for v in (st, li, de)]
        nodes.append(h.make_node("Range", bounds, [y]))
        desc = f"Range({st}, {li}, {de}) {dt.__name__}"
    elif kind == "clip":
        dt = rng.choice(FLOATS + INTS)
        s = shape(rng)
        lo, hi = values(rng, dt, []), values(rng, dt, [])
        nodes.append(h.make_node("Clip", [c(values(rng, dt, s)), c(lo), c(hi)], [y]))
        desc = f"Clip({dt.__name__}{s}, {lo}, {hi})"
    else:
        dt = rng.choice(FLOATS + INTS)
        s = shape(rng, allow_empty=False)
        while not s:
            s = shape(rng, allow_empty=False)
        op = str(rng.choice(["ArgMax", "ArgMin"]))
        ax = int(rng.integers(-len(s), len(s)))
        nodes.append(h.make_node(op, [c(values(rng, dt, s))], [y], axis=ax, keepdims=int(rng.integers(0, 2)),
                                 select_last_index=int(rng.integers(0, 2))))
        desc = f"{op}(axis={ax})({dt.__name__}{s})"
    return Case(desc, nodes, y)


def model_of(cases):
    nodes = [n for cs in cases for n in cs.nodes]
    # One real input passed through, so the graph has an input like every model rlflow takes.
    nodes.append(h.make_node("Identity", ["x"], ["x_out"]))
    outs = [onnx.ValueInfoProto(name=cs.out) for cs in cases] + [h.make_tensor_value_info("x_out", T.FLOAT, [1])]
    g = h.make_graph(nodes, "folding", [h.make_tensor_value_info("x", T.FLOAT, [1])], outs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


FEED = {"x": np.ones(1, np.float32)}


def run_ort(path, names):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(names, FEED)


def same(a, b, atol=1e-6):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False, f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    if a.dtype.kind == "f":
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            return False, "NaN positions differ"
        fa, fb = np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b)
        inf_a, inf_b = np.isinf(fa), np.isinf(fb)
        if not np.array_equal(inf_a, inf_b) or not np.array_equal(fa[inf_a], fb[inf_b]):
            return False, "inf positions differ"
        with np.errstate(all="ignore"):
            ok = np.allclose(fa[~inf_a], fb[~inf_b], rtol=1e-5, atol=atol)
        return ok, "" if ok else f"max |diff| {np.max(np.abs(fa[~inf_a] - fb[~inf_b])):.3g}"
    ok = np.array_equal(a, b)
    return ok, "" if ok else "values differ"


def show(v, n=8):
    v = np.asarray(v).ravel()
    return np.array2string(v[:n], threshold=n) + (" ..." if v.size > n else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN", "build/rlflow"))
    ap.add_argument("--cases", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=50, help="cases folded per rlflow run")
    ap.add_argument("--json")
    ap.add_argument("--keep", help="keep the failing cases' models here")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    work = tempfile.mkdtemp(prefix="rlflow-folding-")

    # Each case alone first, in both oracles: onnxruntime must run it (or refuse it: then rlflow must
    # not write a folded value either), onnx.reference must be able to say something.
    good, refused_by_ort, not_run, failures, oracle_split = [], [], [], [], []
    made = 0
    while made < args.cases:
        cs = make_case(rng, made)
        if cs is None:
            continue
        made += 1
        try:
            m = model_of([cs])
        except Exception:
            continue  # the random graph is not even valid ONNX (shape inference refuses it): skip it
        path = os.path.join(work, f"case{made}.onnx")
        onnx.save(m, path)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cs.ort = run_ort(path, [cs.out])[0]
        except Exception as e:
            cs.ort_error = str(e).splitlines()[0][:120]
            if "NOT_IMPLEMENTED" in cs.ort_error:
                not_run.append(cs)  # no kernel for this dtype: nothing to compare with
            else:
                refused_by_ort.append(cs)
            continue
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cs.ref = ReferenceEvaluator(m).run([cs.out], FEED)[0]
        except Exception:
            cs.ref = None
        good.append(cs)

    def fold(cases, tag):
        m = model_of(cases)
        src, dst = os.path.join(work, f"{tag}.onnx"), os.path.join(work, f"{tag}.out.onnx")
        onnx.save(m, src)
        p = subprocess.run([args.rlflow, "optimise", src, "-o", dst, "--search", "none"],
                           capture_output=True, text=True, timeout=120)
        return p, src, dst

    checked = 0
    for b0 in range(0, len(good), args.batch):
        batch = good[b0:b0 + args.batch]
        p, src, dst = fold(batch, f"batch{b0}")
        if p.returncode != 0:  # find which case: each alone
            for cs in batch:
                q, _, d = fold([cs], f"single{id(cs)}")
                if q.returncode != 0:
                    failures.append((cs, f"rlflow exit {q.returncode} where onnxruntime runs it: {q.stderr.strip()[-200:]}"))
                else:
                    check(cs, run_ort(d, [cs.out])[0], failures, oracle_split)
                    checked += 1
            continue
        outs = run_ort(dst, [cs.out for cs in batch])
        for cs, v in zip(batch, outs):
            check(cs, v, failures, oracle_split)
            checked += 1
    for cs in refused_by_ort:
        q, _, d = fold([cs], f"refused{id(cs)}")
        if q.returncode == 0:
            failures.append((cs, f"onnxruntime refuses it ({cs.ort_error}) but rlflow wrote a file"))
        elif q.returncode != 3:
            failures.append((cs, f"onnxruntime refuses it; rlflow exit {q.returncode} (3 expected): {q.stderr.strip()[-200:]}"))

    print(f"{'case':<60} {'problem'}")
    for cs, why in failures:
        print(f"{cs.desc[:60]:<60} {why}")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            onnx.save(model_of([cs]), os.path.join(args.keep, f"{cs.out}.onnx"))
    if oracle_split:
        print(f"\n{len(oracle_split)} cases where onnxruntime and onnx.reference disagree (rlflow follows onnxruntime):")
        for cs, why in oracle_split[:20]:
            print(f"  {cs.desc[:70]}: {why}")
    print(f"\n{made} random constant graphs: {checked} folded and compared with onnxruntime and onnx.reference, "
          f"{len(refused_by_ort)} refused by onnxruntime (rlflow must refuse them too), {len(not_run)} with no onnxruntime kernel "
          f"(not compared), {len(failures)} disagreements")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": made, "checked": checked, "refused_by_ort": len(refused_by_ort),
                       "oracles_disagree": len(oracle_split),
                       "failures": [{"case": cs.desc, "problem": why} for cs, why in failures]}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def check(cs, got, failures, oracle_split):
    ok, why = same(got, cs.ort, getattr(cs, "atol", 1e-6))
    if not ok:
        failures.append((cs, f"onnxruntime {show(cs.ort)}, rlflow {show(got)} ({why})"))
        return
    if cs.ref is None:
        return
    ref_ok, _ = same(cs.ref, cs.ort, getattr(cs, "atol", 1e-6))
    if not ref_ok:
        oracle_split.append((cs, f"onnxruntime {show(cs.ort)}, onnx.reference {show(cs.ref)}"))
        return
    ok, why = same(got, cs.ref, getattr(cs, "atol", 1e-6))
    if not ok:
        failures.append((cs, f"onnx.reference {show(cs.ref)}, rlflow {show(got)} ({why})"))


if __name__ == "__main__":
    sys.exit(main())
