#!/usr/bin/env python3
"""Property test: random graphs with symbolic batch and sequence dims, optimised by rlflow, must
equal their inputs in onnxruntime at random bindings.

    property_sizes.py [--graphs 24] [--bindings 4] [--seed 0] [--rlflow BIN] [--config "--target h100 --deterministic"]

Each graph takes x[batch, sequence, D] through a random chain of 3 to 8 blocks, the shapes that
exporters write around linear layers and attention: MatMul with and without a bias (3-D, so the
Gemm rewrites fire), head splits written with 0 and with the input's Shape, Transpose pairs,
Softmax, Concat and Split on the feature axis, residual Adds, and a flatten to (-1, D) read back
through Shape(x). rlflow optimises each (by default for the recorded H100 cost, deterministic,
where the most rewrites apply), and the output must run in onnxruntime and match the input (atol
1e-4, rtol 1e-3) at batch 1 / sequence 1, at batch 3 / sequence 37 and at random bindings (batch
1-5, sequence 1-40), and keep its symbolic input dims. The graphs and bindings come from --seed.

Prints one line per graph and `property: N passed, M failed`; exits 1 on any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from check_ort import _exceeds, session  # noqa: E402

ATOL, RTOL = 1e-4, 1e-3


class Gen:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.k = 0

    def name(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def const(self, value, base="c") -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, shape) -> str:
        return self.const((self.rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), "w")

    def op(self, op: str, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def shape_of(self, t: str, start: int, end: int) -> str:
        s = self.op("Shape", [t])
        return self.op("Slice", [s, self.const(np.array([start], np.int64)), self.const(np.array([end], np.int64)),
                                 self.const(np.array([0], np.int64))])


def block(g: Gen, t: str, d: int, x: str):
    """One random block on t[batch, sequence, d]; returns (new tensor, new d)."""
    r = g.rng
    kind = r.choice(["linear", "linear_bias", "heads0", "heads_shape", "transpose", "softmax", "concat", "split", "residual", "flatten"])
    if kind in ("linear", "linear_bias"):
        d2 = int(r.choice([8, 16, 24]))
        y = g.op("MatMul", [t, g.weight([d, d2])])
        if kind == "linear_bias":
            y = g.op("Add", [y, g.const((r.standard_normal(d2) * 0.1).astype(np.float32), "b")])
        return y, d2
    if kind in ("heads0", "heads_shape") and d % 2 == 0:
        h = 2 if d % 4 else int(r.choice([2, 4]))
        if kind == "heads0":
            y = g.op("Reshape", [t, g.const(np.array([0, 0, h, d // h], np.int64))])
        else:
            y = g.op("Reshape", [t, g.op("Concat", [g.shape_of(t, 0, 2), g.const(np.array([h, d // h], np.int64))], axis=0)])
        y = g.op("Transpose", [y], perm=[0, 2, 1, 3])  # (b, h, s, d/h)
        y = g.op("Softmax", [y], axis=-1)
        y = g.op("Transpose", [y], perm=[0, 2, 1, 3])
        y = g.op("Reshape", [y, g.const(np.array([0, 0, d], np.int64))])
        return y, d
    if kind == "transpose":
        y = g.op("Transpose", [t], perm=[0, 2, 1])
        y = g.op("Relu", [y])
        return g.op("Transpose", [y], perm=[0, 2, 1]), d
    if kind == "softmax":
        return g.op("Softmax", [t], axis=-1), d
    if kind == "concat":
        return g.op("Concat", [t, g.op("Tanh", [t])], axis=-1), 2 * d
    if kind == "split" and d % 2 == 0:
        a, b = g.name("split_a"), g.name("split_b")
        g.nodes.append(helper.make_node("Split", [t, g.const(np.array([d // 2, d // 2], np.int64))], [a, b], name=a, axis=-1))
        return g.op("Mul", [a, g.op("Sigmoid", [b])]), d // 2
    if kind == "residual":
        y = g.op("MatMul", [t, g.weight([d, d])])
        return g.op("Add", [t, y]), d
    # flatten to (batch * sequence, d), a 2-D MatMul, and back through the input's (batch, sequence)
    y = g.op("Reshape", [t, g.const(np.array([-1, d], np.int64))])
    d2 = int(r.choice([8, 16]))
    y = g.op("MatMul", [y, g.weight([d, d2])])
    back = g.op("Concat", [g.shape_of(x, 0, 2), g.const(np.array([d2], np.int64))], axis=0)
    return g.op("Reshape", [y, back]), d2


def random_model(seed: int) -> onnx.ModelProto:
    g = Gen(np.random.default_rng(seed))
    d = d0 = int(g.rng.choice([8, 16, 24]))
    t = "x"
    for _ in range(int(g.rng.integers(3, 9))):
        t, d = block(g, t, d, "x")
    g.nodes.append(helper.make_node("Identity", [t], ["y"], name="out"))
    graph = helper.make_graph(g.nodes, f"property_{seed}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", d0])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", d])], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="rlflow/scripts/property_sizes.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=24)
    ap.add_argument("--bindings", type=int, default=4, help="random bindings per graph, besides 1x1 and 3x37")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN", str(HERE.parents[1] / "build" / "rlflow")))
    ap.add_argument("--config", default="--target h100 --deterministic")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    passed = failed = checked = rewritten = 0
    with tempfile.TemporaryDirectory(prefix="rlflow-property-") as tmp:
        for k in range(args.graphs):
            seed = args.seed * 1000 + k
            model = random_model(seed)
            src, out = Path(tmp) / f"g{seed}.onnx", Path(tmp) / f"g{seed}.opt.onnx"
            onnx.save(model, src)
            r = subprocess.run([args.rlflow, "optimise", str(src), "-o", str(out), *args.config.split(), "-q", "--json"],
                               capture_output=True, text=True, timeout=600)
            try:
                steps = len(json.loads(r.stdout).get("steps") or [])
            except (json.JSONDecodeError, AttributeError):
                steps = 0
            problems = []
            if r.returncode != 0 or not out.exists():
                problems.append(f"rlflow exited {r.returncode}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}")
            else:
                written = onnx.load(str(out))
                if [d.dim_param for d in written.graph.input[0].type.tensor_type.shape.dim][:2] != ["batch", "sequence"]:
                    problems.append("symbolic input dims lost")
                rewritten += steps > 0
                s_in, s_out = session(str(src)), session(str(out))
                d = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
                sizes = [(1, 1), (3, 37)] + [(int(rng.integers(1, 6)), int(rng.integers(1, 41))) for _ in range(args.bindings)]
                for b, s in sizes:
                    x = np.random.default_rng(seed + b * 100 + s).standard_normal((b, s, d)).astype(np.float32)
                    try:
                        ref, got = s_in.run(None, {"x": x})[0], s_out.run(None, {"x": x})[0]
                        if ref.shape != got.shape or _exceeds(ref, got, ATOL, RTOL):
                            problems.append(f"batch {b} sequence {s}: outputs differ")
                    except Exception as e:  # onnxruntime refused the written file at this size
                        problems.append(f"batch {b} sequence {s}: {str(e).strip().splitlines()[0][:200]}")
                    checked += 1
            ops = " ".join(sorted({n.op_type for n in model.graph.node}))
            print(f"{'OK  ' if not problems else 'FAIL'} graph {seed:<5} {len(model.graph.node):3d} nodes {steps:2d} rewrites  {ops}"
                  + ("" if not problems else "  " + "; ".join(problems[:3])), flush=True)
            if problems:
                failed += 1
            else:
                passed += 1
    print(f"{args.graphs} graphs, {checked} bindings checked in onnxruntime, {rewritten} written with rewrites")
    print(f"property: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
