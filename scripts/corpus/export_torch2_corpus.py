#!/usr/bin/env python3
"""Export a corpus of models with a current PyTorch 2.x, with both of its ONNX exporters.

    export_torch2_corpus.py [--out-dir models/torch2] [--names N ...] [--exporters dynamo torchscript]

Runs in its own venv (scripts/corpus/torch2_corpus makes it: torch from PyPI, onnx,
onnxscript), apart from the project's venv, whose torch is the one the zoo is exported with.
Each model is written as <name>.<exporter>.onnx:
  dynamo20       torch.onnx.export(..., dynamo=True) at opset 20 (Gelu is an ONNX op from 20)
  dynamo21       the same at opset 21
  torchscript17  torch.onnx.export(..., dynamo=False) at opset 17
The models are generated, never committed. One line per model: name, exporter, opset, ops.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _models():
    import torch
    from torch import nn

    class GeluMlp(nn.Module):
        """Both GELU forms (exact and tanh) between two Linear layers."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(64, 256)
            self.b = nn.Linear(256, 64)
            self.exact = nn.GELU()
            self.tanh = nn.GELU(approximate="tanh")

        def forward(self, x):
            return self.b(self.tanh(self.a(x))) + self.exact(x)

    class HardMix(nn.Module):
        """Conv with HardSwish and a HardSigmoid gate, as MobileNetV3 blocks have."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3, padding=1)
            self.act = nn.Hardswish()
            self.gate = nn.Hardsigmoid()

        def forward(self, x):
            y = self.act(self.conv(x))
            return y * self.gate(y.mean(dim=(2, 3), keepdim=True))

    def encoder():
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def tv(name):
        def build():
            import torchvision.models as tvm

            return getattr(tvm, name)(weights=None)

        return build

    return {
        "gelu_mlp": (GeluMlp, (1, 16, 64)),
        "hard_mix": (HardMix, (1, 8, 16, 16)),
        "transformer_encoder": (encoder, (1, 32, 128)),
        "resnet18": (tv("resnet18"), (1, 3, 224, 224)),
        "mobilenet_v3_small": (tv("mobilenet_v3_small"), (1, 3, 224, 224)),
        "vit_b_16": (tv("vit_b_16"), (1, 3, 224, 224)),
    }


# name -> (dynamo exporter?, opset)
EXPORTERS = {"dynamo20": (True, 20), "dynamo21": (True, 21), "torchscript17": (False, 17)}


def export(name: str, build, shape, exporter: str, out_dir: Path) -> Path:
    import torch

    torch.manual_seed(0)
    model = build().eval()
    x = torch.randn(shape)
    path = out_dir / f"{name}.{exporter}.onnx"
    tmp = path.with_suffix(".tmp")
    # The TorchScript exporter runs with gradients on: under no_grad, eval-mode attention takes a
    # fused fast path (aten::_native_multi_head_attention) that has no ONNX symbolic.
    dynamo, opset = EXPORTERS[exporter]
    grad = torch.no_grad() if dynamo else torch.enable_grad()
    with warnings.catch_warnings(), grad:
        warnings.simplefilter("ignore")
        kwargs = dict(input_names=["input"], output_names=["output"], opset_version=opset)
        if dynamo:
            prog = torch.onnx.export(model, (x,), dynamo=True, external_data=False, verbose=False, **kwargs)
            prog.save(str(tmp))
        else:
            torch.onnx.export(model, (x,), str(tmp), dynamo=False, do_constant_folding=True, **kwargs)
    os.replace(tmp, path)
    return path


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "models" / "torch2")
    models = _models()
    ap.add_argument("--names", nargs="*", default=list(models), help=f"default: {' '.join(models)}")
    ap.add_argument("--exporters", nargs="*", default=list(EXPORTERS), choices=list(EXPORTERS))
    ap.add_argument("--force", action="store_true", help="re-export models that exist")
    args = ap.parse_args(argv)
    import onnx
    import torch

    torch.set_num_threads(1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, onnx {onnx.__version__}", flush=True)
    failed = 0
    for name in args.names:
        build, shape = models[name]
        for exporter in args.exporters:
            path = args.out_dir / f"{name}.{exporter}.onnx"
            t0 = time.perf_counter()
            try:
                if args.force or not path.exists():
                    export(name, build, shape, exporter, args.out_dir)
                m = onnx.load(str(path), load_external_data=False)
                onnx.checker.check_model(str(path), full_check=True)
            except Exception as e:  # one line: exporter errors come from deep inside torch
                print(f"FAIL {name}.{exporter}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
                failed += 1
                continue
            opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            ops = collections.Counter(n.op_type for n in m.graph.node)
            hist = " ".join(f"{k}:{v}" for k, v in ops.most_common())
            print(f"{path.name:36s} opset {opset}  {time.perf_counter() - t0:5.1f} s  {hist}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
