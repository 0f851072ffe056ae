#!/usr/bin/env python3
"""Standard-ONNX fused ops (issue 32) on onnxruntime's CPU execution provider: do they run, and do they pay?

Three modes:

  measure_fused_ops.py --probe [--json]
      Numerics probe with the onnxruntime/onnx importable here: small single-op models (fixed seed)
      for Attention-23 (causal, bool and additive padding masks, GQA, 4-D and 3-D forms),
      RMSNormalization-23, RotaryEmbedding-23 (interleaved or not, with/without position_ids),
      Gelu-20 (none, tanh) and LayerNormalization-17, each checked against a NumPy reference
      (float64, atol=rtol=1e-4) and by onnx.checker.check_model(full_check=True).
      onnx's own reference evaluator is run too, as a cross-check of the NumPy reference.
      Verdicts: runs / wrong (max abs err) / not implemented / load error / run error / crash.

  measure_fused_ops.py --matrix SITE [SITE ...]
      Runs --probe --json once per SITE (a folder holding an onnxruntime, and optionally an onnx,
      package, e.g. made by `pip install --no-deps --target SITE onnxruntime==X`), prepending it
      to PYTHONPATH; a case that kills the process is marked "crash" and the probe resumes after
      it. Prints the op x version table.

  measure_fused_ops.py [--measure] [--configs bert llama] [--seqs 128 512] [--threads 1 0] ...
      Interleaved timing, at fp32 and batch 1, of each fused op against the decomposed chain a
      PyTorch exporter writes (chain at opset --chain-opset, fused ops at their own opset), and of
      merged Q/K/V and gate/up projections against separate MatMuls, and of whole BERT / llama layers
      with every rewrite ("layer") or the fused ops only ("layer_nomerge"). Every round runs each
      session --runs times (auto: about 30 ms of work) and keeps the median; the sessions' order
      rotates from round to round. speedup = chain time / fused time (ratio of the medians over
      rounds), with a paired bootstrap 95% CI over rounds. The chain is also timed with
      onnxruntime's graph optimiser off (ORT_DISABLE_ALL) to show what its own fusions buy, and
      the node list of onnxruntime's optimised chain/fused graphs is printed
      (SessionOptions.optimized_model_filepath). threads 0 = onnxruntime's default (all cores).
      Prints a markdown table; --log FILE appends it with the command line.

Exit status: 0; 1 if a measured pair disagrees numerically (chain vs fused) or a probe case fails.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

os.environ.setdefault("ORT_LOGGING_LEVEL", "3")

F32 = 1  # onnx.TensorProto.FLOAT
I64 = 7
BOOL = 9
# IR version that onnx releases pair with each default opset (onnx/helper.py VERSION_TABLE).
IR_FOR_OPSET = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 11}


# --------------------------------------------------------------------------------------------
# model building (onnx.helper; no onnx schema needed, so any onnx release can write the files)
# --------------------------------------------------------------------------------------------

def _helper():
    from onnx import helper, numpy_helper
    return helper, numpy_helper


def make_model(nodes, inputs, outputs, inits: Dict[str, np.ndarray], opset: int, name: str, ir: Optional[int] = None):
    """inputs/outputs: [(name, elem_type, shape)]; inits: name -> array."""
    helper, numpy_helper = _helper()
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="rlflow-measure_fused_ops")
    m.ir_version = ir if ir is not None else IR_FOR_OPSET.get(opset, 8)
    return m


def N(op, ins, outs, **attrs):
    helper, _ = _helper()
    return helper.make_node(op, ins, outs, **attrs)


# --------------------------------------------------------------------------------------------
# NumPy references (float64)
# --------------------------------------------------------------------------------------------

def ref_softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def ref_attention(q, k, v, q_heads=None, kv_heads=None, causal=False, mask=None):
    """q: (B,Hq,S,D) or (B,S,Hq*D); k,v likewise with Hkv. mask: bool (True = attend) or additive,
    broadcastable to (B,Hq,S,L). Query head h reads K/V head h // (Hq/Hkv)."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    three_d = q.ndim == 3
    if three_d:
        B, S, _ = q.shape
        L = k.shape[1]
        q = q.reshape(B, S, q_heads, -1).transpose(0, 2, 1, 3)
        k = k.reshape(B, L, kv_heads, -1).transpose(0, 2, 1, 3)
        v = v.reshape(B, L, kv_heads, -1).transpose(0, 2, 1, 3)
    hq, hkv = q.shape[1], k.shape[1]
    k = np.repeat(k, hq // hkv, axis=1)
    v = np.repeat(v, hq // hkv, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    S, L = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((S, L), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask.astype(np.float64)
    y = ref_softmax(s) @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return y


def ref_rms(x, scale, eps):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * scale


def ref_layernorm(x, scale, bias, eps):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scale + bias


def ref_gelu(x, approximate="none"):
    x = np.asarray(x, np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def ref_rotary(x, cos_cache, sin_cache, position_ids=None, interleaved=False, num_heads=None, rot_dim=0):
    """x: (B,H,S,D) or (B,S,H*D). cos/sin: (P, rd/2) with position_ids (B,S), else (B,S,rd/2)."""
    x = np.asarray(x, np.float64)
    shape = x.shape
    if x.ndim == 3:
        B, S, _ = x.shape
        x = x.reshape(B, S, num_heads, -1)           # (B,S,H,D)
    else:
        x = x.transpose(0, 2, 1, 3)                   # (B,S,H,D)
    D = x.shape[-1]
    rd = rot_dim or D
    cos = cos_cache[position_ids] if position_ids is not None else cos_cache
    sin = sin_cache[position_ids] if position_ids is not None else sin_cache
    cos = cos[:, :, None, : rd // 2].astype(np.float64)
    sin = sin[:, :, None, : rd // 2].astype(np.float64)
    xr, xp = x[..., :rd], x[..., rd:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
    re, im = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    if interleaved:
        xr = np.stack([re, im], -1).reshape(xr.shape)
    else:
        xr = np.concatenate([re, im], -1)
    y = np.concatenate([xr, xp], -1)
    return y.reshape(shape) if len(shape) == 3 else y.transpose(0, 2, 1, 3)


def rope_caches(max_pos, rd, base=10000.0):
    inv = 1.0 / base ** (np.arange(0, rd, 2, dtype=np.float64) / rd)
    ang = np.outer(np.arange(max_pos, dtype=np.float64), inv)      # (P, rd/2)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


# --------------------------------------------------------------------------------------------
# probe cases: (name, op, builder) ; builder(rng) -> (model, feeds, expected)
# --------------------------------------------------------------------------------------------

def _attn_case(four_d: bool, hq: int, hkv: int, causal: bool, mask_kind: Optional[str]):
    def build(rng):
        B, S, D = 2, 6, 16
        if four_d:
            qs, ks = (B, hq, S, D), (B, hkv, S, D)
        else:
            qs, ks = (B, S, hq * D), (B, S, hkv * D)
        q = rng.standard_normal(qs).astype(np.float32)
        k = rng.standard_normal(ks).astype(np.float32)
        v = rng.standard_normal(ks).astype(np.float32)
        feeds = {"Q": q, "K": k, "V": v}
        ins = [("Q", F32, list(qs)), ("K", F32, list(ks)), ("V", F32, list(ks))]
        node_in = ["Q", "K", "V"]
        mask = None
        if mask_kind:
            # mask_kind: bool / add, with shape (B,1,1,L) (a padding mask as a user writes it) or,
            # with the suffix "_qs", (B,1,S,L) (as transformers expands it before the attention)
            valid = np.ones((B, 1, 1, S), bool)
            valid[1, ..., S - 2:] = False          # second sequence: last two keys are padding
            if mask_kind.endswith("_qs"):
                valid = np.broadcast_to(valid, (B, 1, S, S)).copy()
            if mask_kind.startswith("bool"):
                mask = valid
                ins.append(("M", BOOL, list(mask.shape)))
            else:
                mask = np.where(valid, 0.0, np.finfo(np.float32).min).astype(np.float32)
                ins.append(("M", F32, list(mask.shape)))
            feeds["M"] = mask
            node_in.append("M")
        attrs = {}
        if causal:
            attrs["is_causal"] = 1
        if not four_d:
            attrs["q_num_heads"] = hq
            attrs["kv_num_heads"] = hkv
        ys = list(qs)
        m = make_model([N("Attention", node_in, ["Y"], **attrs)], ins, [("Y", F32, ys)], {}, 23, "attention")
        exp = ref_attention(q, k, v, hq, hkv, causal=causal, mask=mask)
        return m, feeds, exp
    return build


def _rms_case(rng):
    x = rng.standard_normal((2, 6, 32)).astype(np.float32)
    s = rng.standard_normal(32).astype(np.float32)
    m = make_model([N("RMSNormalization", ["X", "S"], ["Y"], axis=-1, epsilon=1e-5)],
                   [("X", F32, [2, 6, 32])], [("Y", F32, [2, 6, 32])], {"S": s}, 23, "rms")
    return m, {"X": x}, ref_rms(x, s, 1e-5)


def _rotary_case(four_d: bool, interleaved: bool, pos_ids: bool, rot_dim: int = 0, heads_attr: bool = False):
    def build(rng):
        B, H, S, D = 2, 4, 6, 16
        rd = rot_dim or D
        xs = (B, H, S, D) if four_d else (B, S, H * D)
        x = rng.standard_normal(xs).astype(np.float32)
        feeds = {"X": x}
        ins = [("X", F32, list(xs))]
        if pos_ids:
            P = 16
            cos, sin = rope_caches(P, rd)
            pid = rng.integers(0, P, size=(B, S)).astype(np.int64)
            feeds["P"] = pid
            ins.append(("P", I64, [B, S]))
            node_in = ["X", "C", "Sn", "P"]
        else:
            c, s_ = rope_caches(S + 3, rd)
            cos = np.stack([c[:S], c[3:S + 3]])          # (B,S,rd/2): batch 1 starts at position 3
            sin = np.stack([s_[:S], s_[3:S + 3]])
            pid = None
            node_in = ["X", "C", "Sn"]
        attrs = {"interleaved": int(interleaved)}
        if not four_d or heads_attr:
            attrs["num_heads"] = H
        if rot_dim:
            attrs["rotary_embedding_dim"] = rot_dim
        m = make_model([N("RotaryEmbedding", node_in, ["Y"], **attrs)], ins, [("Y", F32, list(xs))],
                       {"C": cos, "Sn": sin}, 23, "rotary")
        return m, feeds, ref_rotary(x, cos, sin, pid, interleaved, H, rot_dim)
    return build


def _gelu_case(approx: str):
    def build(rng):
        x = (2 * rng.standard_normal((2, 6, 32))).astype(np.float32)
        m = make_model([N("Gelu", ["X"], ["Y"], approximate=approx)], [("X", F32, [2, 6, 32])],
                       [("Y", F32, [2, 6, 32])], {}, 20, "gelu")
        return m, {"X": x}, ref_gelu(x, approx)
    return build


def _ln_case(rng):
    x = rng.standard_normal((2, 6, 32)).astype(np.float32)
    s = rng.standard_normal(32).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    m = make_model([N("LayerNormalization", ["X", "S", "Bi"], ["Y"], axis=-1, epsilon=1e-5)],
                   [("X", F32, [2, 6, 32])], [("Y", F32, [2, 6, 32])], {"S": s, "Bi": b}, 17, "ln")
    return m, {"X": x}, ref_layernorm(x, s, b, 1e-5)


PROBES: List[Tuple[str, str, Callable]] = [
    ("attn_causal_4d", "Attention-23", _attn_case(True, 8, 8, True, None)),
    ("attn_causal_3d", "Attention-23", _attn_case(False, 8, 8, True, None)),
    ("attn_boolmask_B11L_4d", "Attention-23", _attn_case(True, 8, 8, False, "bool")),
    ("attn_boolmask_B1SL_4d", "Attention-23", _attn_case(True, 8, 8, False, "bool_qs")),
    ("attn_boolmask_B1SL_3d", "Attention-23", _attn_case(False, 8, 8, False, "bool_qs")),
    ("attn_addmask_B11L_4d", "Attention-23", _attn_case(True, 8, 8, False, "add")),
    ("attn_addmask_B1SL_4d", "Attention-23", _attn_case(True, 8, 8, False, "add_qs")),
    ("attn_addmask_B1SL_3d", "Attention-23", _attn_case(False, 8, 8, False, "add_qs")),
    ("attn_gqa_causal_4d", "Attention-23", _attn_case(True, 8, 2, True, None)),
    ("attn_gqa_causal_3d", "Attention-23", _attn_case(False, 8, 2, True, None)),
    ("attn_gqa_boolmask_B1SL_3d", "Attention-23", _attn_case(False, 8, 2, False, "bool_qs")),
    ("attn_gqa_addmask_B1SL_4d", "Attention-23", _attn_case(True, 8, 2, False, "add_qs")),
    ("rmsnorm", "RMSNormalization-23", _rms_case),
    ("rotary_4d_pos", "RotaryEmbedding-23", _rotary_case(True, False, True)),
    ("rotary_4d_pos_interleaved", "RotaryEmbedding-23", _rotary_case(True, True, True)),
    ("rotary_3d_pos", "RotaryEmbedding-23", _rotary_case(False, False, True)),
    ("rotary_3d_nopos_interleaved", "RotaryEmbedding-23", _rotary_case(False, True, False)),
    ("rotary_4d_pos_partial8", "RotaryEmbedding-23", _rotary_case(True, False, True, 8)),
    ("rotary_4d_pos_partial8_num_heads", "RotaryEmbedding-23", _rotary_case(True, False, True, 8, True)),
    ("rotary_3d_pos_partial8_interleaved", "RotaryEmbedding-23", _rotary_case(False, True, True, 8)),
    ("gelu_none", "Gelu-20", _gelu_case("none")),
    ("gelu_tanh", "Gelu-20", _gelu_case("tanh")),
    ("layernorm", "LayerNormalization-17", _ln_case),
]


def versions() -> Dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import onnxruntime as ort
        out["onnxruntime"] = ort.__version__
    except Exception as e:  # noqa: BLE001
        out["onnxruntime"] = f"unavailable ({e.__class__.__name__})"
    try:
        import onnx
        out["onnx"] = onnx.__version__
    except Exception as e:  # noqa: BLE001
        out["onnx"] = f"unavailable ({e.__class__.__name__})"
    return out


def classify_ort_error(msg: str) -> str:
    import re
    if "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg:
        return "not implemented"
    if "Unsupported model IR version" in msg:
        return "IR unsupported"
    m = re.search(r"support for domain ai\.onnx is till opset (\d+)", msg)
    if m:
        return f"not implemented (opset > {m.group(1)})"
    if "opset" in msg.lower() and ("support" in msg.lower() or "newer" in msg.lower()):
        return "opset unsupported"
    return "error"


def run_probe_case(name: str, build: Callable, seed: int) -> dict:
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    rng = np.random.default_rng(seed)
    m, feeds, exp = build(rng)
    res = {"case": name}
    try:
        import onnx
        try:
            onnx.checker.check_model(m, full_check=True)
            res["checker"] = "ok"
        except Exception as e:  # noqa: BLE001
            res["checker"] = "fail: " + str(e).strip().splitlines()[0][:160]
        try:  # cross-check the NumPy reference against onnx's own (Attention's is wrong for GQA/3-D before 1.19)
            from onnx.reference import ReferenceEvaluator
            yr = ReferenceEvaluator(m).run(None, feeds)[0]
            res["onnx_reference_err"] = float(np.max(np.abs(np.asarray(yr, np.float64) - exp)))
        except Exception:  # noqa: BLE001
            res["onnx_reference_err"] = None
    except ImportError:
        res["checker"] = "no onnx"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4  # failures come back as exceptions; keep stderr clean
    note = ""
    for attempt in range(2):
        stage = "load"
        try:
            sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            stage = "run"
            y = sess.run(None, feeds)[0]
            break
        except Exception as e:  # noqa: BLE001
            msg = str(e).strip().splitlines()[0]
            kind = classify_ort_error(msg)
            if "was false." in msg:  # an ORT_ENFORCE: keep the kernel's explanation, not its source path
                msg = "kernel check failed: " + msg.split("was false.", 1)[1].strip()
            if kind == "error":
                kind = stage + " error"
            if kind == "IR unsupported" and attempt == 0 and m.ir_version > 10:
                note = f"IR {m.ir_version} refused, retried as IR 10; "
                m.ir_version = 10
                continue
            res.update(verdict=kind, detail=note + msg[:220])
            return res
    err = float(np.max(np.abs(y.astype(np.float64) - exp))) if y.shape == exp.shape else float("inf")
    ok = y.shape == exp.shape and np.allclose(y, exp, atol=1e-4, rtol=1e-4)
    res.update(verdict="runs" if ok else "wrong", max_abs_err=err,
               detail=note + ("" if y.shape == exp.shape else f"shape {list(y.shape)} != {list(exp.shape)}"))
    return res


def cmd_probe(args) -> int:
    v = versions()
    if args.json:
        print(json.dumps({"versions": v}), flush=True)
    cases = PROBES
    if args.start_after:  # --matrix resumes after a case that killed the process
        names = [n for n, _, _ in PROBES]
        cases = PROBES[names.index(args.start_after) + 1:]
    bad = 0
    rows = []
    for name, op, build in cases:
        if args.json:
            print(json.dumps({"starting": name}), flush=True)
        r = run_probe_case(name, build, args.seed)
        r["op"] = op
        bad += r["verdict"] != "runs"
        rows.append(r)
        if args.json:
            print(json.dumps(r), flush=True)
    if not args.json:
        print(f"onnxruntime {v['onnxruntime']}, onnx {v['onnx']}, numpy {v['numpy']}, python {v['python']}\n")
        print("| case | op | onnxruntime | max abs err | onnx.checker | onnx.reference vs NumPy | detail |\n"
              "|---|---|---|---|---|---|---|")
        for r in rows:
            e, re_ = r.get("max_abs_err"), r.get("onnx_reference_err")
            print(f"| {r['case']} | {r['op']} | {r['verdict']} | {'' if e is None else f'{e:.2e}'} | {r['checker']} | "
                  f"{'-' if re_ is None else f'{re_:.2e}'} | {r.get('detail', '')} |")
    return 1 if bad else 0


def cmd_matrix(args) -> int:
    names = [n for n, _, _ in PROBES]
    table: Dict[str, Dict[str, str]] = {}
    checker: Dict[str, Dict[str, str]] = {}
    cols = []
    for site in args.matrix:
        env = dict(os.environ)
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        col = None
        start_after = None
        results: Dict[str, dict] = {}
        while True:
            cmd = [sys.executable, os.path.abspath(__file__), "--probe", "--json", "--seed", str(args.seed)]
            if start_after:
                cmd += ["--start-after", start_after]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            current = None
            for line in p.stdout.splitlines():
                d = json.loads(line)
                if "versions" in d:
                    col = col or f"ort {d['versions']['onnxruntime']} / onnx {d['versions']['onnx']}"
                elif "starting" in d:
                    current = d["starting"]
                else:
                    results[d["case"]] = d
                    current = None
            if p.returncode in (0, 1) or current is None:
                if p.returncode not in (0, 1) and not results:
                    col = col or site
                    for n in names:
                        results[n] = {"verdict": f"import failed (rc {p.returncode})", "checker": "-"}
                break
            results[current] = {"case": current, "verdict": f"crash (rc {p.returncode})", "checker": "-"}
            start_after = current
            if current == names[-1]:
                break
        cols.append(col)
        for n in names:
            r = results.get(n, {"verdict": "-", "checker": "-"})
            cell = r["verdict"]
            if r["verdict"] == "wrong":
                cell += f" ({r['max_abs_err']:.2g})"
            if "IR 10" in r.get("detail", ""):
                cell += ", IR 11 refused"
            table.setdefault(n, {})[col] = cell
            checker.setdefault(n, {})[col] = r.get("checker", "-")
        print(f"[matrix] {col}: " + ", ".join(f"{n}={table[n][col]}" for n in names), file=sys.stderr, flush=True)
    print("| case | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for n in names:
        print(f"| {n} | " + " | ".join(table[n][c] for c in cols) + " |")
    print("\nonnx.checker.check_model(full_check=True) on the same files:\n")
    print("| case | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for n in names:
        print(f"| {n} | " + " | ".join((checker[n][c] if checker[n][c] in ('ok', '-', 'no onnx') else 'fail') for c in cols) + " |")
    firsts = {}
    for n in names:
        for c in cols:
            if table[n][c].startswith("runs"):
                firsts[n] = c
                break
    print("\nfirst column where each case runs correctly: " + ", ".join(f"{n}: {firsts.get(n, 'none')}" for n in names))
    return 0


# --------------------------------------------------------------------------------------------
# measured pairs: builder(cfg, S, opset) -> (chain, fused, feeds)
# --------------------------------------------------------------------------------------------

CONFIGS = {
    # BERT-base/GPT-2 sized layer: 12 heads of 64, biases, GELU MLP.
    "bert": dict(hidden=768, heads=12, kv_heads=12, inter=3072, bias=True),
    # llama-small: 8 heads of 64, 2 K/V heads (GQA), SwiGLU MLP, no biases.
    "llama": dict(hidden=512, heads=8, kv_heads=2, inter=1408, bias=False),
}
MIN_F32 = np.finfo(np.float32).min


def pair_attention(cfg, S, opset, rng, mode):
    """mode: causal (causal mask constant, as an exporter bakes it) or pad (additive padding-mask input)."""
    H, Hk = cfg["heads"], cfg["kv_heads"]
    D = cfg["hidden"] // H
    hq, hk = H * D, Hk * D
    q = rng.standard_normal((1, S, hq)).astype(np.float32)
    k = rng.standard_normal((1, S, hk)).astype(np.float32)
    v = rng.standard_normal((1, S, hk)).astype(np.float32)
    feeds = {"q": q, "k": k, "v": v}
    ins = [("q", F32, [1, S, hq]), ("k", F32, [1, S, hk]), ("v", F32, [1, S, hk])]
    outs = [("y", F32, [1, S, hq])]
    inits = {"shape_q": np.array([1, S, H, D], np.int64), "shape_k": np.array([1, S, Hk, D], np.int64),
             "shape_y": np.array([1, S, hq], np.int64), "scale": np.array(math.sqrt(D), np.float32)}
    nodes = [
        N("Reshape", ["q", "shape_q"], ["q4"]), N("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        N("Reshape", ["k", "shape_k"], ["k4"]), N("Transpose", ["k4"], ["kt"], perm=[0, 2, 1, 3]),
        N("Reshape", ["v", "shape_k"], ["v4"]), N("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
    ]
    kk, vv = "kt", "vt"
    if Hk != H:  # HF repeat_kv: (B,Hk,S,D) -> (B,Hk,g,S,D) -> (B,H,S,D)
        inits["ax2"] = np.array([2], np.int64)
        inits["rep_shape"] = np.array([1, Hk, H // Hk, S, D], np.int64)
        inits["shape_rep"] = np.array([1, H, S, D], np.int64)
        for t in ("kt", "vt"):
            nodes += [N("Unsqueeze", [t, "ax2"], [t + "_u"]), N("Expand", [t + "_u", "rep_shape"], [t + "_e"]),
                      N("Reshape", [t + "_e", "shape_rep"], [t + "_r"])]
        kk, vv = "kt_r", "vt_r"
    nodes += [N("Transpose", [kk], ["kT"], perm=[0, 1, 3, 2]), N("MatMul", ["qt", "kT"], ["s0"]),
              N("Div", ["s0", "scale"], ["s1"])]
    if mode == "causal":
        inits["causal"] = np.triu(np.full((S, S), MIN_F32, np.float32), 1)[None, None]
        nodes.append(N("Add", ["s1", "causal"], ["s2"]))
    else:  # (B,1,S,L), as transformers expands a padding mask (onnxruntime refuses (B,1,1,L), see --probe)
        valid = np.ones((1, 1, S, S), bool)
        valid[..., S - S // 8:] = False
        feeds["mask"] = np.where(valid, 0.0, MIN_F32).astype(np.float32)
        ins.append(("mask", F32, [1, 1, S, S]))
        nodes.append(N("Add", ["s1", "mask"], ["s2"]))
    nodes += [N("Softmax", ["s2"], ["p"], axis=-1), N("MatMul", ["p", vv], ["o"]),
              N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), N("Reshape", ["ot", "shape_y"], ["y"])]
    chain = make_model(nodes, ins, outs, inits, opset, "attn_chain")
    attrs = dict(q_num_heads=H, kv_num_heads=Hk)
    fin = ["q", "k", "v"]
    if mode == "causal":
        attrs["is_causal"] = 1
    else:
        fin.append("mask")
    fused = make_model([N("Attention", fin, ["y"], **attrs)], ins, outs, {}, 23, "attn_fused")
    return chain, fused, feeds


def pair_rmsnorm(cfg, S, opset, rng):
    h = cfg["hidden"]
    x = rng.standard_normal((1, S, h)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    ins, outs = [("x", F32, [1, S, h])], [("y", F32, [1, S, h])]
    inits = {"w": w, "two": np.array(2.0, np.float32), "eps": np.array(1e-6, np.float32),
             "one": np.array(1.0, np.float32), "axes": np.array([-1], np.int64)}
    nodes = [N("Pow", ["x", "two"], ["x2"]), N("ReduceMean", ["x2", "axes"], ["ms"], keepdims=1),
             N("Add", ["ms", "eps"], ["mse"]), N("Sqrt", ["mse"], ["rt"]), N("Div", ["one", "rt"], ["inv"]),
             N("Mul", ["x", "inv"], ["xn"]), N("Mul", ["w", "xn"], ["y"])]
    if opset < 18:
        inits.pop("axes")
        nodes[1] = N("ReduceMean", ["x2"], ["ms"], axes=[-1], keepdims=1)
    chain = make_model(nodes, ins, outs, inits, opset, "rms_chain")
    fused = make_model([N("RMSNormalization", ["x", "w"], ["y"], axis=-1, epsilon=1e-6)], ins, outs, {"w": w}, 23, "rms_fused")
    return chain, fused, {"x": x}


def pair_layernorm(cfg, S, opset, rng):
    h = cfg["hidden"]
    x = rng.standard_normal((1, S, h)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    b = (0.1 * rng.standard_normal(h)).astype(np.float32)
    ins, outs = [("x", F32, [1, S, h])], [("y", F32, [1, S, h])]
    inits = {"w": w, "b": b, "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "axes": np.array([-1], np.int64)}
    rm = (lambda i, o: N("ReduceMean", [i, "axes"], [o], keepdims=1)) if opset >= 18 else \
        (lambda i, o: N("ReduceMean", [i], [o], axes=[-1], keepdims=1))
    nodes = [rm("x", "mu"), N("Sub", ["x", "mu"], ["d"]), N("Pow", ["d", "two"], ["d2"]), rm("d2", "var"),
             N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["d", "sd"], ["xn"]),
             N("Mul", ["xn", "w"], ["xw"]), N("Add", ["xw", "b"], ["y"])]
    if opset < 18:
        inits.pop("axes")
    chain = make_model(nodes, ins, outs, inits, opset, "ln_chain")
    fused = make_model([N("LayerNormalization", ["x", "w", "b"], ["y"], axis=-1, epsilon=1e-5)], ins, outs,
                       {"w": w, "b": b}, 17, "ln_fused")
    return chain, fused, {"x": x}


def pair_gelu(cfg, S, opset, rng, approx):
    n = cfg["inter"]
    x = rng.standard_normal((1, S, n)).astype(np.float32)
    ins, outs = [("x", F32, [1, S, n])], [("y", F32, [1, S, n])]
    if approx == "none":  # torch: x * 0.5 * (1 + erf(x / sqrt(2)))
        inits = {"sq2": np.array(math.sqrt(2), np.float32), "one": np.array(1.0, np.float32),
                 "half": np.array(0.5, np.float32)}
        nodes = [N("Div", ["x", "sq2"], ["a"]), N("Erf", ["a"], ["e"]), N("Add", ["e", "one"], ["e1"]),
                 N("Mul", ["x", "e1"], ["m"]), N("Mul", ["m", "half"], ["y"])]
    else:  # GPT-2 NewGELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        inits = {"three": np.array(3.0, np.float32), "c": np.array(0.044715, np.float32),
                 "k": np.array(math.sqrt(2 / math.pi), np.float32), "one": np.array(1.0, np.float32),
                 "half": np.array(0.5, np.float32)}
        nodes = [N("Pow", ["x", "three"], ["x3"]), N("Mul", ["x3", "c"], ["cx3"]), N("Add", ["x", "cx3"], ["in"]),
                 N("Mul", ["in", "k"], ["kin"]), N("Tanh", ["kin"], ["t"]), N("Add", ["t", "one"], ["t1"]),
                 N("Mul", ["x", "half"], ["hx"]), N("Mul", ["hx", "t1"], ["y"])]
    chain = make_model(nodes, ins, outs, inits, opset, "gelu_chain")
    fused = make_model([N("Gelu", ["x"], ["y"], approximate=approx)], ins, outs, {}, 20, "gelu_fused")
    return chain, fused, {"x": x}


def pair_rotary(cfg, S, opset, rng):
    """HF apply_rotary_pos_emb on q (B,H,S,D): cos/sin gathered by position_ids, rotate_half by Slice/Neg/Concat."""
    H = cfg["heads"]
    D = cfg["hidden"] // H
    P = 2048
    cos_h, sin_h = rope_caches(P, D)                 # (P, D/2) for RotaryEmbedding
    cos_f, sin_f = np.concatenate([cos_h, cos_h], 1), np.concatenate([sin_h, sin_h], 1)  # (P, D) as HF caches
    q = rng.standard_normal((1, H, S, D)).astype(np.float32)
    pid = np.arange(S, dtype=np.int64)[None]
    ins = [("q", F32, [1, H, S, D]), ("pos", I64, [1, S])]
    outs = [("y", F32, [1, H, S, D])]
    inits = {"cosc": cos_f, "sinc": sin_f, "ax1": np.array([1], np.int64), "h0": np.array([0], np.int64),
             "h1": np.array([D // 2], np.int64), "h2": np.array([D], np.int64), "axl": np.array([-1], np.int64)}
    nodes = [N("Gather", ["cosc", "pos"], ["cg"], axis=0), N("Unsqueeze", ["cg", "ax1"], ["cu"]),
             N("Gather", ["sinc", "pos"], ["sg"], axis=0), N("Unsqueeze", ["sg", "ax1"], ["su"]),
             N("Slice", ["q", "h0", "h1", "axl"], ["x1"]), N("Slice", ["q", "h1", "h2", "axl"], ["x2"]),
             N("Neg", ["x2"], ["nx2"]), N("Concat", ["nx2", "x1"], ["rh"], axis=-1),
             N("Mul", ["q", "cu"], ["qc"]), N("Mul", ["rh", "su"], ["rs"]), N("Add", ["qc", "rs"], ["y"])]
    chain = make_model(nodes, ins, outs, inits, opset, "rope_chain")
    fused = make_model([N("RotaryEmbedding", ["q", "cosc", "sinc", "pos"], ["y"])], ins, outs,
                       {"cosc": cos_h, "sinc": sin_h}, 23, "rope_fused")
    return chain, fused, {"q": q, "pos": pid}


def pair_qkv(cfg, S, opset, rng):
    h, H, Hk = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    D = h // H
    widths = [H * D, Hk * D, Hk * D]
    x = rng.standard_normal((1, S, h)).astype(np.float32)
    Ws = [(rng.standard_normal((h, w)) / math.sqrt(h)).astype(np.float32) for w in widths]
    bs = [(0.1 * rng.standard_normal(w)).astype(np.float32) for w in widths]
    ins = [("x", F32, [1, S, h])]
    outs = [(n, F32, [1, S, w]) for n, w in zip("qkv", widths)]
    inits, nodes = {}, []
    for n, W, b in zip("qkv", Ws, bs):
        inits["W" + n] = W
        if cfg["bias"]:
            inits["b" + n] = b
            nodes += [N("MatMul", ["x", "W" + n], ["m" + n]), N("Add", ["m" + n, "b" + n], [n])]
        else:
            nodes.append(N("MatMul", ["x", "W" + n], [n]))
    chain = make_model(nodes, ins, outs, inits, opset, "qkv_separate")
    inits2 = {"W": np.concatenate(Ws, 1), "split": np.array(widths, np.int64)}
    if cfg["bias"]:
        inits2["b"] = np.concatenate(bs)
        nodes2 = [N("MatMul", ["x", "W"], ["m"]), N("Add", ["m", "b"], ["mb"]), N("Split", ["mb", "split"], list("qkv"), axis=-1)]
    else:
        nodes2 = [N("MatMul", ["x", "W"], ["m"]), N("Split", ["m", "split"], list("qkv"), axis=-1)]
    fused = make_model(nodes2, ins, outs, inits2, max(opset, 13), "qkv_merged")
    return chain, fused, {"x": x}


def pair_gateup(cfg, S, opset, rng):
    h, n = cfg["hidden"], cfg["inter"]
    x = rng.standard_normal((1, S, h)).astype(np.float32)
    Wg = (rng.standard_normal((h, n)) / math.sqrt(h)).astype(np.float32)
    Wu = (rng.standard_normal((h, n)) / math.sqrt(h)).astype(np.float32)
    ins, outs = [("x", F32, [1, S, h])], [("y", F32, [1, S, n])]
    act = [N("Sigmoid", ["g"], ["sg"]), N("Mul", ["g", "sg"], ["silu"]), N("Mul", ["silu", "u"], ["y"])]
    chain = make_model([N("MatMul", ["x", "Wg"], ["g"]), N("MatMul", ["x", "Wu"], ["u"])] + act, ins, outs,
                       {"Wg": Wg, "Wu": Wu}, opset, "gateup_separate")
    fused = make_model([N("MatMul", ["x", "W"], ["m"]), N("Split", ["m", "split"], ["g", "u"], axis=-1)] + act, ins, outs,
                       {"W": np.concatenate([Wg, Wu], 1), "split": np.array([n, n], np.int64)}, max(opset, 13), "gateup_merged")
    return chain, fused, {"x": x}


class _G:
    """Tiny graph builder for the whole-layer pairs: fresh tensor names, initializers by value."""

    def __init__(self):
        self.nodes, self.inits, self.k = [], {}, 0

    def c(self, arr) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = np.asarray(arr)
        return name

    def w(self, name, arr) -> str:
        self.inits[name] = arr
        return name

    def __call__(self, op, ins, nout=1, **attrs):
        outs = [f"t{self.k}_{i}" for i in range(nout)]
        self.k += 1
        self.nodes.append(N(op, list(ins), outs, **attrs))
        return outs[0] if nout == 1 else outs


def _chain_rms(g, x, w, eps=1e-6):
    ms = g("ReduceMean", [g("Pow", [x, g.c(np.float32(2))]), g.c(np.array([-1], np.int64))], keepdims=1)
    inv = g("Div", [g.c(np.float32(1)), g("Sqrt", [g("Add", [ms, g.c(np.float32(eps))])])])
    return g("Mul", [w, g("Mul", [x, inv])])


def _chain_ln(g, x, w, b, eps=1e-5):
    axes = g.c(np.array([-1], np.int64))
    d = g("Sub", [x, g("ReduceMean", [x, axes], keepdims=1)])
    var = g("ReduceMean", [g("Pow", [d, g.c(np.float32(2))]), axes], keepdims=1)
    xn = g("Div", [d, g("Sqrt", [g("Add", [var, g.c(np.float32(eps))])])])
    return g("Add", [g("Mul", [xn, w]), b])


def _linear(g, x, W, b=None):
    y = g("MatMul", [x, W])
    return g("Add", [y, b]) if b else y


def _chain_heads(g, x, S, H, D):  # (1,S,H*D) -> (1,H,S,D)
    return g("Transpose", [g("Reshape", [x, g.c(np.array([1, S, H, D], np.int64))])], perm=[0, 2, 1, 3])


def _chain_core(g, q4, k4, v4, S, H, Hk, D, mask=None):
    """exporter-style attention on (1,H,S,D) q and (1,Hk,S,D) k/v -> (1,S,H*D); causal constant unless mask."""
    if Hk != H:
        rep, shp = g.c(np.array([1, Hk, H // Hk, S, D], np.int64)), g.c(np.array([1, H, S, D], np.int64))
        ax2 = g.c(np.array([2], np.int64))
        k4 = g("Reshape", [g("Expand", [g("Unsqueeze", [k4, ax2]), rep]), shp])
        v4 = g("Reshape", [g("Expand", [g("Unsqueeze", [v4, ax2]), rep]), shp])
    s = g("Div", [g("MatMul", [q4, g("Transpose", [k4], perm=[0, 1, 3, 2])]), g.c(np.float32(math.sqrt(D)))])
    bias = mask if mask else g.c(np.triu(np.full((S, S), MIN_F32, np.float32), 1)[None, None])
    o = g("MatMul", [g("Softmax", [g("Add", [s, bias])], axis=-1), v4])
    return g("Reshape", [g("Transpose", [o], perm=[0, 2, 1, 3]), g.c(np.array([1, S, H * D], np.int64))])


def _chain_rope(g, x4, cu, su, D):
    axl = g.c(np.array([-1], np.int64))
    h0, h1, h2 = (g.c(np.array([v], np.int64)) for v in (0, D // 2, D))
    x1, x2 = g("Slice", [x4, h0, h1, axl]), g("Slice", [x4, h1, h2, axl])
    rh = g("Concat", [g("Neg", [x2]), x1], axis=-1)
    return g("Add", [g("Mul", [x4, cu]), g("Mul", [rh, su])])


def pair_layer(cfg, S, opset, rng, merge=True):
    """A whole pre-norm llama layer (RMSNorm, Q/K/V, rotary, GQA causal attention, o-proj, SwiGLU MLP) or a
    post-norm BERT layer (Q/K/V+bias, padded attention, LayerNorm, GELU MLP): exporter chain vs every rewrite
    (merge=False: the fused ops only, Q/K/V and gate/up projections left separate)."""
    h, H, Hk, n = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["inter"]
    D = h // H
    wq, wk = H * D, Hk * D
    r = lambda *shape: (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)  # noqa: E731
    x = rng.standard_normal((1, S, h)).astype(np.float32)
    Wq, Wk, Wv, Wo = r(h, wq), r(h, wk), r(h, wk), r(wq, h)
    ins, outs = [("x", F32, [1, S, h])], [("y", F32, [1, S, h])]
    feeds = {"x": x}
    c, f = _G(), _G()
    if cfg["bias"]:  # BERT: post-norm, padding mask (1,1,S,S), GELU(erf)
        W1, W2 = r(h, n), r(n, h)
        bq, bk, bv, bo, b1, b2 = ((0.1 * rng.standard_normal(k)).astype(np.float32) for k in (wq, wk, wk, h, n, h))
        g1, be1, g2, be2 = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32), np.zeros(h, np.float32), \
            (1 + 0.1 * rng.standard_normal(h)).astype(np.float32), np.zeros(h, np.float32)
        valid = np.ones((1, 1, S, S), bool)
        valid[..., S - S // 8:] = False
        feeds["mask"] = np.where(valid, 0.0, MIN_F32).astype(np.float32)
        ins.append(("mask", F32, [1, 1, S, S]))
        # chain
        q = _linear(c, "x", c.w("Wq", Wq), c.w("bq", bq))
        k = _linear(c, "x", c.w("Wk", Wk), c.w("bk", bk))
        v = _linear(c, "x", c.w("Wv", Wv), c.w("bv", bv))
        a = _chain_core(c, _chain_heads(c, q, S, H, D), _chain_heads(c, k, S, Hk, D), _chain_heads(c, v, S, Hk, D),
                        S, H, Hk, D, mask="mask")
        h1 = _chain_ln(c, c("Add", ["x", _linear(c, a, c.w("Wo", Wo), c.w("bo", bo))]), c.w("g1", g1), c.w("be1", be1))
        u = _linear(c, h1, c.w("W1", W1), c.w("b1", b1))
        e = c("Erf", [c("Div", [u, c.c(np.float32(math.sqrt(2)))])])
        gl = c("Mul", [c("Mul", [u, c("Add", [e, c.c(np.float32(1))])]), c.c(np.float32(0.5))])
        c.nodes.append(N("Identity", [_chain_ln(c, c("Add", [h1, _linear(c, gl, c.w("W2", W2), c.w("b2", b2))]),
                                                 c.w("g2", g2), c.w("be2", be2))], ["y"]))
        # fused
        if merge:
            qkv = _linear(f, "x", f.w("Wqkv", np.concatenate([Wq, Wk, Wv], 1)), f.w("bqkv", np.concatenate([bq, bk, bv])))
            q, k, v = f("Split", [qkv, f.c(np.array([wq, wk, wk], np.int64))], nout=3, axis=-1)
        else:
            q, k, v = (_linear(f, "x", f.w("W" + nm, W), f.w("b" + nm, b))
                       for nm, W, b in (("q", Wq, bq), ("k", Wk, bk), ("v", Wv, bv)))
        a = f("Attention", [q, k, v, "mask"], q_num_heads=H, kv_num_heads=Hk)
        h1 = f("LayerNormalization", [f("Add", ["x", _linear(f, a, f.w("Wo", Wo), f.w("bo", bo))]), f.w("g1", g1),
                                      f.w("be1", be1)], axis=-1, epsilon=1e-5)
        gl = f("Gelu", [_linear(f, h1, f.w("W1", W1), f.w("b1", b1))])
        f.nodes.append(N("LayerNormalization", [f("Add", [h1, _linear(f, gl, f.w("W2", W2), f.w("b2", b2))]),
                                                f.w("g2", g2), f.w("be2", be2)], ["y"], axis=-1, epsilon=1e-5))
    else:  # llama: pre-norm, rotary on q and k, GQA causal attention, SwiGLU
        Wg, Wu, Wd = r(h, n), r(h, n), r(n, h)
        n1, n2 = ((1 + 0.1 * rng.standard_normal(h)).astype(np.float32) for _ in range(2))
        P = 2048
        cos_h, sin_h = rope_caches(P, D)
        feeds["pos"] = np.arange(S, dtype=np.int64)[None]
        ins.append(("pos", I64, [1, S]))
        # chain
        xn = _chain_rms(c, "x", c.w("n1", n1))
        q, k, v = (_linear(c, xn, c.w(nm, W)) for nm, W in (("Wq", Wq), ("Wk", Wk), ("Wv", Wv)))
        ax1 = c.c(np.array([1], np.int64))
        cu = c("Unsqueeze", [c("Gather", [c.w("cosc", np.concatenate([cos_h, cos_h], 1)), "pos"], axis=0), ax1])
        su = c("Unsqueeze", [c("Gather", [c.w("sinc", np.concatenate([sin_h, sin_h], 1)), "pos"], axis=0), ax1])
        q4 = _chain_rope(c, _chain_heads(c, q, S, H, D), cu, su, D)
        k4 = _chain_rope(c, _chain_heads(c, k, S, Hk, D), cu, su, D)
        a = _chain_core(c, q4, k4, _chain_heads(c, v, S, Hk, D), S, H, Hk, D)
        h1 = c("Add", ["x", _linear(c, a, c.w("Wo", Wo))])
        hn = _chain_rms(c, h1, c.w("n2", n2))
        gg, uu = _linear(c, hn, c.w("Wg", Wg)), _linear(c, hn, c.w("Wu", Wu))
        m = c("Mul", [c("Mul", [gg, c("Sigmoid", [gg])]), uu])
        c.nodes.append(N("Add", [h1, _linear(c, m, c.w("Wd", Wd))], ["y"]))
        # fused
        xn = f("RMSNormalization", ["x", f.w("n1", n1)], axis=-1, epsilon=1e-6)
        if merge:
            q, k, v = f("Split", [_linear(f, xn, f.w("Wqkv", np.concatenate([Wq, Wk, Wv], 1))),
                                  f.c(np.array([wq, wk, wk], np.int64))], nout=3, axis=-1)
        else:
            q, k, v = (_linear(f, xn, f.w(nm, W)) for nm, W in (("Wq", Wq), ("Wk", Wk), ("Wv", Wv)))
        cc, ss = f.w("cosc", cos_h), f.w("sinc", sin_h)
        q = f("RotaryEmbedding", [q, cc, ss, "pos"], num_heads=H)
        k = f("RotaryEmbedding", [k, cc, ss, "pos"], num_heads=Hk)
        a = f("Attention", [q, k, v], q_num_heads=H, kv_num_heads=Hk, is_causal=1)
        h1 = f("Add", ["x", _linear(f, a, f.w("Wo", Wo))])
        hn = f("RMSNormalization", [h1, f.w("n2", n2)], axis=-1, epsilon=1e-6)
        if merge:
            gg, uu = f("Split", [_linear(f, hn, f.w("Wgu", np.concatenate([Wg, Wu], 1))),
                                 f.c(np.array([n, n], np.int64))], nout=2, axis=-1)
        else:
            gg, uu = _linear(f, hn, f.w("Wg", Wg)), _linear(f, hn, f.w("Wu", Wu))
        m = f("Mul", [f("Mul", [gg, f("Sigmoid", [gg])]), uu])
        f.nodes.append(N("Add", [h1, _linear(f, m, f.w("Wd", Wd))], ["y"]))
    chain = make_model(c.nodes, ins, outs, c.inits, opset, "layer_chain")
    fused = make_model(f.nodes, ins, outs, f.inits, 23, "layer_fused")
    return chain, fused, feeds


PAIRS = {
    # name: (configs it applies to, builder, what "fused" means)
    "attention_causal": (("bert", "llama"), lambda c, S, o, r: pair_attention(c, S, o, r, "causal"), "Attention-23 is_causal=1 (GQA in llama)"),
    "attention_padmask": (("bert",), lambda c, S, o, r: pair_attention(c, S, o, r, "pad"), "Attention-23 + additive padding mask"),
    "rmsnorm": (("llama",), pair_rmsnorm, "RMSNormalization-23"),
    "rotary": (("llama",), pair_rotary, "RotaryEmbedding-23 (q, 4-D, position_ids)"),
    "gelu_erf": (("bert",), lambda c, S, o, r: pair_gelu(c, S, o, r, "none"), "Gelu-20"),
    "gelu_tanh": (("bert",), lambda c, S, o, r: pair_gelu(c, S, o, r, "tanh"), "Gelu-20 approximate=tanh"),
    "layernorm": (("bert",), pair_layernorm, "LayerNormalization-17"),
    "qkv_merge": (("bert", "llama"), pair_qkv, "one MatMul(+Add) + Split"),
    "gateup_merge": (("llama",), pair_gateup, "one MatMul + Split (SwiGLU)"),
    "layer": (("bert", "llama"), pair_layer, "whole layer, every rewrite above applied"),
    "layer_nomerge": (("bert", "llama"), lambda c, S, o, r: pair_layer(c, S, o, r, merge=False),
                      "whole layer, fused ops only (projections left separate)"),
}


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------

def make_session(model_bytes: bytes, threads: int, level: str, dump: Optional[str] = None):
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                  "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}[level]
    # Sessions run in turns: idle worker threads must not spin and steal the other session's cores.
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if dump:
        o.optimized_model_filepath = dump
    return ort.InferenceSession(model_bytes, o, providers=["CPUExecutionProvider"])


def optimized_ops(model_bytes: bytes, threads: int) -> str:
    import onnx
    with tempfile.TemporaryDirectory(prefix="rlflow-fused-") as d:
        p = os.path.join(d, "opt.onnx")
        make_session(model_bytes, threads, "all", dump=p)
        m = onnx.load(p)
    c = Counter((n.domain + ":" if n.domain and n.domain != "ai.onnx" else "") + n.op_type for n in m.graph.node)
    return ", ".join(f"{k}" + (f"x{v}" if v > 1 else "") for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def time_runs(sess, feeds, n) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, rng, reps=2000) -> Tuple[float, float, float]:
    """median(a)/median(b) over paired rounds, with a percentile bootstrap 95% CI."""
    est = float(np.median(a) / np.median(b))
    idx = rng.integers(0, len(a), size=(reps, len(a)))
    r = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    lo, hi = np.percentile(r, [2.5, 97.5])
    return est, float(lo), float(hi)


def measure_pair(chain, fused, feeds, threads, rounds, runs, target_ms, rng) -> dict:
    cb, fb = chain.SerializeToString(), fused.SerializeToString()
    sess = {"chain": make_session(cb, threads, "all"), "fused": make_session(fb, threads, "all"),
            "chain_off": make_session(cb, threads, "off")}
    outs = {k: s.run(None, feeds) for k, s in sess.items()}
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(outs["chain"], outs["fused"]))
    scale = max(float(np.max(np.abs(a))) for a in outs["chain"])
    agree = all(np.allclose(a, b, atol=1e-3 * max(scale, 1.0), rtol=1e-3) for a, b in zip(outs["chain"], outs["fused"]))
    for s in sess.values():  # warm-up
        time_runs(s, feeds, 3)
    if runs <= 0:
        t = time_runs(sess["chain"], feeds, 3)
        runs = int(min(50, max(3, round(target_ms / max(t, 1e-3)))))
    order = ["chain", "fused", "chain_off"]
    med = {k: [] for k in order}
    for r in range(rounds):
        rot = order[r % 3:] + order[:r % 3]
        for k in rot:
            med[k].append(time_runs(sess[k], feeds, runs))
    a = {k: np.array(v) for k, v in med.items()}
    sp = bootstrap_ratio(a["chain"], a["fused"], rng)
    opt = bootstrap_ratio(a["chain_off"], a["chain"], rng)
    return {"chain_ms": float(np.median(a["chain"])), "fused_ms": float(np.median(a["fused"])),
            "chain_off_ms": float(np.median(a["chain_off"])), "speedup": sp, "ort_opt_gain": opt,
            "runs": runs, "max_abs_diff": err, "agree": agree}


def cmd_measure(args) -> int:
    import onnxruntime as ort
    v = versions()
    lines = []
    out = lambda s="": (print(s, flush=True), lines.append(s))  # noqa: E731
    cores = os.cpu_count()
    out(f"onnxruntime {v['onnxruntime']}, onnx {v['onnx']}, numpy {v['numpy']}, python {v['python']}; "
        f"CPU: {platform.processor() or platform.machine()}, {cores} logical cores; fp32, batch 1; "
        f"chain at opset {args.chain_opset}; {args.rounds} interleaved rounds, median of `runs` runs per round; "
        f"providers {ort.get_available_providers()}")
    out()
    out("| config | seq | threads | pair | fused is | chain ms | fused ms | speedup chain/fused [95% CI] | "
        "chain opt off ms | ORT optimiser gain on chain [95% CI] | runs | max abs diff |")
    out("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rng_boot = np.random.default_rng(args.seed + 1)
    bad = 0
    graphs = {}
    for cfg_name in args.configs:
        cfg = CONFIGS[cfg_name]
        for S in args.seqs:
            for pname in args.pairs:
                cfgs, builder, what = PAIRS[pname]
                if cfg_name not in cfgs:
                    continue
                chain, fused, feeds = builder(cfg, S, args.chain_opset, np.random.default_rng(args.seed))
                for th in args.threads:
                    if args.show_graphs and (cfg_name, pname, th) not in graphs:
                        graphs[(cfg_name, pname, th)] = (optimized_ops(chain.SerializeToString(), th),
                                                         optimized_ops(fused.SerializeToString(), th))
                    r = measure_pair(chain, fused, feeds, th, args.rounds, args.runs, args.target_ms, rng_boot)
                    bad += not r["agree"]
                    s, lo, hi = r["speedup"]
                    g, glo, ghi = r["ort_opt_gain"]
                    out(f"| {cfg_name} | {S} | {th or 'all'} | {pname} | {what} | {r['chain_ms']:.3f} | {r['fused_ms']:.3f} | "
                        f"**{s:.3f}** [{lo:.3f}, {hi:.3f}] | {r['chain_off_ms']:.3f} | {g:.3f} [{glo:.3f}, {ghi:.3f}] | "
                        f"{r['runs']} | {r['max_abs_diff']:.2e}{'' if r['agree'] else ' MISMATCH'} |")
    if graphs:
        out()
        out("onnxruntime's optimised graphs (ORT_ENABLE_ALL; node types of the model written by optimized_model_filepath):")
        out()
        out("| config | pair | threads | chain after ORT | fused after ORT |")
        out("|---|---|---|---|---|")
        for (c, p, th), (cg, fg) in graphs.items():
            out(f"| {c} | {p} | {th or 'all'} | {cg} | {fg} |")
    if args.log:
        with open(args.log, "a") as f:
            f.write("\n## " + time.strftime("%Y-%m-%d") + ": `" + " ".join(shlex.quote(a) for a in sys.argv) + "`\n\n")
            f.write("\n".join(lines) + "\n")
    return 1 if bad else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--probe", action="store_true", help="numerics probe with the importable onnxruntime/onnx")
    mode.add_argument("--matrix", nargs="+", metavar="SITE", help="probe once per site-packages folder")
    mode.add_argument("--measure", action="store_true", help="interleaved timing (the default)")
    ap.add_argument("--json", action="store_true", help="--probe: one JSON line per case")
    ap.add_argument("--start-after", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--configs", nargs="+", default=["bert", "llama"], choices=sorted(CONFIGS))
    ap.add_argument("--seqs", nargs="+", type=int, default=[128, 512])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 0], help="intra-op threads; 0 = all cores")
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--chain-opset", type=int, default=18, help="opset of the exported chains (torch.onnx dynamo writes 18)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--runs", type=int, default=0, help="runs per session per round; 0 = about --target-ms of work")
    ap.add_argument("--target-ms", type=float, default=30.0)
    ap.add_argument("--no-graphs", dest="show_graphs", action="store_false", help="skip the optimised-graph listing")
    ap.add_argument("--log", help="append the markdown table to this file")
    args = ap.parse_args(argv)
    if args.probe:
        return cmd_probe(args)
    if args.matrix:
        return cmd_matrix(args)
    return cmd_measure(args)


if __name__ == "__main__":
    sys.exit(main())
