#!/usr/bin/env python3
"""Convert a float32 ONNX model to float16 or bfloat16.

    half_precision.py IN.onnx OUT.onnx [--dtype float16|bfloat16]

Every float32 tensor of the model becomes the target type: initializers, Constant and
ConstantOfShape values, graph inputs and outputs, and Cast targets. Pow exponents stay
float32 (ONNX types them separately, and bfloat16 exponents need opset 15). Computation inside
the model is then half precision end to end, as a model deployed on a GPU is. Stale
value_info is dropped (shapes are re-inferred by whoever loads the model). The result
passes onnx.checker. Also importable: convert(model, dtype) -> ModelProto.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

FLOAT = 1  # onnx.TensorProto.FLOAT


def _bfloat16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even; NaN stays NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def _convert_tensor(t, target: int) -> None:
    """A float32 TensorProto converted in place to `target` (FLOAT16 or BFLOAT16)."""
    from onnx import TensorProto, numpy_helper

    if t.data_type != FLOAT:
        return
    a = numpy_helper.to_array(t).astype(np.float32)
    name = t.name
    if target == TensorProto.FLOAT16:
        new = numpy_helper.from_array(a.astype(np.float16), name)
    else:
        new = TensorProto()
        new.name = name
        new.data_type = TensorProto.BFLOAT16
        new.dims.extend(a.shape)
        new.raw_data = _bfloat16_bits(a).tobytes()
    t.CopyFrom(new)


def _convert_graph(graph, target: int) -> None:
    from onnx import AttributeProto, helper

    # Pow's exponent has its own type (T1), which excludes bfloat16 before opset 15: it stays float32.
    exponents = {n.input[1] for n in graph.node if n.op_type == "Pow" and len(n.input) > 1}
    for t in graph.initializer:
        if t.name not in exponents:
            _convert_tensor(t, target)
    for vi in list(graph.input) + list(graph.output):
        if vi.type.tensor_type.elem_type == FLOAT:
            vi.type.tensor_type.elem_type = target
    del graph.value_info[:]
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] in exponents:
            continue
        for a in node.attribute:
            if a.type == AttributeProto.TENSOR:
                _convert_tensor(a.t, target)
            elif a.type == AttributeProto.GRAPH:
                _convert_graph(a.g, target)
            elif a.type == AttributeProto.GRAPHS:
                for g in a.graphs:
                    _convert_graph(g, target)
        if node.op_type == "Cast":
            for a in node.attribute:
                if a.name == "to" and a.i == FLOAT:
                    a.i = target
        if node.op_type == "Constant":
            # value_float(s) attributes are float32 by definition: rewrite them as tensors.
            for a in list(node.attribute):
                if a.name in ("value_float", "value_floats"):
                    vals = [a.f] if a.name == "value_float" else list(a.floats)
                    shape = [] if a.name == "value_float" else [len(vals)]
                    t = helper.make_tensor("value", FLOAT, shape, vals)
                    _convert_tensor(t, target)
                    node.attribute.remove(a)
                    node.attribute.append(helper.make_attribute("value", t))


def convert(model, dtype: str = "float16"):
    """A copy of `model` computing in `dtype` ('float16' or 'bfloat16')."""
    from onnx import ModelProto, TensorProto

    targets = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
    if dtype not in targets:
        raise ValueError(f"dtype must be one of {', '.join(targets)}, got {dtype}")
    out = ModelProto()
    out.CopyFrom(model)
    _convert_graph(out.graph, targets[dtype])
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    args = ap.parse_args(argv)
    import onnx

    model = convert(onnx.load(args.input), args.dtype)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
