"""Bindings of a dynamic model's symbolic dims, and seeded inputs at each, for onnxruntime checks.

A model exported with dynamic axes declares its input dims as names ("batch", "sequence_length")
or as expressions over names ("past_sequence_length + sequence_length"). A file that is right at
one size can be wrong at another, and two sizes with the same batch x sequence cannot tell a
baked-in sequence length apart, so the checks run at bindings that cannot coincide:

  representative  batch 1, every other name 128 (what rlflow optimises at by default)
  smallest        batch 1, every other name 1, a past length 0 (the prefill of a KV-cache decoder)
  odd primes      batch 3, a past length 17, the other names 37, 29, 23, ...
  decode step     batch 1, every other name 1, a past length 29 (only where there is a past length)
  batch 2         batch 2, the other names 64, a past length 5

Used by check_hf_corpus.py and check_sizes.py.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import numpy as np

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_EXPR = re.compile(r"^[A-Za-z0-9_.\s+\-*/()%]+$")
OTHERS = [37, 29, 23, 31, 41, 43, 47, 53]


def graph_inputs(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def role(name: str) -> str:
    n = name.lower()
    if "past" in n or "cache" in n:
        return "past"
    if "batch" in n:
        return "batch"
    return "other"


def _dim_key(vi, axis: int, d) -> str:
    return d.dim_param if d.dim_param else f"{vi.name}:{axis}"


def symbols(model) -> List[str]:
    """The names the graph inputs' symbolic dims are made of, in first-seen order."""
    out: List[str] = []
    for vi in graph_inputs(model):
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            key = _dim_key(vi, axis, d)
            names = _NAME.findall(key) if d.dim_param and _EXPR.match(key) else [key]
            for n in names:
                if n.lower() not in ("floor", "ceil", "max", "min") and n not in out:
                    out.append(n)
    return out


def bindings(model) -> List[Tuple[str, Dict[str, int]]]:
    syms = symbols(model)
    if not syms:
        return [("static", {})]
    has_past = any(role(s) == "past" for s in syms)
    rep, small, primes, decode, two = {}, {}, {}, {}, {}
    others = iter(OTHERS * 4)
    for s in syms:
        r = role(s)
        rep[s] = 1 if r == "batch" else 128
        small[s] = 0 if r == "past" else 1
        primes[s] = 3 if r == "batch" else 17 if r == "past" else next(others)
        decode[s] = 29 if r == "past" else 1
        two[s] = 2 if r == "batch" else 5 if r == "past" else 64
    out = [("representative", rep), ("smallest", small), ("odd primes", primes)]
    if has_past:
        out.append(("decode step", decode))
    out.append(("batch 2", two))
    return out


def dim_size(vi, axis: int, d, binding: Dict[str, int]) -> int:
    if d.HasField("dim_value") and d.dim_value > 0:
        return int(d.dim_value)
    key = _dim_key(vi, axis, d)
    if key in binding:
        return binding[key]
    if d.dim_param and _EXPR.match(key):
        env = {n: binding.get(n, 1) for n in _NAME.findall(key)}
        env.update(floor=lambda x: x, ceil=lambda x: x, max=max, min=min)
        # The expression is checked against _EXPR first: names, integers and arithmetic only.
        return int(eval(key.replace("//", "/").replace("/", "//"), {"__builtins__": {}}, env))
    return 1


def input_shape(vi, binding: Dict[str, int]) -> List[int]:
    return [dim_size(vi, a, d, binding) for a, d in enumerate(vi.type.tensor_type.shape.dim)]


def vocab_size(model) -> Optional[int]:
    meta = {p.key: p.value for p in model.metadata_props}
    if "rlflow_hf.vocab_size" in meta:
        return int(meta["rlflow_hf.vocab_size"])
    inits = {t.name: t for t in model.graph.initializer}
    # A quantized model's embedding table is DequantizeLinear(initializer).
    dq = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == "input_ids":
            table = dq.get(n.input[0], n.input[0])
            if table in inits:
                return int(inits[table].dims[0])
    return None


def make_feeds(model, binding: Dict[str, int], seed: int = 0) -> Dict[str, np.ndarray]:
    """Floats N(0, 1); masks ones; position ids past..past+sequence; token types in [0, 2); other integers in [0, vocab)."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    vocab = vocab_size(model) or 4
    past = next((v for k, v in binding.items() if role(k) == "past"), 0)
    feeds = {}
    for vi in graph_inputs(model):
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = input_shape(vi, binding)
        name = vi.name.lower()
        if "mask" in name:
            feeds[vi.name] = np.ones(shape, dtype=dtype)
        elif "position" in name and np.issubdtype(dtype, np.integer) and shape:
            feeds[vi.name] = np.broadcast_to(np.arange(past, past + shape[-1], dtype=dtype), shape).copy()
        elif "token_type" in name and np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, 2, size=shape).astype(dtype)  # BERT's two segments
        elif np.issubdtype(dtype, np.integer):
            feeds[vi.name] = rng.integers(0, vocab, size=shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = np.ones(shape, dtype=bool)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def binding_str(label: str, binding: Dict[str, int]) -> str:
    return label + (" (" + " ".join(f"{k}={v}" for k, v in binding.items()) + ")" if binding else "")
