#!/usr/bin/env python3
"""Write the small ONNX fixtures in tests/data/ (and the malformed corpus in
tests/data/malformed/).

Everything is deterministic: weights come from a seeded numpy generator per
model, so re-running the script reproduces the committed files byte for byte.
Valid models pass onnx.checker (full_check) and are numerically checked against
onnxruntime; malformed ones are saved bypassing the checker on purpose.

IR versions are the minimum for each opset, except in the ir10_* fixtures:
those are written at IR 10 (what onnx >= 1.16 saves), which Debian's libonnx
1.12 (IR <= 8, opset <= 17) rejected; rlflow links onnx 1.19 (scripts/setup/build_onnx).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import half_precision  # scripts/corpus/, next to this file

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "tests" / "data"
PRODUCER = "rlflow/scripts/make_test_models.py"
MAX_BYTES = 200 * 1024

F = TensorProto.FLOAT
I64 = TensorProto.INT64


# ------------------------------------------------------------------- helpers


class Builder:
    """Accumulates nodes and initialisers; names are explicit for readable fixtures."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []

    def weight(self, name: str, shape, scale: float | None = None) -> str:
        if scale is None:  # He-style scale keeps activations O(1) through the fixture
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
            scale = math.sqrt(2.0 / max(1, fan_in))
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.const(name, arr)

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def i64(self, name: str, values) -> str:
        return self.const(name, np.asarray(values, dtype=np.int64))

    def f32(self, name: str, values) -> str:
        return self.const(name, np.asarray(values, dtype=np.float32))

    def node(self, op: str, inputs, outputs, name: str | None = None, **attrs) -> None:
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        self.nodes.append(helper.make_node(op, list(inputs), outputs, name=name or outputs[0], **attrs))

    def model(self, name: str, inputs, outputs, opset: int, extra_opsets=()) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        opsets = [helper.make_opsetid("", opset), *extra_opsets]
        model = helper.make_model(graph, producer_name=PRODUCER, opset_imports=opsets)
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model


def vi(name: str, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# --------------------------------------------------------------- valid models


def tiny_cnn() -> onnx.ModelProto:
    b = Builder(seed=1)
    b.node("Conv", ["x", b.weight("conv1.w", [8, 3, 3, 3]), b.weight("conv1.b", [8], 0.1)], "c1",
           kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b.node("BatchNormalization",
           ["c1", b.f32("bn.scale", 1 + 0.1 * b.rng.standard_normal(8)),
            b.f32("bn.bias", 0.1 * b.rng.standard_normal(8)),
            b.f32("bn.mean", 0.1 * b.rng.standard_normal(8)),
            b.f32("bn.var", 0.5 + b.rng.random(8))],
           "bn1", epsilon=1e-5)
    b.node("Relu", ["bn1"], "r1")
    b.node("Conv", ["r1", b.weight("conv2.w", [8, 8, 1, 1])], "c2", kernel_shape=[1, 1])
    b.node("Relu", ["c2"], "r2")
    b.node("MaxPool", ["r2"], "p1", kernel_shape=[2, 2], strides=[2, 2])  # 16 -> 8
    # grouped + dilated + asymmetric pads: H begins 0 / ends 1, W begins 1 / ends 0 -> 8 -> 5
    b.node("Conv", ["p1", b.weight("conv3.w", [8, 4, 3, 3]), b.weight("conv3.b", [8], 0.1)], "c3",
           kernel_shape=[3, 3], group=2, dilations=[2, 2], pads=[0, 1, 1, 0])
    b.node("AveragePool", ["c3"], "p2", kernel_shape=[2, 2], strides=[1, 1])  # 5 -> 4
    b.node("GlobalAveragePool", ["p2"], "gap")
    b.node("Flatten", ["gap"], "flat", axis=1)
    b.node("Gemm", ["flat", b.weight("fc.w", [10, 8]), b.weight("fc.b", [10], 0.1)], "logits", transB=1)
    b.node("Softmax", ["logits"], "y", axis=-1)
    return b.model("tiny_cnn", [vi("x", F, [1, 3, 16, 16])], [vi("y", F, [1, 10])], opset=13)


def tiny_residual() -> onnx.ModelProto:
    b = Builder(seed=2)
    b.node("Conv", ["x", b.weight("conv_a.w", [4, 4, 3, 3]), b.weight("conv_a.b", [4], 0.1)], "a",
           kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b.node("Conv", ["x", b.weight("conv_b.w", [4, 4, 1, 1]), b.weight("conv_b.b", [4], 0.1)], "b",
           kernel_shape=[1, 1])
    b.node("Add", ["a", "b"], "sum")
    # opset 11 Clip: min/max are (optional) inputs, not attributes
    b.node("Clip", ["sum", b.f32("clip.min", 0.0), b.f32("clip.max", 6.0)], "clipped")
    b.node("Sigmoid", ["b"], "gate")
    b.node("Concat", ["clipped", "gate"], "cat", axis=1)  # [1,8,8,8]
    # opset 11 Pad: pads and constant_value are inputs
    b.node("Pad", ["cat", b.i64("pad.pads", [0, 0, 1, 1, 0, 0, 1, 1]), b.f32("pad.value", 0.0)], "padded",
           mode="constant")  # [1,8,10,10]
    b.node("Conv", ["padded", b.weight("conv_c.w", [8, 8, 3, 3])], "c", kernel_shape=[3, 3])  # [1,8,8,8]
    b.node("Tanh", ["c"], "t")
    b.node("Dropout", ["t"], "dropped", ratio=0.25)  # inference: identity
    b.node("Identity", ["dropped"], "same")
    # opset 11 Split/Squeeze/Unsqueeze take split sizes and axes as attributes
    b.node("Split", ["same"], ["head", "tail"], name="split", axis=1, split=[3, 5])
    b.node("Conv", ["tail", b.weight("conv_d.w", [3, 5, 1, 1])], "tail_proj", kernel_shape=[1, 1])
    b.node("Add", ["head", "tail_proj"], "y")  # [1,3,8,8]
    b.node("GlobalAveragePool", ["tail"], "pooled")  # [1,5,1,1]
    b.node("Squeeze", ["pooled"], "squeezed", axes=[2, 3])  # [1,5]
    b.node("Unsqueeze", ["squeezed"], "z", axes=[1])  # [1,1,5]
    return b.model("tiny_residual", [vi("x", F, [1, 4, 8, 8])],
                   [vi("y", F, [1, 3, 8, 8]), vi("z", F, [1, 1, 5])], opset=11)


def tiny_attention() -> onnx.ModelProto:
    seq, hidden, heads = 8, 16, 2
    hd = hidden // heads
    b = Builder(seed=3)
    for p in "qkv":
        b.node("MatMul", ["x", b.weight(f"w{p}", [hidden, hidden], 1 / math.sqrt(hidden))], p)
    split_shape = b.i64("heads_shape", [1, seq, heads, hd])
    b.node("Reshape", ["q", split_shape], "q4")
    b.node("Reshape", ["k", split_shape], "k4")
    b.node("Reshape", ["v", split_shape], "v4")
    b.node("Transpose", ["q4"], "qh", perm=[0, 2, 1, 3])  # [1,h,S,d]
    b.node("Transpose", ["k4"], "kt", perm=[0, 2, 3, 1])  # [1,h,d,S]
    b.node("Transpose", ["v4"], "vh", perm=[0, 2, 1, 3])
    b.node("MatMul", ["qh", "kt"], "scores")
    b.node("Div", ["scores", b.f32("sqrt_d", math.sqrt(hd))], "scaled")
    b.node("Softmax", ["scaled"], "probs", axis=-1)
    b.node("MatMul", ["probs", "vh"], "ctx")  # [1,h,S,d]
    b.node("Transpose", ["ctx"], "ctx_t", perm=[0, 2, 1, 3])
    b.node("Reshape", ["ctx_t", b.i64("merged_shape", [1, seq, hidden])], "merged")
    b.node("MatMul", ["merged", b.weight("wo", [hidden, hidden], 1 / math.sqrt(hidden))], "attn")
    b.node("Add", ["attn", "x"], "res")
    # LayerNorm as the primitive ops older exporters emit
    b.node("ReduceMean", ["res"], "mean", axes=[-1], keepdims=1)
    b.node("Sub", ["res", "mean"], "centered")
    b.node("Pow", ["centered", b.f32("two", 2.0)], "sq")
    b.node("ReduceMean", ["sq"], "var", axes=[-1], keepdims=1)
    b.node("Add", ["var", b.f32("eps", 1e-5)], "var_eps")
    b.node("Sqrt", ["var_eps"], "std")
    b.node("Div", ["centered", "std"], "normed")
    b.node("Mul", ["normed", b.f32("ln.gamma", 1 + 0.1 * b.rng.standard_normal(hidden))], "scaled_ln")
    b.node("Add", ["scaled_ln", b.f32("ln.beta", 0.1 * b.rng.standard_normal(hidden))], "ln")
    # FFN with exact GELU: 0.5 * h * (1 + erf(h / sqrt 2))
    b.node("MatMul", ["ln", b.weight("w1", [hidden, 2 * hidden], 1 / math.sqrt(hidden))], "h0")
    b.node("Add", ["h0", b.weight("b1", [2 * hidden], 0.1)], "h")
    b.node("Div", ["h", b.f32("sqrt2", math.sqrt(2.0))], "h_div")
    b.node("Erf", ["h_div"], "erf")
    b.node("Add", ["erf", b.f32("one", 1.0)], "erf1")
    b.node("Mul", ["h", "erf1"], "gelu_unscaled")
    b.node("Mul", ["gelu_unscaled", b.f32("half", 0.5)], "gelu")
    b.node("MatMul", ["gelu", b.weight("w2", [2 * hidden, hidden], 1 / math.sqrt(2 * hidden))], "ffn")
    # CLS-style token pick: scalar index removes axis 1
    b.node("Gather", ["ffn", b.i64("cls_index", 0)], "cls", axis=1)  # [1,16]
    b.node("Slice", ["ffn", b.i64("win.starts", [2]), b.i64("win.ends", [6]), b.i64("win.axes", [1])],
           "window")  # [1,4,16]
    return b.model("tiny_attention", [vi("x", F, [1, seq, hidden])],
                   [vi("cls", F, [1, hidden]), vi("window", F, [1, 4, hidden])], opset=13)


def tiny_layernorm17() -> onnx.ModelProto:
    b = Builder(seed=4)
    b.node("LayerNormalization",
           ["x", b.f32("ln.gamma", 1 + 0.1 * b.rng.standard_normal(32)),
            b.f32("ln.beta", 0.1 * b.rng.standard_normal(32))],
           "ln", axis=-1, epsilon=1e-5)
    b.node("MatMul", ["ln", b.weight("w", [32, 32], 1 / math.sqrt(32))], "m")
    b.node("Sub", ["m", b.weight("shift", [32], 0.5)], "s")
    # sqrt(s*s) = |s|: Sqrt never sees a tiny value produced by cancellation,
    # so backends that round differently still agree to ~1e-6.
    b.node("Mul", ["s", "s"], "s2")
    b.node("Sqrt", ["s2"], "abs_s")
    b.node("Relu", ["s"], "pos")
    b.node("Mul", ["pos", "abs_s"], "y")
    return b.model("tiny_layernorm17", [vi("x", F, [1, 4, 32])], [vi("y", F, [1, 4, 32])], opset=17)


def tiny_rmsnorm() -> onnx.ModelProto:
    """LLaMA's RMSNorm as PyTorch's exporter writes HF LlamaRMSNorm at opset 17: the float32 casts
    (no-ops here), x.pow(2).mean(-1, keepdim=True), rsqrt as Div(1, Sqrt(.)), then weight * x."""
    b = Builder(seed=12)
    b.node("MatMul", ["x", b.weight("w_in", [32, 32], 1 / math.sqrt(32))], "h")
    b.node("Cast", ["h"], "h32", to=F)
    b.node("Pow", ["h32", b.f32("two", 2.0)], "sq")
    b.node("ReduceMean", ["sq"], "var", axes=[-1], keepdims=1)
    b.node("Add", ["var", b.f32("eps", 1e-6)], "var_eps")
    b.node("Sqrt", ["var_eps"], "rms")
    b.node("Div", [b.f32("one", 1.0), "rms"], "inv_rms")
    b.node("Mul", ["h32", "inv_rms"], "normed")
    b.node("Cast", ["normed"], "normed_t", to=F)
    b.node("Mul", [b.f32("norm.weight", 1 + 0.1 * b.rng.standard_normal(32)), "normed_t"], "n")
    b.node("MatMul", ["n", b.weight("w_out", [32, 16], 1 / math.sqrt(32))], "y")
    return b.model("tiny_rmsnorm", [vi("x", F, [1, 6, 32])], [vi("y", F, [1, 6, 16])], opset=17)


def tiny_rope() -> onnx.ModelProto:
    """HF LLaMA's rotary embedding as PyTorch's exporter writes it at opset 17: cos/sin of
    cat(freqs, freqs) scaled by 1 and cast, unsqueezed to (B, 1, S, D), and q * cos + rotate_half(q) *
    sin for q and k, rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]). The positions are an input
    (float), so the caches are computed rather than folded."""
    b = Builder(seed=13)
    d, h = 8, 2
    inv_freq = (1.0 / (10000 ** (np.arange(0, d, 2, dtype=np.float32) / d))).astype(np.float32)
    b.node("Unsqueeze", ["pos", b.i64("pos_axes", [2])], "pos3")
    b.node("Mul", ["pos3", b.f32("inv_freq", inv_freq)], "freqs")
    b.node("Concat", ["freqs", "freqs"], "emb", axis=-1)
    scale = b.f32("attention_scaling", 1.0)  # one initializer: equal ones would be merged on export
    for fn in ("Cos", "Sin"):
        t = fn.lower()
        b.node(fn, ["emb"], f"{t}_raw")
        b.node("Mul", [f"{t}_raw", scale], f"{t}_scaled")
        b.node("Cast", [f"{t}_scaled"], f"{t}_cast", to=F)
        b.node("Unsqueeze", [f"{t}_cast", b.i64(f"{t}_axes", [1])], t)
    for p in ("q", "k"):
        b.node("MatMul", ["x", b.weight(f"w_{p}", [16, 16], 1 / math.sqrt(16))], f"{p}_lin")
        b.node("Reshape", [f"{p}_lin", b.i64(f"{p}_shape", [1, 4, h, d])], f"{p}_heads")
        b.node("Transpose", [f"{p}_heads"], p, perm=[0, 2, 1, 3])
        b.node("Slice", [p, b.i64(f"{p}_s0", [0]), b.i64(f"{p}_e0", [d // 2]), b.i64(f"{p}_a0", [3]), b.i64(f"{p}_st0", [1])], f"{p}_x1")
        b.node("Slice", [p, b.i64(f"{p}_s1", [d // 2]), b.i64(f"{p}_e1", [2**63 - 1]), b.i64(f"{p}_a1", [3]), b.i64(f"{p}_st1", [1])],
               f"{p}_x2")
        b.node("Neg", [f"{p}_x2"], f"{p}_neg")
        b.node("Concat", [f"{p}_neg", f"{p}_x1"], f"{p}_rot", axis=-1)
        b.node("Mul", [p, "cos"], f"{p}_cos")
        b.node("Mul", [f"{p}_rot", "sin"], f"{p}_sin")
        b.node("Add", [f"{p}_cos", f"{p}_sin"], f"{p}_emb")
    b.node("Transpose", ["k_emb"], "k_t", perm=[0, 1, 3, 2])
    b.node("MatMul", ["q_emb", "k_t"], "scores")
    return b.model("tiny_rope", [vi("pos", F, [1, 4]), vi("x", F, [1, 4, 16])], [vi("scores", F, [1, h, 4, 4])], opset=17)


def tiny_attention_causal() -> onnx.ModelProto:
    """Three eager attention chains as exporters write them at opset 17, for the Attention fusion
    (opset 23): a GPT-style block (K^T by Transpose(0, 2, 3, 1), scores / sqrt(d), a constant causal
    mask of float32's lowest value added), a BERT-style one (a padding mask computed from the input
    `keep`, (1, 1, 1, S)), PyTorch nn.MultiheadAttention's 3-D form (q / sqrt(d) before the
    MatMul, K^T by Transpose(1, 2, 0)) and HF LLaMA's GQA (repeat_kv, scores * d^-0.5, causal)."""
    seq, hidden, heads = 6, 16, 2
    hd = hidden // heads
    b = Builder(seed=13)
    lowest = np.finfo(np.float32).min
    causal = np.where(np.tril(np.ones((seq, seq), dtype=bool)), 0.0, lowest).astype(np.float32)
    # Initializers of equal value are shared, as exporters write them (rlflow writes one of each).
    causal_mask = b.f32("causal_mask", causal.reshape(1, 1, seq, seq))
    sqrt_d = b.f32("sqrt_d", math.sqrt(hd))

    def block(x: str, tag: str, mask: str | None) -> str:
        for p in "qkv":
            b.node("MatMul", [x, b.weight(f"{tag}.w{p}", [hidden, hidden], 1 / math.sqrt(hidden))], f"{tag}.{p}")
            b.node("Reshape", [f"{tag}.{p}", b.i64(f"{tag}.{p}_shape", [1, seq, heads, hd])], f"{tag}.{p}4")
        b.node("Transpose", [f"{tag}.q4"], f"{tag}.qh", perm=[0, 2, 1, 3])
        b.node("Transpose", [f"{tag}.k4"], f"{tag}.kt", perm=[0, 2, 3, 1])
        b.node("Transpose", [f"{tag}.v4"], f"{tag}.vh", perm=[0, 2, 1, 3])
        b.node("MatMul", [f"{tag}.qh", f"{tag}.kt"], f"{tag}.scores")
        b.node("Div", [f"{tag}.scores", sqrt_d], f"{tag}.scaled")
        b.node("Add", [f"{tag}.scaled", mask], f"{tag}.masked")
        b.node("Softmax", [f"{tag}.masked"], f"{tag}.probs", axis=-1)
        b.node("MatMul", [f"{tag}.probs", f"{tag}.vh"], f"{tag}.ctx")
        b.node("Transpose", [f"{tag}.ctx"], f"{tag}.ctx_t", perm=[0, 2, 1, 3])
        b.node("Reshape", [f"{tag}.ctx_t", b.i64(f"{tag}.merged_shape", [1, seq, hidden])], f"{tag}.merged")
        b.node("MatMul", [f"{tag}.merged", b.weight(f"{tag}.wo", [hidden, hidden], 1 / math.sqrt(hidden))], f"{tag}.out")
        b.node("Add", [f"{tag}.out", x], f"{tag}.res")
        return f"{tag}.res"

    h1 = block("x", "gpt", causal_mask)
    # BERT's extended mask: (1 - keep) * lowest, (1, 1, 1, S)
    b.node("Unsqueeze", ["keep", b.i64("keep_axes", [1, 2])], "keep4")
    b.node("Sub", [b.f32("one", 1.0), "keep4"], "pad")
    b.node("Mul", ["pad", b.f32("lowest", lowest)], "pad_mask")
    h2 = block(h1, "bert", "pad_mask")
    # nn.MultiheadAttention (batch 1): (L, N*H, hd) heads, q scaled before the MatMul
    for p in "qkv":
        b.node("MatMul", [h2, b.weight(f"mha.w{p}", [hidden, hidden], 1 / math.sqrt(hidden))], f"mha.{p}")
        b.node("Reshape", [f"mha.{p}", b.i64(f"mha.{p}_shape", [seq, heads, hd])], f"mha.{p}3")
    b.node("Transpose", ["mha.q3"], "mha.qh", perm=[1, 0, 2])
    b.node("Div", ["mha.qh", sqrt_d], "mha.qs")
    b.node("Transpose", ["mha.k3"], "mha.kt", perm=[1, 2, 0])
    b.node("Transpose", ["mha.v3"], "mha.vh", perm=[1, 0, 2])
    b.node("MatMul", ["mha.qs", "mha.kt"], "mha.scores")
    b.node("Softmax", ["mha.scores"], "mha.probs", axis=-1)
    b.node("MatMul", ["mha.probs", "mha.vh"], "mha.ctx")
    b.node("Transpose", ["mha.ctx"], "mha.ctx_t", perm=[1, 0, 2])
    b.node("Reshape", ["mha.ctx_t", b.i64("mha.merged_shape", [1, seq, hidden])], "mha.merged")
    b.node("MatMul", ["mha.merged", b.weight("mha.wo", [hidden, hidden], 1 / math.sqrt(hidden))], "mha.out")
    # HF LLaMA with GQA (2 query heads, 1 kv head): repeat_kv as Unsqueeze/Expand/Reshape, K^T by
    # Transpose(0, 1, 3, 2), scores * hd^-0.5, the causal mask added.
    kv = hidden // heads
    b.node("MatMul", ["mha.out", b.weight("llama.wq", [hidden, hidden], 1 / math.sqrt(hidden))], "llama.q")
    b.node("Reshape", ["llama.q", b.i64("llama.q_shape", [1, seq, heads, hd])], "llama.q4")
    b.node("Transpose", ["llama.q4"], "llama.qh", perm=[0, 2, 1, 3])
    expand = b.i64("llama.kv_expand", [1, 1, heads, seq, hd])  # one initializer, as exporters share it
    for p in "kv":
        b.node("MatMul", ["mha.out", b.weight(f"llama.w{p}", [hidden, kv], 1 / math.sqrt(hidden))], f"llama.{p}")
        b.node("Reshape", [f"llama.{p}", b.i64(f"llama.{p}_shape", [1, seq, 1, hd])], f"llama.{p}4")
        b.node("Transpose", [f"llama.{p}4"], f"llama.{p}h", perm=[0, 2, 1, 3])
        b.node("Unsqueeze", [f"llama.{p}h", b.i64(f"llama.{p}_axes", [2])], f"llama.{p}5")
        b.node("Expand", [f"llama.{p}5", expand], f"llama.{p}e")
        b.node("Reshape", [f"llama.{p}e", b.i64(f"llama.{p}_rep", [1, heads, seq, hd])], f"llama.{p}r")
    b.node("Transpose", ["llama.kr"], "llama.kt", perm=[0, 1, 3, 2])
    b.node("MatMul", ["llama.qh", "llama.kt"], "llama.scores")
    b.node("Mul", ["llama.scores", b.f32("llama.scale", hd ** -0.5)], "llama.scaled")
    b.node("Add", ["llama.scaled", causal_mask], "llama.masked")
    b.node("Softmax", ["llama.masked"], "llama.probs", axis=-1)
    b.node("MatMul", ["llama.probs", "llama.vr"], "llama.ctx")
    b.node("Transpose", ["llama.ctx"], "llama.ctx_t", perm=[0, 2, 1, 3])
    b.node("Reshape", ["llama.ctx_t", b.i64("llama.merged_shape", [1, seq, hidden])], "y")
    return b.model("tiny_attention_causal", [vi("x", F, [1, seq, hidden]), vi("keep", F, [1, seq])],
                   [vi("y", F, [1, seq, hidden])], opset=17)


def shape_chain() -> onnx.ModelProto:
    b = Builder(seed=5)
    b.node("Shape", ["x"], "shape")
    b.node("Gather", ["shape", b.i64("batch_index", 0)], "batch", axis=0)  # scalar
    b.node("Unsqueeze", ["batch", b.i64("unsq_axes", [0])], "batch1")  # opset 13: axes input
    b.node("Constant", [], "minus_one", value=numpy_helper.from_array(np.array([-1], dtype=np.int64)))
    b.node("Concat", ["batch1", "minus_one"], "flat_shape", axis=0)  # [1, -1]
    b.node("Reshape", ["x", "flat_shape"], "flat")  # [1, 144]
    b.node("MatMul", ["flat", b.weight("w", [144, 8], 1 / 12)], "y")
    return b.model("shape_chain", [vi("x", F, [1, 4, 6, 6])], [vi("y", F, [1, 8])], opset=13)


def dynamic_batch() -> onnx.ModelProto:
    b = Builder(seed=6)
    b.node("MatMul", ["x", b.weight("w1", [16, 32])], "h0")
    b.node("Add", ["h0", b.weight("b1", [32], 0.1)], "h1")
    b.node("Relu", ["h1"], "h")
    b.node("MatMul", ["h", b.weight("w2", [32, 8])], "o0")
    b.node("Add", ["o0", b.weight("b2", [8], 0.1)], "o")
    b.node("Sigmoid", ["o"], "y")
    return b.model("dynamic_batch", [vi("x", F, ["N", 16])], [vi("y", F, ["N", 8])], opset=13)


def dynamic_linear() -> onnx.ModelProto:
    """Issue 38's four-node repro: a 3-D MatMul + bias over a symbolic batch and sequence, reshaped
    back to the input's shape. A rewrite to Gemm must not write the representative sequence length
    into its Reshapes."""
    b = Builder(seed=10)
    b.node("MatMul", ["x", b.weight("w", [64, 64])], "h")
    b.node("Add", ["h", b.weight("bias", [64], 0.1)], "hb")
    b.node("Shape", ["x"], "xs")
    b.node("Reshape", ["hb", "xs"], "y")
    return b.model("dynamic_linear", [vi("x", F, ["batch", "sequence", 64])], [vi("y", F, ["batch", "sequence", 64])], opset=13)


def kv_cache_decoder() -> onnx.ModelProto:
    """One attention layer of a decoder with a KV cache, as optimum exports it: the past keys and
    values are inputs, the mask spans "past_sequence_length + sequence_length", and the present
    keys and values are outputs. Head reshapes read the input's shape at run time."""
    b = Builder(seed=11)
    e, h, d = 16, 2, 8
    b.node("Shape", ["x"], "xs")
    b.node("Slice", ["xs", b.i64("s0", [0]), b.i64("s2", [2]), b.i64("s_ax", [0])], "bs")  # [B, S]
    b.node("Concat", ["bs", b.i64("hd", [h, d])], "heads_shape", axis=0)  # [B, S, H, D]
    b.node("Concat", ["bs", b.i64("e_dim", [e])], "merged_shape", axis=0)  # [B, S, E]
    for name in ("q", "k", "v"):
        b.node("MatMul", ["x", b.weight(f"w{name}", [e, e])], f"{name}0")
        b.node("Add", [f"{name}0", b.weight(f"b{name}", [e], 0.1)], f"{name}1")
        b.node("Reshape", [f"{name}1", "heads_shape"], f"{name}2")
        b.node("Transpose", [f"{name}2"], f"{name}3", perm=[0, 2, 1, 3])  # [B, H, S, D]
    b.node("Concat", ["past_key", "k3"], "present_key", axis=2)
    b.node("Concat", ["past_value", "v3"], "present_value", axis=2)
    b.node("Transpose", ["present_key"], "kt", perm=[0, 1, 3, 2])
    b.node("MatMul", ["q3", "kt"], "scores0")
    b.node("Mul", ["scores0", b.f32("scale", 1.0 / math.sqrt(d))], "scores1")
    # Padding mask: (1 - mask) * -1e4 over (B, 1, 1, L).
    b.node("Cast", ["attention_mask"], "maskf", to=F)
    b.node("Sub", [b.f32("one", 1.0), "maskf"], "inv")
    b.node("Mul", ["inv", b.f32("neg", -1e4)], "bias0")
    b.node("Unsqueeze", ["bias0", b.i64("mask_axes", [1, 2])], "bias1")
    b.node("Add", ["scores1", "bias1"], "scores")
    b.node("Softmax", ["scores"], "probs", axis=-1)
    b.node("MatMul", ["probs", "present_value"], "ctx0")
    b.node("Transpose", ["ctx0"], "ctx1", perm=[0, 2, 1, 3])
    b.node("Reshape", ["ctx1", "merged_shape"], "ctx")
    b.node("MatMul", ["ctx", b.weight("wo", [e, e])], "o0")
    b.node("Add", ["o0", b.weight("bo", [e], 0.1)], "y")
    total = "past_sequence_length + sequence_length"
    inputs = [vi("x", F, ["batch_size", "sequence_length", e]),
              vi("past_key", F, ["batch_size", h, "past_sequence_length", d]),
              vi("past_value", F, ["batch_size", h, "past_sequence_length", d]),
              vi("attention_mask", I64, ["batch_size", total])]
    outputs = [vi("y", F, ["batch_size", "sequence_length", e]),
               vi("present_key", F, ["batch_size", h, total, d]),
               vi("present_value", F, ["batch_size", h, total, d])]
    return b.model("kv_cache_decoder", inputs, outputs, opset=13)


def tied_embedding() -> onnx.ModelProto:
    """A weight-tied decoder head: the embedding E is read by Gather(E, ids) and, transposed, by the
    output MatMul. Folding the Transpose would write E twice."""
    b = Builder(seed=12)
    vocab, dim = 512, 64
    b.node("Gather", [b.weight("embed", [vocab, dim], 0.1), "input_ids"], "h0", axis=0)
    b.node("MatMul", ["h0", b.weight("w", [dim, dim])], "h1")
    b.node("Add", ["h1", b.weight("bias", [dim], 0.1)], "h2")
    b.node("Tanh", ["h2"], "h")
    b.node("Transpose", ["embed"], "embed_t", perm=[1, 0])
    b.node("MatMul", ["h", "embed_t"], "logits")
    return b.model("tied_embedding", [vi("input_ids", I64, ["batch", "sequence"])], [vi("logits", F, ["batch", "sequence", vocab])],
                   opset=13)


def audio_conv_frontend() -> onnx.ModelProto:
    """A wav2vec2-style feature encoder over raw samples: kernels 10,3,3,3,3,2,2 and strides
    5,2,2,2,2,2,2 need at least 400 samples, more than the default representative size (128)."""
    b = Builder(seed=13)
    c = 8
    b.node("Unsqueeze", ["input_values", b.i64("chan_axis", [1])], "x0")
    t, cin = "x0", 1
    for k, (kernel, stride) in enumerate([(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]):
        b.node("Conv", [t, b.weight(f"conv{k}", [c, cin, kernel]), b.weight(f"conv{k}_b", [c], 0.1)], f"c{k}",
               kernel_shape=[kernel], strides=[stride])
        b.node("Relu", [f"c{k}"], f"r{k}")
        t, cin = f"r{k}", c
    b.node("Transpose", [t], "frames", perm=[0, 2, 1])
    b.node("MatMul", ["frames", b.weight("proj", [c, 16])], "p0")
    b.node("Add", ["p0", b.weight("proj_b", [16], 0.1)], "y")
    return b.model("audio_conv_frontend", [vi("input_values", F, ["batch", "samples"])], [vi("y", F, ["batch", "frames", 16])],
                   opset=13)


def opaque_op() -> onnx.ModelProto:
    b = Builder(seed=7)
    b.node("MatMul", ["x", b.weight("w1", [8, 16])], "h0")
    b.node("Add", ["h0", b.weight("b1", [16], 0.1)], "h1")
    b.node("Softplus", ["h1"], "hs")  # opaque to rlflow
    b.node("PRelu", ["hs", b.weight("slope", [16], 0.1)], "p")  # opaque, with a weight input
    b.node("MatMul", ["p", b.weight("w2", [16, 8])], "e")
    b.node("Relu", ["e"], "y")
    return b.model("opaque_op", [vi("x", F, [2, 8])], [vi("y", F, [2, 8])], opset=14)


def ir10_matmul() -> onnx.ModelProto:
    """IR 10, as onnx.helper.make_model writes it since onnx 1.16, at an old opset: the checker of
    onnx 1.12 rejects it ("Your model ir_version is higher than the checker's")."""
    b = Builder(seed=8)
    b.node("MatMul", ["x", b.weight("w1", [8, 16])], "h0")
    b.node("Add", ["h0", b.weight("b1", [16], 0.1)], "h1")
    b.node("Relu", ["h1"], "h")
    b.node("MatMul", ["h", b.weight("w2", [16, 4])], "y")
    model = b.model("ir10_matmul", [vi("x", F, [2, 8])], [vi("y", F, [2, 4])], opset=13)
    model.ir_version = 10
    return model


def ir10_opset21() -> onnx.ModelProto:
    """IR 10 at opset 21 with Gelu (opset 20): neither known to onnx 1.12's schemas."""
    b = Builder(seed=9)
    b.node("MatMul", ["x", b.weight("w1", [8, 16])], "h0")
    b.node("Add", ["h0", b.weight("b1", [16], 0.1)], "h1")
    b.node("Gelu", ["h1"], "h")
    b.node("MatMul", ["h", b.weight("w2", [16, 4])], "y")
    model = b.model("ir10_opset21", [vi("x", F, [2, 8])], [vi("y", F, [2, 4])], opset=21)
    model.ir_version = 10
    return model


VALID: Dict[str, Callable[[], onnx.ModelProto]] = {
    "tiny_cnn": tiny_cnn,
    "tiny_residual": tiny_residual,
    "tiny_attention": tiny_attention,
    "tiny_layernorm17": tiny_layernorm17,
    "tiny_rmsnorm": tiny_rmsnorm,
    "tiny_attention_causal": tiny_attention_causal,
    "tiny_rope": tiny_rope,
    "shape_chain": shape_chain,
    "dynamic_batch": dynamic_batch,
    "dynamic_linear": dynamic_linear,
    "kv_cache_decoder": kv_cache_decoder,
    "tied_embedding": tied_embedding,
    # In a subfolder: it needs at least 400 samples, so the checks that run every top-level fixture
    # at its default sizes leave it out; scripts/checks/check_sizes.py and the pipeline tests use it.
    "sizes/audio_conv_frontend": audio_conv_frontend,
    "opaque_op": opaque_op,
    "ir10_matmul": ir10_matmul,
    "ir10_opset21": ir10_opset21,
    # float16 end to end (scripts/corpus/half_precision.py): a CNN and an attention block.
    "tiny_cnn_fp16": lambda: half_precision.convert(tiny_cnn(), "float16"),
    "tiny_attention_fp16": lambda: half_precision.convert(tiny_attention(), "float16"),
}


# ----------------------------------------------------------- malformed corpus


def _tiny_graph_model(nodes, inputs, outputs, inits=(), opset=13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "malformed", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, producer_name=PRODUCER, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    return model


def malformed_corpus() -> Dict[str, tuple]:
    """name -> (bytes, one-line description for the README)."""
    rng = np.random.default_rng(1234)
    valid = tiny_cnn().SerializeToString()
    out: Dict[str, tuple] = {}

    out["empty.onnx"] = (b"", "0 bytes.")
    garbage = rng.integers(0, 256, size=1024, dtype=np.uint8).tobytes()
    out["garbage.onnx"] = (garbage, "1024 seeded random bytes; not a protobuf message.")
    out["text.onnx"] = (b"This is a text file, not an ONNX model.\nir_version: 8\ngraph { }\n",
                        "Plain text (looks a bit like protobuf text format), not binary protobuf.")
    out["truncated.onnx"] = (valid[: len(valid) // 2],
                             "The first half of the bytes of a valid model (tiny_cnn.onnx); "
                             "parsing stops inside a length-delimited field.")

    cyc = _tiny_graph_model(
        [helper.make_node("Add", ["x", "b"], ["a"], name="A"),
         helper.make_node("Relu", ["a"], ["b"], name="B")],
        [vi("x", F, [2, 3])], [vi("b", F, [2, 3])])
    out["cycle.onnx"] = (cyc.SerializeToString(),
                         "Node A = Add(x, b) consumes b, which node B = Relu(a) produces from A's output: "
                         "a cycle, so no topological order exists.")

    dang = _tiny_graph_model(
        [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
        [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])
    out["dangling_input.onnx"] = (dang.SerializeToString(),
                                  "Add consumes tensor 'ghost', which is neither a graph input, an "
                                  "initializer nor any node's output.")

    s = numpy_helper.from_array(np.array([1 + 2j, 3 - 4j], dtype=np.complex64), "c_weight")
    unsup = _tiny_graph_model(
        [helper.make_node("Identity", ["s"], ["s_out"], name="id_string"),
         helper.make_node("Identity", ["c_weight"], ["c_out"], name="id_complex"),
         helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [vi("x", F, [2]), vi("s", TensorProto.STRING, [2])],
        [vi("y", F, [2]), vi("s_out", TensorProto.STRING, [2]), vi("c_out", TensorProto.COMPLEX64, [2])],
        inits=[s])
    out["unsupported_dtype.onnx"] = (unsup.SerializeToString(),
                                     "Valid ONNX (passes onnx.checker), but a STRING graph input and a "
                                     "COMPLEX64 initializer each feed an Identity node; rlflow supports "
                                     "neither dtype.")

    incons = _tiny_graph_model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        [vi("a", F, [2, 3]), vi("b", F, [4, 5])], [vi("y", F, [2, 3])])
    out["inconsistent_shapes.onnx"] = (incons.SerializeToString(),
                                       "Add of declared shapes [2,3] and [4,5], which do not broadcast.")

    nog = onnx.ModelProto()
    nog.ir_version = 7
    nog.producer_name = PRODUCER
    nog.opset_import.append(helper.make_opsetid("", 13))
    out["no_graph.onnx"] = (nog.SerializeToString(), "A ModelProto with ir_version and opset_import but no graph.")

    dup = _tiny_graph_model(
        [helper.make_node("Relu", ["x"], ["t"], name="relu"),
         helper.make_node("Sigmoid", ["x"], ["t"], name="sigmoid"),
         helper.make_node("Add", ["t", "t"], ["y"], name="add")],
        [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])
    out["duplicate_output_name.onnx"] = (dup.SerializeToString(),
                                         "Relu and Sigmoid both produce tensor 't' (violates SSA).")

    # Extras beyond the original list: classic importer crashes.
    bad_raw = onnx.TensorProto()
    bad_raw.name = "w"
    bad_raw.data_type = F
    bad_raw.dims.extend([16, 16])
    bad_raw.raw_data = np.zeros(4, dtype=np.float32).tobytes()  # 16 bytes instead of 1024
    rawm = _tiny_graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
        [vi("x", F, [1, 16])], [vi("y", F, [1, 16])], inits=[bad_raw])
    out["raw_data_size_mismatch.onnx"] = (rawm.SerializeToString(),
                                          "Initializer 'w' declares dims [16,16] FLOAT (1024 bytes) but its "
                                          "raw_data holds 16 bytes; reading it blindly over-reads the buffer.")

    huge = onnx.TensorProto()
    huge.name = "w"
    huge.data_type = F
    huge.dims.extend([1 << 20, 1 << 20, 1 << 10])  # 2^50 elements, no data
    hugem = _tiny_graph_model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [vi("x", F, [1])], [vi("y", F, [1 << 20, 1 << 20, 1 << 10])], inits=[huge])
    out["huge_dims.onnx"] = (hugem.SerializeToString(),
                             "Initializer 'w' declares dims [2^20, 2^20, 2^10] (4 PiB) with no data; "
                             "an importer that allocates from dims before checking the payload runs out of memory.")

    undef_out = _tiny_graph_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu")],
        [vi("x", F, [2, 3])], [vi("y", F, [2, 3])])
    out["undefined_graph_output.onnx"] = (undef_out.SerializeToString(),
                                          "Graph output 'y' is produced by no node (the only node makes 'r').")
    return out


# ------------------------------------------------------------------ checking


def _dim_size(dim, sizes) -> int:
    """2 for each symbol; an exporter's expression over symbols ("past + sequence") evaluated."""
    if dim is None:
        return 2
    names = [t for t in dim.replace("+", " ").replace("-", " ").replace("*", " ").split() if not t.isdigit()]
    env = {n: sizes.setdefault(n, 2) for n in names}
    return int(eval(dim, {"__builtins__": {}}, env))  # a dim string of this fixture set, not user input


def ort_smoke(model: onnx.ModelProto, name: str) -> str:
    """Run the model once in onnxruntime: fixtures must actually execute."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    sizes = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 400 if d == "samples" else _dim_size(d, sizes) for d in i.shape]
        if i.type == "tensor(int64)":
            feeds[i.name] = np.ones(shape, dtype=np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float16 if i.type == "tensor(float16)" else np.float32)
    outs = sess.run(None, feeds)
    for o in outs:
        if not np.all(np.isfinite(o)):
            raise RuntimeError(f"{name}: non-finite output")
    return " ".join("x".join(map(str, o.shape)) for o in outs)


def expect_unloadable_or_invalid(name: str, data: bytes) -> str:
    """Each malformed file must be rejected by the onnx parser, the onnx
    checker or onnxruntime (the checker alone misses some, e.g. raw_data of the
    wrong size or a graph output nobody produces)."""
    import warnings

    import onnxruntime as ort

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # protobuf warns on stray end-group tags
            m = onnx.load_from_string(data)
    except Exception:
        return "parse error"
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception:
        return "parses; checker rejects"
    try:
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception:
        return "passes checker; onnxruntime rejects"
    if name == "unsupported_dtype.onnx":
        return "valid ONNX (unsupported by rlflow)"
    raise RuntimeError(f"{name}: expected to be malformed, but parses, passes the checker and loads in onnxruntime")


def write_readme(path: Path, corpus: Dict[str, tuple], verdicts: Dict[str, str]) -> None:
    lines = [
        "# Malformed ONNX corpus",
        "",
        "Generated by `scripts/corpus/make_test_models.py` (deterministic; do not edit by hand).",
        "rlflow must reject every file here with one clear error line and exit code 3 —",
        "never crash, hang, or allocate unbounded memory.",
        "",
        "| file | what is wrong | onnx 1.16 / onnxruntime 1.19 say |",
        "| --- | --- | --- |",
    ]
    for name, (_, desc) in corpus.items():
        lines.append(f"| `{name}` | {desc} | {verdicts[name]} |")
    # The fuzz/ section is written by hand (crash findings kept as regression tests): keep it.
    kept = ""
    if path.exists():
        old = path.read_text()
        at = old.find("\n## fuzz/")
        if at >= 0:
            kept = old[at:]
    path.write_text("\n".join(lines) + "\n" + kept)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="output folder (default: tests/data)")
    ap.add_argument("--no-ort", action="store_true", help="skip the onnxruntime smoke run")
    args = ap.parse_args(argv)

    out = args.out_dir
    bad_dir = out / "malformed"
    bad_dir.mkdir(parents=True, exist_ok=True)
    failed = 0

    for name, build in VALID.items():
        path = out / f"{name}.onnx"
        try:
            model = build()
            onnx.checker.check_model(model, full_check=True)
            data = model.SerializeToString()
            if len(data) > MAX_BYTES:
                raise RuntimeError(f"{len(data)} bytes exceeds the {MAX_BYTES} byte fixture limit")
            shapes = "-" if args.no_ort else ort_smoke(model, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            ops = sorted({n.op_type for n in model.graph.node})
            print(f"{name + '.onnx':28s} {len(data):7d} B  opset {model.opset_import[0].version:2d}  "
                  f"ir {model.ir_version}  out {shapes:14s} {' '.join(ops)}")
        except Exception as e:
            print(f"FAIL {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
            failed += 1

    corpus = malformed_corpus()
    verdicts = {}
    for name, (data, _) in corpus.items():
        try:
            verdicts[name] = expect_unloadable_or_invalid(name, data)
        except Exception as e:
            print(f"FAIL malformed/{name}: {e}", file=sys.stderr)
            failed += 1
            verdicts[name] = "UNEXPECTEDLY VALID"
        (bad_dir / name).write_bytes(data)
        print(f"{'malformed/' + name:38s} {len(data):5d} B  {verdicts[name]}")
    write_readme(bad_dir / "README.md", corpus, verdicts)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
