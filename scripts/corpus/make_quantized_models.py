#!/usr/bin/env python3
"""Write the quantized fixtures in tests/data/quantized/, the way users make them.

    make_quantized_models.py [--out DIR]

Each is a real architecture built with seeded random weights, exported with torch.onnx.export
(dynamic batch, and sequence for the encoder) and quantized with onnxruntime.quantization:

  qdq_mobilenet_s8.onnx   torchvision's MobileNetV2 (width 0.25, 10 classes, 32x32 input),
                          quantize_static, QDQ format, int8 activations and weights
  qdq_mobilenet_u8.onnx   the same, uint8 activations and weights
  qdq_bert_s8.onnx        a one-layer HuggingFace BERT encoder (hidden 32, 2 heads),
                          quantize_static, QDQ format, int8
  dyn_bert.onnx           the same encoder, quantize_dynamic (MatMulInteger, DynamicQuantizeLinear)

Calibration reads 8 seeded random batches. The files are checked with onnx.checker and run in
onnxruntime before they are written. scripts/test checks rlflow's outputs of them in onnxruntime
at every binding (scripts/checks/check_sizes.py): a de-quantized weight or a rewrite across a
quantization op moves the outputs by whole quantization steps, far past the check's tolerance.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
ort.set_default_logger_severity(3)
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "tests" / "data" / "quantized"
OPSET = 17


class Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def export_mobilenet(path: Path) -> list:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10).eval()
    x = torch.randn(1, 3, 32, 32)
    torch.onnx.export(model, (x,), str(path), input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}}, opset_version=OPSET)
    rng = np.random.default_rng(1)
    return [{"pixels": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)} for _ in range(8)]


def export_bert(path: Path) -> list:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=256, attn_implementation="eager")
    model = BertModel(cfg, add_pooling_layer=False).eval()
    ids = torch.randint(0, 64, (1, 8))
    mask = torch.ones(1, 8, dtype=torch.int64)
    types = torch.zeros(1, 8, dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    # token_type_ids as an input, as optimum exports BERT (without it, torch 1.13's export expands a
    # buffer to a size computed at run time, an opaque Expand rlflow cannot type yet: issue 57).
    torch.onnx.export(model, (ids, mask, types), str(path), opset_version=OPSET,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                    "last_hidden_state": axes})
    rng = np.random.default_rng(1)
    return [{"input_ids": rng.integers(0, 64, (2, 8)).astype(np.int64), "attention_mask": np.ones((2, 8), np.int64),
             "token_type_ids": np.zeros((2, 8), np.int64)} for _ in range(8)]


def check(path: Path, feeds: dict) -> None:
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    out = sess.run(None, feeds)
    if not all(np.isfinite(o).all() for o in out):
        raise SystemExit(f"{path.name}: onnxruntime gives non-finite outputs")


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cnn, bert = tmp / "mobilenet.onnx", tmp / "bert.onnx"
        cnn_feeds, bert_feeds = export_mobilenet(cnn), export_bert(bert)
        jobs = [
            ("qdq_mobilenet_s8.onnx", cnn, cnn_feeds, QuantType.QInt8),
            ("qdq_mobilenet_u8.onnx", cnn, cnn_feeds, QuantType.QUInt8),
            ("qdq_bert_s8.onnx", bert, bert_feeds, QuantType.QInt8),
        ]
        for name, src, feeds, qtype in jobs:
            out = args.out / name
            quantize_static(str(src), str(out), Reader(feeds), quant_format=QuantFormat.QDQ,
                            activation_type=qtype, weight_type=qtype)
            check(out, feeds[0])
            print(f"wrote {out} ({out.stat().st_size} bytes)")
        out = args.out / "dyn_bert.onnx"
        quantize_dynamic(str(bert), str(out), weight_type=QuantType.QInt8)
        check(out, bert_feeds[0])
        print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
