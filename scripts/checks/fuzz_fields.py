#!/usr/bin/env python3
"""Field-mutation fuzzer: mutates fields of parsed ONNX models and checks rlflow's contract on each.

    fuzz_fields.py [--seed 0] [--cases 250] [--rlflow BIN] [--json FILE] [--jobs N]
                   [--failures DIR] [--timeout 30] [--info-fraction 0.25] [--max-bytes 1048576]
                   [--memory-limit 2048] [--keep DIR] [--verbose]

Unlike scripts/checks/fuzz (libFuzzer flipping bytes of the file), this parses each corpus model
(tests/data/*.onnx, tests/data/sizes/*.onnx, those over --max-bytes skipped) with the onnx Python
API, applies 1-3 mutations chosen by a seeded RNG and reserialises it. Mutation kinds, by group:

  attr    int/float values (0, negative, huge, NaN, inf), ints-list length and values, a dropped
          attribute, an unknown attribute, a changed attribute type (or only its type tag)
  dims    static dims -> 0, 1, -1, huge, another value; dim_param renamed/removed/added; rank
          changed or shape removed (inputs, outputs, value_info)
  dtype   elem_type of inputs/outputs/value_info, data_type of initializers (raw bytes kept, or
          re-encoded), including types rlflow refuses (float8, int4, string, complex, 0, 999)
  opset   default-domain opset 1/7/12/25/99 and others, IR version 3/99 and others, opset imports
          added/removed, node domains changed
  init    raw_data truncated/extended, dims that mismatch the data, NaN/inf values, the tensor
          moved to external data (valid, bad offset, bad length, '..', absolute, missing, a
          directory, a symlink or a device)
  node    an input renamed to a dangling name or a cycle, a duplicated output name, op_type swapped,
          a node removed (or removed and its consumers rewired), an input emptied, two nodes swapped

Every mutant runs `rlflow optimise MUTANT -o OUT --search none --verify --memory-limit M` (in a
temporary folder, with a timeout); a seeded fraction also runs `rlflow info MUTANT`. A case FAILS if
rlflow exits 5 or with another code it does not document, is killed by a signal or times out; on a
nonzero exit, stderr is not exactly one `rlflow: error: ...` line (spdlog `[warning] ...` lines
allowed), or an output/temporary file is left behind, or the input changed; on exit 0, the output is
missing, fails onnx.checker.check_model(full_check=True), or does not run / gives other results than
the mutant in onnxruntime (same seeded inputs at the declared shapes, symbolic dims bound to small
values that run the unmutated model; rtol=atol=1e-3, NaN-aware, wider for float16).

An exit 0 on a mutant that onnxruntime itself cannot load or run is counted as
"ort-refuses" (accepted where ORT refuses), not as a failure, as long as the output passes the
checker: the output is then no worse than the input. (An output failing the checker is a failure.)

Prints the outcome counts per mutation kind and per exit code, each failure, and
"N cases, F failures"; exits 1 if any failure (2 on usage errors, or when some case could not be
run at all, e.g. the rlflow binary vanished during a rebuild). Each failing mutant is saved to
--failures (default results/fuzz_fields/failures) with description.txt (mutations, command,
exit code, stderr, reason). The same seed gives the same mutants.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

RTOL = ATOL = 1e-3
CHECK_TIMEOUT = 120          # seconds for the onnx/onnxruntime check of one case (a subprocess)
CHECK_MEMORY = 8 << 30       # address-space limit of that subprocess
MAX_FEED_ELEMENTS = 1 << 24  # larger inputs are not fed to onnxruntime (the comparison is skipped)
DOCUMENTED_EXITS = {0, 2, 3, 4}

# --------------------------------------------------------------------------------------------
# Mutations. Each takes (model, rng, ctx) and returns a one-line description, or None when it does
# not apply to this model (another kind is drawn then).
# --------------------------------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# TensorProto.DataType values, plus two that are no type at all.
DTYPES = {
    "FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7, "STRING": 8,
    "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13, "COMPLEX64": 14,
    "COMPLEX128": 15, "BFLOAT16": 16, "FLOAT8E4M3FN": 17, "FLOAT8E4M3FNUZ": 18, "FLOAT8E5M2": 19,
    "FLOAT8E5M2FNUZ": 20, "UINT4": 21, "INT4": 22, "FLOAT4E2M1": 23, "UNDEFINED": 0, "BOGUS999": 999,
}
DTYPE_NAME = {v: k for k, v in DTYPES.items()}


class Ctx:
    """Per-mutant side effects: files written next to (or outside) the mutant's folder."""

    def __init__(self, case_dir: Path, outside_dir: Path, case_id: int):
        self.case_dir = case_dir
        self.outside_dir = outside_dir
        self.case_id = case_id
        self.files: Dict[str, bytes] = {}          # relative to case_dir
        self.outside: Dict[str, bytes] = {}        # relative to outside_dir
        self.symlinks: Dict[str, str] = {}         # name in case_dir -> target
        self.dirs: List[str] = []                  # folders in case_dir
        self.fifos: List[str] = []                 # FIFOs in case_dir
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"


def _nodes(m):
    return list(m.graph.node)


def _attrs(m, types=None):
    out = []
    for ni, n in enumerate(m.graph.node):
        for ai, a in enumerate(n.attribute):
            if types is None or a.type in types:
                out.append((ni, n, ai, a))
    return out


def mut_attr_int(m, rng, ctx):
    from onnx import AttributeProto
    cands = _attrs(m, {AttributeProto.INT})
    if not cands:
        return None
    ni, n, ai, a = rng.choice(cands)
    old = a.i
    new = rng.choice([0, -1, -3, 1, 2, 3, 7, (1 << 31) - 1, 1 << 31, 1 << 62, INT64_MIN, INT64_MAX,
                      old + 1, old - 1, -old])
    new = max(INT64_MIN, min(INT64_MAX, new))
    if new == old:
        return None
    a.i = new
    return f"node {ni} ({n.op_type} '{n.name}') attribute {a.name}: int {old} -> {new}"


def mut_attr_float(m, rng, ctx):
    from onnx import AttributeProto
    cands = _attrs(m, {AttributeProto.FLOAT})
    if not cands:
        return None
    ni, n, ai, a = rng.choice(cands)
    old = a.f
    new = rng.choice([0.0, -1.0, float("nan"), float("inf"), float("-inf"), 3.4e38, -3.4e38, 1e-45,
                      old * 2, -old, 1e6])
    if new == old or (math.isnan(new) and math.isnan(old)):
        return None
    a.f = new
    return f"node {ni} ({n.op_type} '{n.name}') attribute {a.name}: float {old!r} -> {new!r}"


def mut_attr_list(m, rng, ctx):
    from onnx import AttributeProto
    cands = _attrs(m, {AttributeProto.INTS, AttributeProto.FLOATS})
    if not cands:
        return None
    ni, n, ai, a = rng.choice(cands)
    field = a.ints if a.type == AttributeProto.INTS else a.floats
    old = list(field)
    op = rng.choice(["append", "pop", "clear", "double", "element"])
    if op == "append":
        field.append(rng.choice([0, 1, 2, -1]) if a.type == AttributeProto.INTS else rng.choice([0.0, 1.0]))
    elif op == "pop":
        if not old:
            return None
        field.pop()
    elif op == "clear":
        if not old:
            return None
        del field[:]
    elif op == "double":
        field.extend(old)
    else:
        if not old:
            return None
        k = rng.randrange(len(old))
        if a.type == AttributeProto.INTS:
            field[k] = rng.choice([0, -1, -100, 1 << 40, INT64_MIN, INT64_MAX, old[k] + 1])
        else:
            field[k] = rng.choice([float("nan"), float("inf"), 0.0, -1.0])
    return f"node {ni} ({n.op_type} '{n.name}') attribute {a.name} ({op}): {old} -> {list(field)}"


def mut_attr_drop(m, rng, ctx):
    cands = _attrs(m)
    if not cands:
        return None
    ni, n, ai, a = rng.choice(cands)
    name = a.name
    del n.attribute[ai]
    return f"node {ni} ({n.op_type} '{n.name}'): attribute {name} dropped"


def mut_attr_add_unknown(m, rng, ctx):
    from onnx import helper
    if not m.graph.node:
        return None
    ni = rng.randrange(len(m.graph.node))
    n = m.graph.node[ni]
    existing = {a.name for a in n.attribute}
    name = rng.choice(["fuzz_unknown", "axis", "alpha", "perm", "kernel_shape", "to", "epsilon", ""])
    if name in existing:
        name = "fuzz_unknown"
    value = rng.choice([1, -1, 0.5, "text", [1, 2, 3], [0.5, 1.5]])
    n.attribute.append(helper.make_attribute(name, value) if name else _raw_attr(name, value))
    return f"node {ni} ({n.op_type} '{n.name}'): unknown attribute '{name}' = {value!r} added"


def _raw_attr(name, value):
    from onnx import helper
    a = helper.make_attribute("x", value)
    a.name = name
    return a


def mut_attr_type(m, rng, ctx):
    from onnx import AttributeProto, helper, numpy_helper
    import numpy as np
    cands = _attrs(m)
    if not cands:
        return None
    ni, n, ai, a = rng.choice(cands)
    old_type = AttributeProto.AttributeType.Name(a.type)
    if rng.random() < 0.35:
        # Only the type tag: the value stays in its old field.
        new_tag = rng.choice([t for t in (0, 1, 2, 3, 4, 6, 7, 8, 5) if t != a.type])
        a.type = new_tag
        return (f"node {ni} ({n.op_type} '{n.name}') attribute {a.name}: type tag {old_type} -> "
                f"{AttributeProto.AttributeType.Name(new_tag)} (value left in the old field)")
    # A scalar to convert from.
    if a.type == AttributeProto.INT:
        base = a.i
    elif a.type == AttributeProto.FLOAT:
        base = a.f
    elif a.type in (AttributeProto.INTS, AttributeProto.FLOATS):
        lst = list(a.ints) or list(a.floats)
        base = lst[0] if lst else 1
    elif a.type == AttributeProto.STRING:
        base = 1
    else:
        base = 1
    base = 1 if isinstance(base, float) and not math.isfinite(base) else base
    kinds = ["INT", "FLOAT", "STRING", "INTS", "FLOATS", "TENSOR", "STRINGS"]
    kinds = [k for k in kinds if k != old_type]
    new_kind = rng.choice(kinds)
    value = {
        "INT": int(base),
        "FLOAT": float(base),
        "STRING": str(base).encode(),
        "INTS": [int(base), int(base)],
        "FLOATS": [float(base)],
        "TENSOR": numpy_helper.from_array(np.array([base], dtype=np.float32), "attr_tensor"),
        "STRINGS": [b"a", b"b"],
    }[new_kind]
    new = helper.make_attribute(a.name, value)
    n.attribute[ai].CopyFrom(new)
    return f"node {ni} ({n.op_type} '{n.name}') attribute {a.name}: {old_type} -> {new_kind} {value if new_kind != 'TENSOR' else '[tensor]'!s}"


def _value_infos(m, static_only=False, param_only=False):
    """[(where, index, vi, axis, dim)] over inputs, outputs and value_info."""
    out = []
    for where, coll in (("input", m.graph.input), ("output", m.graph.output), ("value_info", m.graph.value_info)):
        for i, vi in enumerate(coll):
            if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                continue
            for ax, d in enumerate(vi.type.tensor_type.shape.dim):
                if static_only and not d.HasField("dim_value"):
                    continue
                if param_only and not d.HasField("dim_param"):
                    continue
                out.append((where, i, vi, ax, d))
    return out


def _pick_vi(m, rng):
    """Prefer inputs and outputs (1/3 value_info when there is any)."""
    io = [("input", i, vi) for i, vi in enumerate(m.graph.input)] + \
         [("output", i, vi) for i, vi in enumerate(m.graph.output)]
    vinfo = [("value_info", i, vi) for i, vi in enumerate(m.graph.value_info)]
    io = [x for x in io if x[2].type.HasField("tensor_type")]
    vinfo = [x for x in vinfo if x[2].type.HasField("tensor_type")]
    if vinfo and (not io or rng.random() < 0.33):
        return rng.choice(vinfo)
    return rng.choice(io) if io else None


def _pick_dim(m, rng, **kw):
    cands = _value_infos(m, **kw)
    if not cands:
        return None
    io = [c for c in cands if c[0] != "value_info"]
    if io and rng.random() < 0.7:
        return rng.choice(io)
    return rng.choice(cands)


def mut_dim_static(m, rng, ctx):
    c = _pick_dim(m, rng, static_only=True)
    if not c:
        return None
    where, i, vi, ax, d = c
    old = d.dim_value
    new = rng.choice([0, 1, -1, 1 << 40, 1 << 62, rng.randint(2, 64)])
    if new == old:
        return None
    d.dim_value = new
    return f"{where} '{vi.name}' dim {ax}: {old} -> {new}"


def mut_dim_param(m, rng, ctx):
    op = rng.choice(["rename", "remove", "add", "add", "rename"])
    if op == "add":
        c = _pick_dim(m, rng, static_only=True)
        if not c:
            return None
        where, i, vi, ax, d = c
        old = d.dim_value
        d.dim_param = rng.choice(["fz_new", "batch", "N", "batch_size"])
        return f"{where} '{vi.name}' dim {ax}: static {old} -> dim_param '{d.dim_param}'"
    c = _pick_dim(m, rng, param_only=True)
    if not c:
        return None
    where, i, vi, ax, d = c
    old = d.dim_param
    if op == "remove":
        d.Clear()
        return f"{where} '{vi.name}' dim {ax}: dim_param '{old}' removed (unknown dim)"
    syms = sorted({x[4].dim_param for x in _value_infos(m, param_only=True)} - {old})
    new = rng.choice(["fz_sym", "", "a b", "N*2", "1+", "sequence_length + 1", "\x01ctl"] + syms[:3])
    if new == old:
        return None
    d.dim_param = new
    return f"{where} '{vi.name}' dim {ax}: dim_param '{old}' -> {new!r}"


def mut_shape_rank(m, rng, ctx):
    c = _pick_vi(m, rng)
    if not c:
        return None
    where, i, vi = c
    tt = vi.type.tensor_type
    op = rng.choice(["add", "remove", "clear"])
    if op == "clear":
        if not tt.HasField("shape"):
            return None
        tt.ClearField("shape")
        return f"{where} '{vi.name}': shape removed (unranked)"
    dims = tt.shape.dim
    if op == "remove":
        if not dims:
            return None
        ax = rng.randrange(len(dims))
        del dims[ax]
        return f"{where} '{vi.name}': dim {ax} removed (rank {len(dims) + 1} -> {len(dims)})"
    ax = rng.randint(0, len(dims))
    new = tt.shape.dim.add()
    new.dim_value = rng.choice([1, 2, 3])
    # Move it to position ax.
    vals = [(x.dim_value if x.HasField("dim_value") else None, x.dim_param if x.HasField("dim_param") else None)
            for x in dims]
    moved = vals.pop()
    vals.insert(ax, moved)
    for x, (v, p) in zip(dims, vals):
        x.Clear()
        if v is not None:
            x.dim_value = v
        elif p is not None:
            x.dim_param = p
    return f"{where} '{vi.name}': dim of {moved[0]} inserted at {ax} (rank {len(dims) - 1} -> {len(dims)})"


def mut_dtype_io(m, rng, ctx):
    c = _pick_vi(m, rng)
    if not c:
        return None
    where, i, vi = c
    old = vi.type.tensor_type.elem_type
    new = rng.choice([v for v in DTYPES.values() if v != old])
    vi.type.tensor_type.elem_type = new
    return f"{where} '{vi.name}' elem_type {DTYPE_NAME.get(old, old)} -> {DTYPE_NAME.get(new, new)}"


def mut_dtype_init(m, rng, ctx):
    from onnx import numpy_helper
    import numpy as np
    if not m.graph.initializer:
        return None
    k = rng.randrange(len(m.graph.initializer))
    t = m.graph.initializer[k]
    old = t.data_type
    if rng.random() < 0.4 and old in (1, 10, 11, 7, 6):
        # Re-encode consistently: well-formed tensor, but a type the graph does not expect.
        new_np = rng.choice([np.float64, np.float16, np.int64, np.int32, np.int8, np.bool_, np.float32])
        try:
            arr = numpy_helper.to_array(t)
        except Exception:
            return None
        new_t = numpy_helper.from_array(arr.astype(new_np), t.name)
        if new_t.data_type == old:
            return None
        t.CopyFrom(new_t)
        return f"initializer '{t.name}' re-encoded {DTYPE_NAME.get(old)} -> {DTYPE_NAME.get(t.data_type)}"
    new = rng.choice([v for v in DTYPES.values() if v != old])
    t.data_type = new
    return f"initializer '{t.name}' data_type {DTYPE_NAME.get(old, old)} -> {DTYPE_NAME.get(new, new)} (bytes kept)"


def _default_opset(m):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o
    return None


def mut_opset_version(m, rng, ctx):
    o = _default_opset(m)
    if o is None:
        return None
    old = o.version
    new = rng.choice([1, 7, 12, 25, 99, 0, -1, 1 << 40, 17, 18, 21, 23, 24, old + 1, old - 1])
    if new == old:
        return None
    o.version = new
    return f"default-domain opset {old} -> {new}"


def mut_ir_version(m, rng, ctx):
    old = m.ir_version
    new = rng.choice([3, 99, 0, -1, 4, 8, 11, 12, 13])
    if new == old:
        return None
    m.ir_version = new
    return f"ir_version {old} -> {new}"


def mut_opset_imports(m, rng, ctx):
    op = rng.choice(["add", "add", "remove-default", "remove-all", "duplicate-default"])
    if op == "add":
        dom, ver = rng.choice([("com.microsoft", 1), ("ai.onnx.ml", 3), ("com.fuzz", 1), ("ai.onnx", 13),
                               ("ai.onnx.preview.training", 1), ("", 99)])
        if dom == "" and _default_opset(m) is not None:
            return None
        o = m.opset_import.add()
        o.domain, o.version = dom, ver
        return f"opset import ('{dom}', {ver}) added"
    if op == "duplicate-default":
        d = _default_opset(m)
        if d is None:
            return None
        o = m.opset_import.add()
        o.domain, o.version = d.domain, rng.choice([d.version, d.version - 1, 7])
        return f"default-domain opset import duplicated with version {o.version} (was {d.version})"
    if op == "remove-default":
        for k, o in enumerate(m.opset_import):
            if o.domain in ("", "ai.onnx"):
                del m.opset_import[k]
                return "default-domain opset import removed"
        return None
    if not m.opset_import:
        return None
    del m.opset_import[:]
    return "every opset import removed"


def mut_node_domain(m, rng, ctx):
    if not m.graph.node:
        return None
    ni = rng.randrange(len(m.graph.node))
    n = m.graph.node[ni]
    old = n.domain
    new = rng.choice(["com.fuzz", "ai.onnx", "com.microsoft", "ai.onnx.ml", " ", "onnx"])
    if new == old:
        return None
    n.domain = new
    extra = ""
    if new not in ("ai.onnx",) and rng.random() < 0.5:
        o = m.opset_import.add()
        o.domain, o.version = new, 1
        extra = f" (opset import ('{new}', 1) added)"
    return f"node {ni} ({n.op_type} '{n.name}') domain '{old}' -> '{new}'{extra}"


def _pick_init(m, rng, pred=None):
    cands = [(k, t) for k, t in enumerate(m.graph.initializer) if pred is None or pred(t)]
    return rng.choice(cands) if cands else None


def mut_init_truncate(m, rng, ctx):
    c = _pick_init(m, rng, lambda t: len(t.raw_data) > 0)
    if not c:
        return None
    k, t = c
    raw = t.raw_data
    op = rng.choice(["half", "minus1", "empty", "plus1", "plus-element"])
    t.raw_data = {"half": raw[: len(raw) // 2], "minus1": raw[:-1], "empty": b"", "plus1": raw + b"\0",
                  "plus-element": raw + raw[:8]}[op]
    return f"initializer '{t.name}' raw_data {op}: {len(raw)} -> {len(t.raw_data)} bytes"


def mut_init_dims(m, rng, ctx):
    c = _pick_init(m, rng)
    if not c:
        return None
    k, t = c
    old = list(t.dims)
    op = rng.choice(["grow", "zero", "negative", "unsqueeze", "scalar", "reverse", "huge", "split"])
    if op == "grow" and old:
        i = rng.randrange(len(old))
        t.dims[i] += 1
    elif op == "zero" and old:
        t.dims[rng.randrange(len(old))] = 0
    elif op == "negative" and old:
        t.dims[rng.randrange(len(old))] = -1
    elif op == "unsqueeze":
        t.dims.insert(rng.randint(0, len(old)), 1)
    elif op == "scalar" and old:
        del t.dims[:]
    elif op == "reverse" and len(old) >= 2 and old != old[::-1]:
        t.dims[:] = old[::-1]
    elif op == "huge" and old:
        t.dims[rng.randrange(len(old))] = 1 << 40
    elif op == "split" and old and old[-1] % 2 == 0 and old[-1] > 1:
        t.dims[-1] = old[-1] // 2
        t.dims.append(2)  # same element count, different rank
    else:
        return None
    return f"initializer '{t.name}' dims {op}: {old} -> {list(t.dims)}"


def mut_init_nan(m, rng, ctx):
    from onnx import numpy_helper
    c = _pick_init(m, rng, lambda t: t.data_type in (1, 10, 11))
    if not c:
        return None
    k, t = c
    try:
        arr = numpy_helper.to_array(t).copy()
    except Exception:
        return None
    if arr.size == 0:
        return None
    val = rng.choice([float("nan"), float("inf"), float("-inf")])
    if rng.random() < 0.25:
        arr[...] = val
        where = "every element"
    else:
        flat = arr.reshape(-1)
        idx = sorted({rng.randrange(flat.size) for _ in range(rng.randint(1, 3))})
        flat[idx] = val
        where = f"elements {idx}"
    t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return f"initializer '{t.name}' {where} -> {val}"


EXTERNAL_VARIANTS = ["valid", "valid-offset", "valid-unaligned", "bad-offset", "negative-offset",
                     "huge-offset", "length-plus1", "length-minus1", "length-zero", "huge-length",
                     "dotdot-outside", "dotdot-inside", "absolute-outside", "absolute-inside",
                     "missing", "directory", "symlink-outside", "empty-location", "device", "fifo",
                     "raw-kept", "unknown-key"]


def mut_init_external(m, rng, ctx):
    from onnx import TensorProto, numpy_helper
    c = _pick_init(m, rng, lambda t: t.data_location != TensorProto.EXTERNAL and t.data_type != 8)
    if not c:
        return None
    k, t = c
    if not t.raw_data:
        try:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t), t.name))
        except Exception:
            return None
    data = bytes(t.raw_data)
    # A third are valid, so that the accepted path (weights read, written next to the output) is run too.
    variant = rng.choice(EXTERNAL_VARIANTS[:3] if rng.random() < 0.3 else EXTERNAL_VARIANTS[3:])
    fname = ctx.fresh("weights") + ".bin"
    offset, length = 0, len(data)
    location = fname
    blob = data
    if variant == "valid-offset":
        offset, blob = 4096, b"\0" * 4096 + data
    elif variant == "valid-unaligned":
        offset, blob = 3, b"\0" * 3 + data
    elif variant == "bad-offset":
        offset = len(data) + 100
    elif variant == "negative-offset":
        offset = -8
    elif variant == "huge-offset":
        offset = 1 << 62
    elif variant == "length-plus1":
        length = len(data) + 1
    elif variant == "length-minus1":
        length = max(0, len(data) - 1)
    elif variant == "length-zero":
        length = 0
    elif variant == "huge-length":
        length = 1 << 62
    keep_raw = variant == "raw-kept"
    if variant in ("dotdot-outside", "absolute-outside", "symlink-outside"):
        oname = f"case{ctx.case_id}_{fname}"
        ctx.outside[oname] = blob
        if variant == "dotdot-outside":
            location = f"../{ctx.outside_dir.name}/{oname}"
        elif variant == "absolute-outside":
            location = str(ctx.outside_dir / oname)
        else:
            ctx.symlinks[fname] = str(ctx.outside_dir / oname)
    else:
        if variant == "dotdot-inside":
            ctx.dirs.append("sub")
            location = f"sub/../{fname}"
        elif variant == "absolute-inside":
            location = str(ctx.case_dir / fname)
        elif variant == "missing":
            location = "missing.bin"
            blob = None
        elif variant == "directory":
            ctx.dirs.append("adir")
            location, blob = "adir", None
        elif variant == "empty-location":
            location = ""
        elif variant == "device":
            location, blob = "/dev/zero", None
        elif variant == "fifo":
            ctx.fifos.append(fname)
            blob = None
        if blob is not None:
            ctx.files[fname] = blob
    entries = [("location", location), ("offset", str(offset)), ("length", str(length))]
    if variant == "unknown-key":
        entries.append(("fuzz_key", "1"))
    if variant in ("valid",) and rng.random() < 0.5:
        entries = entries[:1]  # location only: the whole file
    del t.external_data[:]
    for key, value in entries:
        e = t.external_data.add()
        e.key, e.value = key, value
    t.data_location = TensorProto.EXTERNAL
    if not keep_raw:
        t.ClearField("raw_data")
    desc = ", ".join(f"{k_}={v!r}" for k_, v in entries)
    return f"initializer '{t.name}' ({len(data)} bytes) moved to external data [{variant}]: {desc}"


def _producers(m):
    return {o: i for i, n in enumerate(m.graph.node) for o in n.output if o}


def mut_node_dangling(m, rng, ctx):
    cands = [(ni, n, j) for ni, n in enumerate(m.graph.node) for j, x in enumerate(n.input) if x]
    if not cands:
        return None
    ni, n, j = rng.choice(cands)
    old = n.input[j]
    op = rng.choice(["dangling", "dangling", "self", "downstream"])
    if op == "self" and n.output:
        n.input[j] = n.output[0]
    elif op == "downstream":
        later = [o for nn in m.graph.node[ni + 1:] for o in nn.output if o]
        if not later:
            return None
        n.input[j] = rng.choice(later)
    else:
        op = "dangling"
        n.input[j] = "fz_dangling"
    return f"node {ni} ({n.op_type} '{n.name}') input {j}: '{old}' -> '{n.input[j]}' ({op})"


def mut_node_dup_output(m, rng, ctx):
    nodes = [(ni, n) for ni, n in enumerate(m.graph.node) if n.output]
    if len(nodes) < 1:
        return None
    ni, n = rng.choice(nodes)
    old = n.output[0]
    names = [o for i, nn in enumerate(m.graph.node) if i != ni for o in nn.output if o]
    names += [i.name for i in m.graph.input] + [t.name for t in m.graph.initializer]
    names = [x for x in names if x != old]
    if not names:
        return None
    new = rng.choice(names)
    n.output[0] = new
    return f"node {ni} ({n.op_type} '{n.name}') output 0: '{old}' -> '{new}' (a name already defined)"


SWAP_OPS = ["Relu", "Add", "MatMul", "Conv", "Softmax", "Identity", "Transpose", "Sigmoid", "Reshape",
            "Concat", "Gemm", "LayerNormalization", "FuzzOp", "", "relu", "If", "Loop", "Scan", "Cast",
            "Attention", "Einsum"]


def mut_node_swap_op(m, rng, ctx):
    if not m.graph.node:
        return None
    ni = rng.randrange(len(m.graph.node))
    n = m.graph.node[ni]
    old = n.op_type
    pool = sorted({x.op_type for x in m.graph.node}) + SWAP_OPS
    new = rng.choice([p for p in pool if p != old])
    n.op_type = new
    return f"node {ni} ('{n.name}') op_type {old} -> {new!r}"


def mut_node_remove(m, rng, ctx):
    if not m.graph.node:
        return None
    ni = rng.randrange(len(m.graph.node))
    n = m.graph.node[ni]
    desc = f"node {ni} ({n.op_type} '{n.name}') removed"
    if rng.random() < 0.5 and n.input and n.input[0] and n.output:
        # Rewire: consumers of its first output read its first input instead.
        src, dst = n.input[0], n.output[0]
        del m.graph.node[ni]
        for nn in m.graph.node:
            for j, x in enumerate(nn.input):
                if x == dst:
                    nn.input[j] = src
        for o in m.graph.output:
            if o.name == dst:
                o.name = src
        return desc + f", consumers of '{dst}' rewired to '{src}'"
    del m.graph.node[ni]
    return desc


def mut_node_empty_input(m, rng, ctx):
    cands = [(ni, n, j) for ni, n in enumerate(m.graph.node) for j, x in enumerate(n.input) if x]
    if not cands:
        return None
    ni, n, j = rng.choice(cands)
    old = n.input[j]
    if rng.random() < 0.5 and j == len(n.input) - 1:
        del n.input[j]
        return f"node {ni} ({n.op_type} '{n.name}') last input '{old}' removed ({len(n.input)} inputs left)"
    n.input[j] = ""
    return f"node {ni} ({n.op_type} '{n.name}') input {j} '{old}' -> '' (omitted optional)"


def mut_node_order(m, rng, ctx):
    if len(m.graph.node) < 2:
        return None
    a, b = sorted(rng.sample(range(len(m.graph.node)), 2))
    na, nb = type(m.graph.node[a])(), type(m.graph.node[b])()
    na.CopyFrom(m.graph.node[a])
    nb.CopyFrom(m.graph.node[b])
    m.graph.node[a].CopyFrom(nb)
    m.graph.node[b].CopyFrom(na)
    return f"nodes {a} ({na.op_type}) and {b} ({nb.op_type}) swapped (topological order broken)"


MUTATIONS: Dict[str, Tuple[str, Callable]] = {
    "attr-int": ("attr", mut_attr_int),
    "attr-float": ("attr", mut_attr_float),
    "attr-list": ("attr", mut_attr_list),
    "attr-drop": ("attr", mut_attr_drop),
    "attr-unknown": ("attr", mut_attr_add_unknown),
    "attr-type": ("attr", mut_attr_type),
    "dim-static": ("dims", mut_dim_static),
    "dim-param": ("dims", mut_dim_param),
    "shape-rank": ("dims", mut_shape_rank),
    "dtype-io": ("dtype", mut_dtype_io),
    "dtype-init": ("dtype", mut_dtype_init),
    "opset-version": ("opset", mut_opset_version),
    "ir-version": ("opset", mut_ir_version),
    "opset-imports": ("opset", mut_opset_imports),
    "node-domain": ("opset", mut_node_domain),
    "init-truncate": ("init", mut_init_truncate),
    "init-dims": ("init", mut_init_dims),
    "init-nan": ("init", mut_init_nan),
    "init-external": ("init", mut_init_external),
    "node-dangling": ("node", mut_node_dangling),
    "node-dup-output": ("node", mut_node_dup_output),
    "node-swap-op": ("node", mut_node_swap_op),
    "node-remove": ("node", mut_node_remove),
    "node-empty-input": ("node", mut_node_empty_input),
    "node-order": ("node", mut_node_order),
}
GROUPS = ["attr", "dims", "dtype", "opset", "init", "node"]


# --------------------------------------------------------------------------------------------
# Corpus and the sizes symbolic dims are bound to.
# --------------------------------------------------------------------------------------------

def corpus(max_bytes: int) -> List[Path]:
    paths = sorted((ROOT / "tests/data").glob("*.onnx")) + sorted((ROOT / "tests/data/sizes").glob("*.onnx"))
    return [p for p in paths if p.stat().st_size <= max_bytes]


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_EXPR = re.compile(r"^[A-Za-z0-9_.\s+\-*/()%]+$")


def _role(name: str) -> str:
    n = name.lower()
    return "past" if ("past" in n or "cache" in n) else "batch" if "batch" in n else "other"


def candidate_bindings(syms: List[str]) -> List[Tuple[Dict[str, int], int]]:
    """(binding, default for names not in it), small first."""
    out = []
    for batch, past, other in ((2, 3, 5), (1, 2, 7), (1, 0, 1), (1, 4, 128), (1, 4, 800)):
        b = {s: batch if _role(s) == "batch" else past if _role(s) == "past" else other for s in syms}
        out.append((b, other))
    return out


def dim_size(d, binding: Dict[str, int], default: int) -> int:
    if d.HasField("dim_value") and d.dim_value > 0:
        return int(d.dim_value)
    p = d.dim_param if d.HasField("dim_param") else ""
    if p in binding:
        return binding[p]
    if p and _EXPR.match(p):
        env = {n: binding.get(n, default) for n in _NAME.findall(p)}
        try:
            v = eval(p.replace("//", "/").replace("/", "//"), {"__builtins__": {}}, env)
            return max(1, int(v))
        except Exception:
            return default
    return default


def graph_inputs(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def make_feeds(model, binding: Dict[str, int], default: int, seed: int):
    """Floats N(0,1); masks ones; ids in [0, vocab); other ints [0, 4); bools random."""
    import numpy as np
    from onnx import helper
    import size_bindings

    rng = np.random.default_rng(seed)
    try:
        vocab = size_bindings.vocab_size(model) or 4
    except Exception:
        vocab = 4
    feeds = {}
    for vi in graph_inputs(model):
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input '{vi.name}' is not a tensor")
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = [dim_size(d, binding, default) for d in vi.type.tensor_type.shape.dim]
        n = 1
        for s in shape:
            n *= s
        if n > MAX_FEED_ELEMENTS:
            raise OverflowError(f"input '{vi.name}' of shape {shape} is too large to feed")
        name = vi.name.lower()
        if "mask" in name or "keep" in name:
            arr = np.ones(shape, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, vocab if "ids" in name else 4, size=shape).astype(dtype)
        elif dtype == np.bool_:
            arr = rng.random(shape) < 0.5
        else:
            arr = rng.standard_normal(shape).astype(dtype)
        feeds[vi.name] = arr
    return feeds


def symbols(model) -> List[str]:
    out: List[str] = []
    for vi in graph_inputs(model):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            p = d.dim_param
            names = _NAME.findall(p) if p and _EXPR.match(p) else [p] if p else []
            for n in names:
                if n not in out:
                    out.append(n)
    return out


def quiet_ort():
    """onnxruntime logs a failed kernel as an error on stderr; the exception says the same."""
    import onnxruntime
    onnxruntime.set_default_logger_severity(4)


def session(path: str):
    """check_ort.session (CPU, one thread, no graph rewrites), logging only fatal errors."""
    from check_ort import session as oracle_session
    return oracle_session(path, log_severity=4)


def find_binding(path: Path, model) -> Tuple[Dict[str, int], int, Optional[str]]:
    """The first candidate binding at which onnxruntime runs the unmutated model."""
    quiet_ort()
    err = None
    for binding, default in candidate_bindings(symbols(model)):
        try:
            s = session(str(path))
            s.run(None, make_feeds(model, binding, default, 0))
            return binding, default, None
        except Exception as e:
            err = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return candidate_bindings(symbols(model))[0] + (err,)


# --------------------------------------------------------------------------------------------
# The onnx/onnxruntime check of one accepted case, run in a subprocess (--_check).
# --------------------------------------------------------------------------------------------

def _line(e: BaseException) -> str:
    t = str(e).strip() or type(e).__name__
    return t.splitlines()[0][:300]


def check_case(spec: dict) -> dict:
    import numpy as np
    import onnx
    from check_ort import _exceeds, _max_abs_diff, output_tolerance

    quiet_ort()
    r = {"mutant_checker": None, "out_checker": None, "mutant_ort": None, "out_ort": None,
         "feeds": None, "compare": None, "max_abs_diff": None, "outputs": []}
    mutant, out = spec["mutant"], spec["out"]
    for key, p in (("mutant_checker", mutant), ("out_checker", out)):
        try:
            onnx.checker.check_model(p, full_check=True)
            r[key] = "ok"
        except Exception as e:
            r[key] = _line(e)
    # The base model's binding first; then every symbolic dim 1, for a mutant that made a static dim
    # symbolic (a model with a baked-in batch of 1 runs at 1 only).
    attempts = [(spec["binding"], spec["default"]), ({}, 1)]
    feeds, ref, first_err = None, None, None
    try:
        model = onnx.load(mutant, load_external_data=False)
    except Exception as e:
        r["mutant_ort"] = "onnx.load: " + _line(e)
        return r
    try:
        s = session(mutant)
    except Exception as e:
        r["mutant_ort"] = _line(e)
        attempts = attempts[:1]
        s = None
    for binding, default in attempts:
        try:
            f = make_feeds(model, binding, default, spec["seed"])
        except OverflowError as e:
            r["feeds"] = "too-large: " + _line(e)
            return r
        except Exception as e:
            r["feeds"] = _line(e)
            r["mutant_ort"] = r["mutant_ort"] or "feeds: " + _line(e)
            return r
        feeds = feeds or f
        if s is None:
            break
        try:
            ref = s.run(None, f)
        except Exception as e:
            first_err = first_err or _line(e)
            continue
        feeds = f
        ref_names = [o.name for o in s.get_outputs()]
        r["mutant_ort"] = "ok"
        r["binding"] = {"binding": binding, "default": default}
        break
    if ref is None and r["mutant_ort"] is None:
        r["mutant_ort"] = first_err
    try:
        s2 = session(out)
        out_in = [i.name for i in s2.get_inputs()]
        if set(out_in) == set(feeds):
            f2 = feeds
        elif len(out_in) == len(feeds):
            f2 = {n: feeds[o] for n, o in zip(out_in, feeds)}
        else:
            raise ValueError(f"input mismatch: mutant {list(feeds)}, output {out_in}")
        got = s2.run(None, f2)
        got_names = [o.name for o in s2.get_outputs()]
        r["out_ort"] = "ok"
    except Exception as e:
        r["out_ort"] = _line(e)
        return r
    if ref is None:
        return r
    if len(ref) != len(got):
        r["compare"] = f"output count differs: mutant {len(ref)}, output {len(got)}"
        return r
    by_name = sorted(ref_names) == sorted(got_names)
    got_by = dict(zip(got_names, got))
    bad, worst = [], 0.0
    for i, (name, a) in enumerate(zip(ref_names, ref)):
        b = got_by[name] if by_name else got[i]
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            bad.append(f"{name}: shape {list(b.shape)} != {list(a.shape)}")
            continue
        if a.dtype != b.dtype:
            bad.append(f"{name}: dtype {b.dtype} != {a.dtype}")
            continue
        if a.dtype.kind in "OSU":
            if not np.array_equal(a, b):
                bad.append(f"{name}: values differ")
            continue
        d = _max_abs_diff(a, b)
        worst = max(worst, d)
        at, rt = output_tolerance(a, ATOL, RTOL)
        if _exceeds(a, b, at, rt):
            bad.append(f"{name}: max_abs_diff={d:.3g} (atol {at:.2g}, rtol {rt:.2g})")
    r["max_abs_diff"] = worst if math.isfinite(worst) else None
    r["compare"] = "ok" if not bad else "; ".join(bad)[:600]
    return r


def _check_main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        r = check_case(spec)
    except Exception as e:  # never leave the parent without an answer
        r = {"crash": _line(e)}
    print(json.dumps(r))
    return 0


# --------------------------------------------------------------------------------------------
# Running one case.
# --------------------------------------------------------------------------------------------

class HarnessError(Exception):
    """The case could not be run (not a finding about rlflow)."""


def run_proc(cmd: List[str], cwd: Path, timeout: float, limit_as: Optional[int] = None) -> dict:
    def pre():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True, preexec_fn=pre if limit_as else None)
    except OSError as e:  # the binary vanished or is being rebuilt: the case cannot be judged
        raise HarnessError(f"cannot start {cmd[0]}: {e}") from None
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the session this Popen started, nothing else
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    return {"rc": p.returncode, "timed_out": timed_out, "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"), "seconds": round(time.monotonic() - t0, 2)}


WARNING_LINE = re.compile(r"^\[(warning|info)\] ")


def stderr_problem(stderr: str, rc: int) -> Optional[str]:
    """None when stderr keeps the contract for this exit code, else what is wrong."""
    lines = stderr.splitlines()
    errors = [l for l in lines if l.startswith("rlflow: error: ")]
    other = [l for l in lines if not l.startswith("rlflow: error: ") and not WARNING_LINE.match(l)]
    if rc == 0:
        if errors:
            return f"exit 0 with an error line: {errors[0][:200]!r}"
        return None
    if len(errors) != 1 or other:
        return (f"stderr has {len(errors)} 'rlflow: error:' line(s) and {len(other)} other line(s)"
                + (f"; first other: {other[0][:200]!r}" if other else ""))
    return None


def stderr_notes(stderr: str, rc: int, files: List[str]) -> List[str]:
    lines = stderr.splitlines()
    notes = []
    errors = [l for l in lines if l.startswith("rlflow: error: ")]
    if rc != 0 and len(errors) == 1 and not any(f in errors[0] for f in files):
        notes.append(f"the error line names no file (README: 'naming the file and the problem'): {errors[0][:200]!r}")
    if rc == 0:
        other = [l for l in lines if not WARNING_LINE.match(l)]
        if other:
            notes.append(f"stray stderr on exit 0: {other[0][:160]!r}")
    return notes


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Runner:
    def __init__(self, args, tmp: Path, bases: List[dict]):
        self.args = args
        self.tmp = tmp
        self.bases = bases
        self.outside = tmp / "outside"
        self.outside.mkdir(exist_ok=True)
        self.lock = threading.Lock()
        self.done = 0

    # -- generation (deterministic: depends on the seed and the case number only) --
    def generate(self, case: int) -> dict:
        import onnx
        rng = random.Random(f"fuzz_fields:{self.args.seed}:{case}")
        do_info = rng.random() < self.args.info_fraction
        base = rng.choice(self.bases)
        m = onnx.ModelProto()
        m.CopyFrom(base["model"])
        case_dir = self.tmp / f"case_{case:04d}"
        case_dir.mkdir()
        ctx = Ctx(case_dir, self.outside, case)
        n_mut = rng.randint(1, 3)
        muts = []
        last_good = onnx.ModelProto()
        for _ in range(n_mut):
            last_good.CopyFrom(m)
            for _attempt in range(20):
                kind = rng.choice(sorted(MUTATIONS))
                group, fn = MUTATIONS[kind]
                try:
                    desc = fn(m, rng, ctx)
                except Exception as e:  # a mutation that the onnx API refuses is not applied
                    desc = None
                    m.CopyFrom(last_good)
                    if self.args.verbose:
                        print(f"case {case}: {kind} raised {e!r}", file=sys.stderr)
                if desc:
                    muts.append({"kind": kind, "group": group, "desc": desc})
                    break
        mutant = case_dir / "model.onnx"
        mutant.write_bytes(m.SerializeToString())
        for rel, blob in ctx.files.items():
            (case_dir / rel).write_bytes(blob)
        for rel, blob in ctx.outside.items():
            (self.outside / rel).write_bytes(blob)
        for d in ctx.dirs:
            (case_dir / d).mkdir(exist_ok=True)
        for name, target in ctx.symlinks.items():
            os.symlink(target, case_dir / name)
        for name in ctx.fifos:
            os.mkfifo(case_dir / name)
        return {"case": case, "base": base["name"], "base_path": base["rel"], "dir": case_dir,
                "mutant": mutant, "mutations": muts, "info": do_info, "binding": base["binding"],
                "default": base["default"], "outside": sorted(ctx.outside)}

    # -- execution --
    def run_case(self, c: dict) -> dict:
        try:
            return self._run_case(c)
        except HarnessError as e:
            with self.lock:
                self.done += 1
                print(f"[{self.done}/{self.args.cases}] case {c['case']}: HARNESS ERROR {e}", flush=True)
            return {"case": c["case"], "base": c["base"], "base_path": c["base_path"], "mutations": c["mutations"],
                    "cmd": [], "rc": None, "timed_out": False, "stderr": "", "seconds": 0,
                    "failures": [f"harness: {e}"], "notes": [], "outcome": "harness-error"}

    def _run_case(self, c: dict) -> dict:
        a = self.args
        case_dir: Path = c["dir"]
        out_dir = case_dir / "out"
        out_dir.mkdir()
        out = out_dir / "out.onnx"
        before = sha(c["mutant"])
        cmd = [a.rlflow, "optimise", "model.onnx", "-o", "out/out.onnx", "--search", "none", "--verify",
               "--memory-limit", str(a.memory_limit)]
        r = run_proc(cmd, case_dir, a.timeout)
        res = {"case": c["case"], "base": c["base"], "base_path": c["base_path"], "mutations": c["mutations"],
               "cmd": cmd, "rc": r["rc"], "timed_out": r["timed_out"], "stderr": r["stderr"],
               "seconds": r["seconds"], "failures": [], "notes": [], "outcome": None}
        fails, notes = res["failures"], res["notes"]
        rc = r["rc"]
        if r["timed_out"]:
            fails.append(f"optimise timed out after {a.timeout} s")
        elif rc < 0:
            fails.append(f"optimise killed by signal {signal.Signals(-rc).name}")
        elif rc == 5:
            fails.append("optimise exit 5 (internal error)")
        elif rc not in DOCUMENTED_EXITS:
            fails.append(f"optimise exit {rc} (not a documented exit code)")
        if not r["timed_out"] and rc >= 0:
            p = stderr_problem(r["stderr"], rc)
            if p:
                fails.append("optimise stderr: " + p)
            notes += stderr_notes(r["stderr"], rc, ["model.onnx", "/dev/", "missing.bin", "adir"] + sorted(
                p.name for p in case_dir.iterdir() if p.name not in ("out", "model.onnx")))
        if sha(c["mutant"]) != before:
            fails.append("the input model was modified")
        if rc != 0:
            left = sorted(x.name for x in out_dir.iterdir())
            if left:
                fails.append(f"files left in the output folder after exit {rc}: {left}")
        if rc == 4:
            last = (r["stderr"].strip().splitlines() or [""])[-1]
            notes.append(f"exit 4 on a --search none round trip: {last[:220]}")

        if rc == 0 and not r["timed_out"]:
            if not out.is_file():
                fails.append("exit 0 but no output file")
            else:
                self.check_output(c, res, out)
        if rc == 0 and not fails and res["outcome"] is None:
            res["outcome"] = "ok"
        if c["info"]:
            ri = run_proc([a.rlflow, "info", "model.onnx"], case_dir, a.timeout)
            res["info"] = {"rc": ri["rc"], "timed_out": ri["timed_out"], "stderr": ri["stderr"][-2000:]}
            if ri["timed_out"]:
                fails.append(f"info timed out after {a.timeout} s")
            elif ri["rc"] < 0:
                fails.append(f"info killed by signal {signal.Signals(-ri['rc']).name}")
            elif ri["rc"] == 5:
                fails.append("info exit 5 (internal error)")
            elif ri["rc"] not in (0, 2, 3):
                fails.append(f"info exit {ri['rc']} (not a documented exit code for info)")
            if not ri["timed_out"] and ri["rc"] >= 0:
                p = stderr_problem(ri["stderr"], ri["rc"])
                if p:
                    fails.append("info stderr: " + p)
        if fails:
            res["outcome"] = "FAIL"
        elif res["outcome"] is None:
            res["outcome"] = f"exit{rc}"
        if fails:
            self.save_failure(c, res, out if out.is_file() else None)
        with self.lock:
            self.done += 1
            if self.args.verbose or fails:
                tag = "FAIL" if fails else res["outcome"]
                print(f"[{self.done}/{self.args.cases}] case {c['case']} {c['base']} rc={rc} {tag}: "
                      + " | ".join(m_["desc"] for m_ in c["mutations"])[:300]
                      + (f"\n    -> {'; '.join(fails)[:400]}" if fails else ""), flush=True)
            elif self.done % 25 == 0:
                print(f"[{self.done}/{self.args.cases}] ...", flush=True)
        if not self.args.keep:
            shutil.rmtree(case_dir, ignore_errors=True)
        return res

    def check_output(self, c: dict, res: dict, out: Path):
        spec = {"mutant": str(c["mutant"]), "out": str(out), "binding": c["binding"], "default": c["default"],
                "seed": self.args.seed}
        spec_path = c["dir"] / "check.json"
        spec_path.write_text(json.dumps(spec))
        cr = run_proc([sys.executable, str(Path(__file__).resolve()), "--_check", str(spec_path)], c["dir"],
                      CHECK_TIMEOUT, CHECK_MEMORY)
        spec_path.unlink()
        res["check"] = None
        try:
            chk = json.loads(cr["stdout"].strip().splitlines()[-1])
        except Exception:
            why = "timed out" if cr["timed_out"] else f"exit {cr['rc']}: {cr['stderr'].strip()[-200:]}"
            res["notes"].append(f"onnx/onnxruntime check did not finish ({why})")
            res["outcome"] = "unchecked"
            return
        res["check"] = chk
        fails, notes = res["failures"], res["notes"]
        if "crash" in chk:
            notes.append("check raised: " + chk["crash"])
            res["outcome"] = "unchecked"
            return
        if chk["out_checker"] != "ok":
            fails.append("output fails onnx.checker (full_check): " + chk["out_checker"]
                         + ("" if chk["mutant_checker"] == "ok" else " [the mutant fails it too: " + chk["mutant_checker"][:200] + "]"))
        elif chk["mutant_checker"] != "ok":
            notes.append("accepted a mutant that fails onnx.checker: " + chk["mutant_checker"][:200])
        if chk.get("feeds", None) and str(chk["feeds"]).startswith("too-large"):
            notes.append("not compared in onnxruntime: " + chk["feeds"])
            res["outcome"] = res["outcome"] or "unchecked"
            return
        if chk["mutant_ort"] != "ok":
            res["outcome"] = "ort-refuses"
            notes.append("onnxruntime refuses the mutant: " + (chk["mutant_ort"] or "")[:200]
                         + f"; the output {'runs' if chk['out_ort'] == 'ok' else 'does not run either: ' + (chk['out_ort'] or '')[:150]}")
            return
        if chk["out_ort"] != "ok":
            fails.append("onnxruntime runs the mutant but not the output: " + (chk["out_ort"] or "")[:300])
            return
        if chk["compare"] != "ok":
            fails.append("output differs from the mutant in onnxruntime: " + chk["compare"])

    def save_failure(self, c: dict, res: dict, out: Optional[Path]):
        dest = Path(self.args.failures) / f"case_{c['case']:04d}_{c['base']}"
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        skipped = []
        for p in sorted(c["dir"].iterdir()):
            if p.name == "out":
                continue
            if p.is_symlink():
                skipped.append(f"{p.name} (symlink -> {os.readlink(p)})")
            elif p.is_file():
                shutil.copy2(p, dest / p.name)
            elif p.is_dir():
                (dest / p.name).mkdir(exist_ok=True)
                skipped.append(f"{p.name}/ (directory, recreated empty)")
            else:
                skipped.append(f"{p.name} (not a regular file: a FIFO made by os.mkfifo)")
        if c["outside"]:
            (dest / "outside").mkdir()
            for name in c["outside"]:
                shutil.copy2(self.outside / name, dest / "outside" / name)
        if out is not None and out.is_file():
            shutil.copy2(out, dest / "rlflow_output.onnx")
        lines = [f"case {c['case']} (seed {self.args.seed}), base model {c['base_path']}", "", "mutations:"]
        lines += [f"  [{m_['kind']}] {m_['desc']}" for m_ in c["mutations"]]
        lines += ["", "command (run in this folder):", "  " + " ".join(shlex.quote(x) for x in res["cmd"]),
                  f"exit code: {res['rc']}{' (timed out)' if res['timed_out'] else ''}", "stderr:"]
        lines += ["  " + l for l in res["stderr"].splitlines()[-20:]] or ["  (empty)"]
        if "info" in res:
            lines += ["", f"rlflow info model.onnx: exit {res['info']['rc']}", "stderr:"]
            lines += ["  " + l for l in res["info"]["stderr"].splitlines()[-10:]]
        lines += ["", "failures:"] + [f"  {f}" for f in res["failures"]]
        if res["notes"]:
            lines += ["notes:"] + [f"  {n}" for n in res["notes"]]
        if skipped:
            lines += ["", "not copied (recreate to reproduce):"] + [f"  {s}" for s in skipped]
        if c["outside"]:
            lines += ["", f"files that were outside the model's folder (at {self.outside}) are in outside/; "
                          "a '..' or absolute location must be adjusted to point there"]
        lines += ["", f"reproduce: scripts/checks/fuzz_fields --seed {self.args.seed} --cases {c['case'] + 1} --keep DIR  "
                      f"(case {c['case']} is in DIR/case_{c['case']:04d})"]
        (dest / "description.txt").write_text("\n".join(lines) + "\n")
        (dest / "result.json").write_text(json.dumps(_json_safe(res), indent=1, default=str))
        res["saved"] = str(dest)


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    return x


def table(rows: List[List[str]]) -> str:
    w = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(str(x).ljust(w[i]) if i == 0 else str(x).rjust(w[i]) for i, x in enumerate(r)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w[i] for i in range(len(w))))
    return "\n".join(out)


OUTCOMES = ["ok", "ort-refuses", "unchecked", "exit2", "exit3", "exit4", "FAIL", "harness-error"]


def main(argv: List[str]) -> int:
    if argv[:1] == ["--_check"]:
        return _check_main(argv[1])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="RNG seed (default 0); the same seed gives the same mutants")
    ap.add_argument("--cases", type=int, default=250,
                    help="mutants to run (default 250: about 4 minutes on a busy 2-core machine)")
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN") or str(ROOT / "build/rlflow"),
                    help="rlflow binary (default $RLFLOW_BIN or build/rlflow)")
    ap.add_argument("--json", help="write a JSON summary here")
    ap.add_argument("--failures", default=str(ROOT / "results/fuzz_fields/failures"),
                    help="folder for failing mutants (default results/fuzz_fields/failures; its case_* folders are replaced)")
    ap.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1), help="cases run at once (default: cores)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per rlflow command (default 30)")
    ap.add_argument("--info-fraction", type=float, default=0.25, help="fraction of cases also run through `rlflow info`")
    ap.add_argument("--max-bytes", type=int, default=1 << 20, help="skip corpus models larger than this (default 1 MiB)")
    ap.add_argument("--memory-limit", type=int, default=2048,
                    help="rlflow optimise --memory-limit, MiB (default 2048: a mutant with huge dims must not take the machine)")
    ap.add_argument("--keep", help="keep every case's folder (mutant, side files, output) here")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args(argv)
    if args.cases < 1 or args.jobs < 1 or args.timeout <= 0 or not 0 <= args.info_fraction <= 1:
        print("fuzz_fields.py: --cases and --jobs must be >= 1, --timeout > 0, --info-fraction in [0, 1]", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.rlflow) and os.access(args.rlflow, os.X_OK)):
        print(f"fuzz_fields.py: rlflow binary not found at {args.rlflow} (build it, or --rlflow)", file=sys.stderr)
        return 2
    args.rlflow = str(Path(args.rlflow).resolve())

    import onnx

    t0 = time.monotonic()
    paths = corpus(args.max_bytes)
    if not paths:
        print("fuzz_fields.py: no corpus models in tests/data", file=sys.stderr)
        return 2
    bases = []
    for p in paths:
        m = onnx.load(str(p))
        binding, default, err = find_binding(p, m)
        if err:
            print(f"note: onnxruntime does not run {p.name} at any candidate size ({err}); its mutants compare at {binding}")
        bases.append({"name": p.stem, "rel": str(p.relative_to(ROOT)), "model": m, "binding": binding, "default": default})
    print(f"fuzz_fields: seed {args.seed}, {args.cases} cases over {len(bases)} models, {args.jobs} jobs, rlflow {args.rlflow}",
          flush=True)

    fail_root = Path(args.failures)
    fail_root.mkdir(parents=True, exist_ok=True)
    for old in fail_root.glob("case_*"):
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)

    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="fuzz_fields.", dir=args.keep))
    else:
        tmp = Path(tempfile.mkdtemp(prefix="rlflow-fuzz-fields."))
    runner = Runner(args, tmp, bases)
    results: List[dict] = []
    try:
        cases = [runner.generate(i) for i in range(args.cases)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(runner.run_case, cases))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - t0

    # Outcome per mutation kind (a case with several kinds counts under each).
    per_kind: Dict[str, Dict[str, int]] = {k: {o: 0 for o in OUTCOMES} for k in sorted(MUTATIONS, key=lambda k: (GROUPS.index(MUTATIONS[k][0]), k))}
    for r in results:
        for k in sorted({m_["kind"] for m_ in r["mutations"]}):
            per_kind[k][r["outcome"]] += 1
    shown = [o for o in OUTCOMES if o != "harness-error" or any(r["outcome"] == o for r in results)]
    rows = [["kind", "group"] + shown + ["cases"]]
    for k, counts in per_kind.items():
        rows.append([k, MUTATIONS[k][0]] + [counts[o] or "." for o in shown] + [sum(counts.values())])
    print("\nOutcome per mutation kind (ok: exit 0 and equal in onnxruntime; ort-refuses: exit 0 on a mutant onnxruntime "
          "cannot run, output passes the checker; unchecked: too large or the oracle did not finish; exitN: refused)")
    print(table(rows))

    per_rc: Dict[str, Dict[str, int]] = {}
    for r in results:
        key = ("not run" if r["rc"] is None else "timeout" if r["timed_out"] else
               f"signal {-r['rc']}" if r["rc"] < 0 else str(r["rc"]))
        e = per_rc.setdefault(key, {"cases": 0, "failures": 0})
        e["cases"] += 1
        e["failures"] += r["outcome"] == "FAIL"
    print("\nPer optimise exit code")
    print(table([["exit", "cases", "failures"]] + [[k, v["cases"], v["failures"]] for k, v in sorted(per_rc.items())]))
    info = [r["info"]["rc"] for r in results if "info" in r]
    if info:
        print(f"\nrlflow info run on {len(info)} cases: " + ", ".join(f"exit {k}: {info.count(k)}" for k in sorted(set(info))))

    ort_ref = [r for r in results if r["outcome"] == "ort-refuses"]
    if ort_ref:
        print(f"\nAccepted where onnxruntime refuses the mutant ({len(ort_ref)}; not failures):")
        for r in ort_ref:
            print(f"  case {r['case']} {r['base']}: " + " | ".join(m_["desc"] for m_ in r["mutations"])[:200])
            print(f"      {[n for n in r['notes'] if n.startswith('onnxruntime')][0][:260]}")
    repaired = [(r, n) for r in results for n in r["notes"] if n.startswith("accepted a mutant that fails")]
    if repaired:
        groups: Dict[str, List[int]] = {}
        for r, n in repaired:
            why = re.sub(r"'[^']*'|\([^)]*\)", "...", n.split(": ", 1)[1])[:90]
            groups.setdefault(why, []).append(r["case"])
        print(f"\nExit 0 on a mutant that fails onnx.checker, output passes it ({len(repaired)}; not failures):")
        for why, cs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(cs):3d}  {why}  (cases {', '.join(map(str, cs[:8]))}{', ...' if len(cs) > 8 else ''})")
    other_notes = [(r, n) for r in results for n in r["notes"]
                   if not n.startswith("onnxruntime refuses") and not n.startswith("accepted a mutant that fails")]
    if other_notes:
        print(f"\nNotes ({len(other_notes)}):")
        for r, n in other_notes:
            print(f"  case {r['case']} {r['base']} rc={r['rc']}: {n[:240]}")

    failed = [r for r in results if r["outcome"] == "FAIL"]
    if failed:
        print(f"\nFailures ({len(failed)}), saved under {fail_root}:")
        for r in failed:
            print(f"  case {r['case']} {r['base']} exit {r['rc']}: " + " | ".join(f"[{m_['kind']}] {m_['desc']}" for m_ in r["mutations"])[:400])
            for f in r["failures"]:
                print(f"      - {f[:400]}")
            err = [l for l in r["stderr"].splitlines() if l.strip()]
            if err:
                print(f"      stderr: {err[-1][:300]}")
    print(f"\nelapsed {elapsed:.0f} s")
    harness = [r for r in results if r["outcome"] == "harness-error"]
    if harness:
        print(f"{len(harness)} case(s) could not be run (harness errors: {harness[0]['failures'][0][:200]})")
    print(f"{len(results)} cases, {len(failed)} failures")

    if args.json:
        summary = {"seed": args.seed, "cases": len(results), "failures": len(failed), "seconds": round(elapsed, 1),
                   "rlflow": args.rlflow, "per_kind": per_kind, "per_exit": per_rc,
                   "results": [{k: v for k, v in r.items() if k != "stderr"} | {"stderr": r["stderr"][-2000:]}
                               for r in results]}
        Path(args.json).write_text(json.dumps(_json_safe(summary), indent=1, default=str))
    return 1 if failed else 2 if harness else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
