#!/usr/bin/env python3
"""Export the rlflow model zoo to ONNX with random, seeded weights.

Every model is exported in eval mode with static shapes and batch size 1 into
models/<name>.onnx. Weights are random (no model hub is ever contacted); the
seed makes a re-export byte-for-byte reproducible on the same torch build.

    scripts/corpus/export_models                 # every model not yet exported
    scripts/corpus/export_models resnet18 bert_base --force
    scripts/corpus/export_models --list
"""
from __future__ import annotations

import argparse
import collections
import importlib
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "models"


@dataclass(frozen=True)
class ZooEntry:
    build: Callable[[], object]  # returns a torch.nn.Module; torch is imported lazily
    input_name: str
    input_shape: Tuple[int, ...]
    opset: int
    output_name: str = "output"


# --------------------------------------------------------------------------- BERT


def _bert_classes():
    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        """Multi-head self-attention written with explicit MatMul/Softmax.

        Head split/merge use Python ints (not tensor.size()) so the exported
        graph has constant Reshape shapes instead of Shape/Gather chains.
        """

        def __init__(self, seq: int, hidden: int, heads: int):
            super().__init__()
            self.seq, self.hidden, self.heads = seq, hidden, heads
            self.head_dim = hidden // heads
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.output = nn.Linear(hidden, hidden)
            self.scale = math.sqrt(self.head_dim)

        def _split(self, t):
            # [1, S, H] -> [1, heads, S, head_dim]
            return t.reshape(1, self.seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x):
            q = self._split(self.query(x))
            k = self._split(self.key(x))
            v = self._split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
            probs = torch.softmax(scores, dim=-1)
            ctx = torch.matmul(probs, v)  # [1, heads, S, head_dim]
            ctx = ctx.permute(0, 2, 1, 3).reshape(1, self.seq, self.hidden)
            return self.output(ctx)

    class EncoderLayer(nn.Module):
        """Post-LayerNorm BERT layer: LN(x + Attn(x)), then LN(h + FFN(h))."""

        def __init__(self, seq: int, hidden: int, heads: int, ffn: int, dropout: float):
            super().__init__()
            self.attention = SelfAttention(seq, hidden, heads)
            self.attn_dropout = nn.Dropout(dropout)
            self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.gelu = nn.GELU(approximate="none")  # exact erf GELU
            self.ffn_out = nn.Linear(ffn, hidden)
            self.ffn_dropout = nn.Dropout(dropout)
            self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x):
            h = self.attn_norm(x + self.attn_dropout(self.attention(x)))
            f = self.ffn_out(self.gelu(self.ffn_in(h)))
            return self.ffn_norm(h + self.ffn_dropout(f))

    class BertEncoder(nn.Module):
        def __init__(self, layers=12, seq=128, hidden=768, heads=12, ffn=3072, dropout=0.1):
            super().__init__()
            self.layers = nn.ModuleList(
                [EncoderLayer(seq, hidden, heads, ffn, dropout) for _ in range(layers)]
            )
            for m in self.modules():
                # BERT's initialiser: N(0, 0.02) weights. Small random biases and
                # LayerNorm affine parameters so that no tensor is trivially 0/1.
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
                    nn.init.normal_(m.bias, std=0.02)
                elif isinstance(m, nn.LayerNorm):
                    nn.init.normal_(m.weight, mean=1.0, std=0.05)
                    nn.init.normal_(m.bias, std=0.05)

        def forward(self, hidden_states):
            for layer in self.layers:
                hidden_states = layer(hidden_states)
            return hidden_states

    return BertEncoder


def build_bert_base():
    return _bert_classes()()


# ------------------------------------------------------- standard transformer exports


def build_transformer_encoder(layers: int = 6):
    """torch.nn.TransformerEncoder as users export it: post-norm layers with the packed
    in-projection of nn.MultiheadAttention, GELU feed-forward, exported at opset 13, so
    LayerNorm and GELU appear decomposed into elementwise ops."""
    from torch import nn

    layer = nn.TransformerEncoderLayer(
        d_model=512, nhead=8, dim_feedforward=2048, dropout=0.1, activation="gelu", batch_first=True, norm_first=False
    )
    return nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)


def build_gpt_block(layers: int = 4):
    """A GPT-2-style decoder: pre-norm blocks, one packed Q/K/V projection split three ways,
    a causal mask, tanh-approximated GELU, 4 blocks of width 768 over 128 tokens."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, seq: int, hidden: int, heads: int):
            super().__init__()
            self.seq, self.hidden, self.heads, self.head_dim = seq, hidden, heads, hidden // heads
            self.ln1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.act = nn.GELU(approximate="tanh")
            self.out = nn.Linear(4 * hidden, hidden)
            mask = torch.full((seq, seq), float("-inf")).triu(1)
            self.register_buffer("mask", mask.reshape(1, 1, seq, seq))

        def _heads(self, t):
            return t.reshape(1, self.seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(self.hidden, dim=2)
            q, k, v = self._heads(q), self._heads(k), self._heads(v)
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + self.mask
            ctx = torch.matmul(torch.softmax(att, dim=-1), v).permute(0, 2, 1, 3).reshape(1, self.seq, self.hidden)
            x = x + self.proj(ctx)
            return x + self.out(self.act(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self, layers=4, seq=128, hidden=768, heads=12):
            super().__init__()
            self.blocks = nn.ModuleList([Block(seq, hidden, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(hidden)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
                    nn.init.normal_(m.bias, std=0.02)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.ln_f(x)

    return Gpt(layers=layers)


# --------------------------------------------------------------------- torchvision


def _tv(name: str, **kwargs):
    def build():
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None, **kwargs)

    return build


ZOO: Dict[str, ZooEntry] = {
    "resnet18": ZooEntry(_tv("resnet18"), "input", (1, 3, 224, 224), 13),
    "resnet50": ZooEntry(_tv("resnet50"), "input", (1, 3, 224, 224), 13),
    # aux_logits=False: the auxiliary head only runs in training mode, so it
    # would never reach the exported graph; skipping it saves init time.
    # init_weights=True silences torchvision's FutureWarning about the default.
    "inception_v3": ZooEntry(
        _tv("inception_v3", aux_logits=False, init_weights=True), "input", (1, 3, 299, 299), 13
    ),
    "squeezenet1_1": ZooEntry(_tv("squeezenet1_1"), "input", (1, 3, 224, 224), 13),
    # HardSwish and HardSigmoid (squeeze-excitation); at opset 13 HardSwish is x * HardSigmoid(x).
    "mobilenet_v3_small": ZooEntry(_tv("mobilenet_v3_small"), "input", (1, 3, 224, 224), 13),
    "vit_b_16": ZooEntry(_tv("vit_b_16"), "input", (1, 3, 224, 224), 17),
    "bert_base": ZooEntry(build_bert_base, "hidden_states", (1, 128, 768), 17),
    "transformer_encoder": ZooEntry(build_transformer_encoder, "src", (1, 128, 512), 13),
    "gpt_block": ZooEntry(build_gpt_block, "hidden_states", (1, 128, 768), 13),
}


# Half-precision members: a float32 export converted by scripts/corpus/half_precision.py.
HALF: Dict[str, Tuple[str, str]] = {
    "resnet18_fp16": ("resnet18", "float16"),
    "transformer_encoder_fp16": ("transformer_encoder", "float16"),
}


# ------------------------------------------------------------------------- export


def randomise_degenerate_params(model, gen) -> None:
    """Replace all-zero weights (e.g. ViT's classifier head, class token,
    attention biases) with N(0, 0.02) noise: a zero head makes every output
    identical, which would make numerical verification of rewrites meaningless."""
    import torch
    from torch import nn

    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.numel() > 1 and not torch.any(p != 0):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        # LayerNorm starts at gamma=1, beta=0 everywhere. Identical initialisers
        # are deduplicated by torch's exporter into Identity nodes, and a unit
        # gamma hides mistakes in LayerNorm rewrites.
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.copy_(1.0 + 0.05 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=gen))


def calibrate_batchnorm(model, shape, gen) -> None:
    """Give BatchNorm layers realistic running statistics.

    Fresh BN layers have mean 0 / var 1, so folding them is a no-op and deep
    random CNNs blow activations up by orders of magnitude. One training-mode
    forward pass on seeded noise (cumulative averaging, momentum=None) sets the
    statistics so activations stay O(1); affine parameters get mild noise.
    """
    import torch
    from torch import nn

    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    with torch.no_grad():
        for bn in bns:
            bn.reset_running_stats()
            bn.momentum = None
            bn.weight.copy_(1.0 + 0.1 * torch.randn(bn.weight.shape, generator=gen))
            bn.bias.copy_(0.1 * torch.randn(bn.bias.shape, generator=gen))
        model.train()
        batch = (2,) + tuple(shape[1:])
        model(torch.randn(batch, generator=gen))
        model.eval()


def op_histogram(model) -> "collections.Counter[str]":
    hist: "collections.Counter[str]" = collections.Counter()

    def walk(graph):
        for node in graph.node:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            hist[key] += 1
            for attr in node.attribute:
                if attr.g.node:
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(model.graph)
    return hist


def format_histogram(hist) -> str:
    return " ".join(f"{op}:{n}" for op, n in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def export_one(name: str, entry: ZooEntry, out_dir: Path, seed: int, keep_bn: bool) -> Path:
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = entry.build()
    randomise_degenerate_params(model, gen)
    calibrate_batchnorm(model, entry.input_shape, gen)
    model.eval()
    dummy = torch.randn(entry.input_shape, generator=gen)

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    tmp = path.with_suffix(".onnx.tmp")
    # PRESERVE keeps BatchNormalization nodes (the model is in eval mode, so
    # they are exported in inference form); EVAL lets torch fold BN into Conv.
    training = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    # Gradients must stay enabled: under no_grad torch 1.13 routes eval-mode
    # nn.MultiheadAttention / TransformerEncoderLayer to a fused fast-path kernel
    # that has no ONNX symbolic.
    try:
        # Tracer warnings (Python asserts on shapes, etc.) are expected with static shapes.
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                (dummy,),
                str(tmp),
                export_params=True,
                opset_version=entry.opset,
                do_constant_folding=True,
                input_names=[entry.input_name],
                output_names=[entry.output_name],
                training=training,
            )
        os.replace(tmp, path)  # never leave a half-written models/<name>.onnx behind
    finally:
        tmp.unlink(missing_ok=True)
    return path


def convert_half(name: str, out_dir: Path) -> Path:
    """models/<name>.onnx from its float32 base (exported first if missing), converted to half."""
    import onnx

    from half_precision import convert

    base, dtype = HALF[name]
    src = out_dir / f"{base}.onnx"
    path = out_dir / f"{name}.onnx"
    tmp = path.with_suffix(".onnx.tmp")
    try:
        onnx.save(convert(onnx.load(str(src)), dtype), str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def check_and_describe(path: Path) -> Tuple[float, "collections.Counter[str]"]:
    import onnx

    # Checking by path works for models above protobuf's 2 GB in-memory limit too.
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path), load_external_data=False)
    return path.stat().st_size / 1e6, op_histogram(model)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models to export (default: all of {', '.join(ZOO)})")
    ap.add_argument("--list", action="store_true", help="list the zoo and exit")
    ap.add_argument("--force", action="store_true", help="re-export models that already exist")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="output folder (default: models/)")
    ap.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1),
                    help="torch threads (default: $OMP_NUM_THREADS or 1)")
    ap.add_argument("--keep-bn", action="store_true",
                    help="keep BatchNormalization nodes instead of letting torch fold them into Conv")
    args = ap.parse_args(argv)

    if args.list:
        for name, e in ZOO.items():
            shape = "x".join(map(str, e.input_shape))
            print(f"{name:14s} opset {e.opset:2d}  {e.input_name}[{shape}]")
        for name, (base, dtype) in HALF.items():
            print(f"{name:14s} {base} converted to {dtype}")
        return 0

    known = list(ZOO) + list(HALF)
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"error: unknown model(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    names = args.names or known
    # A half model needs its float32 base exported first.
    for n in list(names):
        if n in HALF and HALF[n][0] not in names and not (args.out_dir / f"{HALF[n][0]}.onnx").exists():
            names.insert(names.index(n), HALF[n][0])

    try:
        # onnx must be imported before torch: Debian's libtorch links its own
        # libonnx, and once torch has registered that older onnx.proto in the
        # shared protobuf pool, the onnx wheel fails to import.
        importlib.import_module("onnx")
        import torch
    except ImportError as e:
        print(f"error: {e}; run scripts/setup/setup first", file=sys.stderr)
        return 3
    torch.set_num_threads(max(1, args.threads))

    failed = 0
    for name in names:
        path = args.out_dir / f"{name}.onnx"
        t0 = time.perf_counter()
        if path.exists() and not args.force:
            status = "exists"
        else:
            try:
                if name in HALF:
                    convert_half(name, args.out_dir)
                    status = "converted"
                else:
                    export_one(name, ZOO[name], args.out_dir, args.seed, args.keep_bn)
                    status = "exported"
            except Exception as e:  # export errors come from deep inside torch; one line is enough
                print(f"FAIL {name}: export failed: {type(e).__name__}: {e}", file=sys.stderr)
                failed += 1
                continue
        try:
            mb, hist = check_and_describe(path)
        except Exception as e:
            print(f"FAIL {name}: onnx checker: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
            failed += 1
            continue
        dt = time.perf_counter() - t0
        print(f"{name:14s} {status:8s} {mb:8.1f} MB {dt:6.1f} s  nodes={sum(hist.values())}  {format_histogram(hist)}",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
