#!/usr/bin/env python3
"""Export small HuggingFace decoders with torch's default (dynamo) exporter: the committed fixtures
of tests/data/decoders, which CI checks at every size without this script's venv.

    export_decoders.py [--out-dir tests/data/decoders] [--names llama ...] [--force]
                       [--size tiny|medium] [--variants 20 past20 23 past23]

Runs in the torch 2.x venv (scripts/corpus/torch2_corpus makes it; requirements-torch2.txt pins torch,
onnx, onnxscript and transformers). Each family is built from its transformers config class with
random weights (seed 0) and a tiny size, so each file is about 100 KiB (the exporter's per-node
debug records are dropped), and written three ways:

  <name>.dynamo20.onnx       torch.onnx.export(..., dynamo=True), opset 20 (the exporter's default
                             opset in late 2026), inputs input_ids and attention_mask over
                             (batch_size, sequence_length), logits out: a prefill without a cache
  <name>_past.dynamo20.onnx  the same with a KV cache, as optimum's with-past decoders take it:
                             input_ids, attention_mask, position_ids and past_key_values.N.key/value
                             (batch_size, kv heads, past_sequence_length, head dim) in; logits and
                             present.N.key/value out
  <name>.dynamo23.onnx       the exporter at opset 23, where its own fusions (onnxscript's) write
                             RMSNormalization, RotaryEmbedding and Attention
  <name>_past.dynamo23.onnx  the with-past one at opset 23 (not a fixture: --variants past23)

--size medium (hidden 512, 8 heads of 64 over 2 kv heads, 4 layers; about 50 MB a file, never
committed) is for measuring (docs/sizes.md).

--others writes the other families the dynamo exporter's fixtures cover into tests/data/sizes
instead: an encoder-decoder (BART: input_ids and attention_mask over (batch_size,
encoder_sequence_length), decoder_input_ids over (batch_size, decoder_sequence_length)), a vision
transformer with window attention (Swin, batch_size dynamic) and a mobile CNN (torchvision's
MobileNetV2 at width 0.25, batch_size dynamic), each at opset 20.

torch.export names the mask's length an independent dim; the with-past files name it
"past_sequence_length + sequence_length", which is what it is (optimum writes the same), so that a
tool binding the dims can bind it. Prints one line per file: name, opset, size, op histogram.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# name -> (config class, its arguments). Every family has RMSNorm, rotary embeddings and grouped
# query attention (4 query heads over 2 kv heads, head dim 8); qwen2 adds q/k/v biases and ties its
# embedding to the LM head, gemma scales the embedding, normalises with (1 + w) and gates with
# tanh-GELU.
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256)
FAMILIES = {
    "llama": ("LlamaConfig", {}),
    "mistral": ("MistralConfig", dict(sliding_window=None)),
    "qwen2": ("Qwen2Config", dict(tie_word_embeddings=True)),
    "gemma": ("GemmaConfig", dict(head_dim=8, hidden_activation="gelu_pytorch_tanh")),
}
MEDIUM = dict(vocab_size=2048, hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
              num_key_value_heads=2, max_position_embeddings=2048)
SIZES = {"tiny": COMMON, "medium": MEDIUM}
VARIANTS = {"20": ("", 20), "past20": ("_past", 20), "23": ("", 23), "past23": ("_past", 23)}


def build(name: str, size: str):
    import torch
    import transformers

    cls, extra = FAMILIES[name]
    extra = dict(extra)
    if "head_dim" in extra:
        extra["head_dim"] = SIZES[size]["hidden_size"] // SIZES[size]["num_attention_heads"]
    config = getattr(transformers, cls)(**SIZES[size], **extra)
    config._attn_implementation = "sdpa"  # transformers' default; the exporter decomposes it
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    return config, model


def export(name: str, size: str, variant: str, path: Path) -> None:
    import torch
    import transformers

    config, model = build(name, size)
    layers, kv_heads = config.num_hidden_layers, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    B, S, P = 2, 3, 5  # traced sizes: no 1, no two alike, so none is baked in unnoticed
    batch, seq, past = (torch.export.Dim(n) for n in ("batch_size", "sequence_length", "past_sequence_length"))
    ids = torch.randint(0, config.vocab_size, (B, S))
    with_past, opset = VARIANTS[variant][0] == "_past", VARIANTS[variant][1]
    if with_past:

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask, position_ids, *past_kv):
                cache = transformers.DynamicCache(config=config)
                for i in range(layers):
                    cache.update(past_kv[2 * i], past_kv[2 * i + 1], i)
                res = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
                out = [res.logits]
                for layer in res.past_key_values.layers[:layers]:
                    out += [layer.keys, layer.values]
                return tuple(out)

        pasts = [torch.randn(B, kv_heads, P, head_dim) for _ in range(2 * layers)]
        args = (ids, torch.ones(B, P + S, dtype=torch.int64), torch.arange(P, P + S).expand(B, S), *pasts)
        kv = [f"past_key_values.{i}.{t}" for i in range(layers) for t in ("key", "value")]
        names = ["input_ids", "attention_mask", "position_ids"] + kv
        outputs = ["logits"] + [f"present.{i}.{t}" for i in range(layers) for t in ("key", "value")]
        shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: torch.export.Dim("total_sequence_length")},
                  "position_ids": {0: batch, 1: seq}, "past_kv": tuple({0: batch, 2: past} for _ in kv)}
    else:

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask):
                return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        args = (ids, torch.ones(B, S, dtype=torch.int64))
        names, outputs = ["input_ids", "attention_mask"], ["logits"]
        shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    tmp = path.with_suffix(".tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(Wrapped().eval(), args, dynamo=True, opset_version=opset, input_names=names,
                                 output_names=outputs, dynamic_shapes=shapes, external_data=False, verbose=False)
        prog.save(str(tmp))
    finish(tmp, path, {"attention_mask": "past_sequence_length + sequence_length"} if with_past else {})


def finish(tmp: Path, path: Path, renamed_dims: dict) -> None:
    """Drops the exporter's per-node debug records (stack traces, module names: four fifths of the
    file; they change nothing that runs), names each input's axis 1 in `renamed_dims`, checks the
    model and moves it into place."""
    import onnx

    m = onnx.load(str(tmp))
    for i in m.graph.input:
        if i.name in renamed_dims:
            i.type.tensor_type.shape.dim[1].dim_param = renamed_dims[i.name]
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.save(m, str(tmp))
    onnx.checker.check_model(str(tmp), full_check=True)
    os.replace(tmp, path)


def export_other(name: str, path: Path) -> None:
    import torch
    import torchvision
    import transformers

    torch.manual_seed(0)
    batch = torch.export.Dim("batch_size")
    if name == "bart":
        config = transformers.BartConfig(vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128)
        model = transformers.BartForConditionalGeneration(config).eval()

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask, decoder_input_ids):
                return self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, use_cache=False).logits

        enc, dec = torch.export.Dim("encoder_sequence_length"), torch.export.Dim("decoder_sequence_length")
        args = (torch.randint(0, 64, (2, 7)), torch.ones(2, 7, dtype=torch.int64), torch.randint(0, 64, (2, 5)))
        names = ["input_ids", "attention_mask", "decoder_input_ids"]
        shapes = {"input_ids": {0: batch, 1: enc}, "attention_mask": {0: batch, 1: enc}, "decoder_input_ids": {0: batch, 1: dec}}
        module = Wrapped()
    elif name == "swin":
        config = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
                                         num_labels=10)
        model = transformers.SwinForImageClassification(config).eval()

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, pixel_values):
                return self.m(pixel_values=pixel_values).logits

        args, names, shapes, module = (torch.randn(2, 3, 32, 32),), ["pixel_values"], {"pixel_values": {0: batch}}, Wrapped()
    else:
        module = torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10).eval()
        args, names, shapes = (torch.randn(2, 3, 64, 64),), ["pixel_values"], {"x": {0: batch}}
    tmp = path.with_suffix(".tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(module, args, dynamo=True, opset_version=20, input_names=names, output_names=["logits"],
                                 dynamic_shapes=shapes, external_data=False, verbose=False)
        prog.save(str(tmp))
    finish(tmp, path, {})


OTHERS = ["bart", "swin", "mobilenet_v2"]


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "data" / "decoders")
    ap.add_argument("--names", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--force", action="store_true", help="re-export files that exist")
    ap.add_argument("--size", choices=list(SIZES), default="tiny")
    ap.add_argument("--variants", nargs="*", choices=list(VARIANTS), default=["20", "past20", "23"])
    ap.add_argument("--others", action="store_true", help="the other families (%s), into tests/data/sizes" % ", ".join(OTHERS))
    args = ap.parse_args(argv)
    import onnx
    import torch
    import transformers

    torch.set_num_threads(1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, onnx {onnx.__version__}", flush=True)
    failed = 0
    jobs = []
    if args.others:
        out = args.out_dir if args.out_dir != ROOT / "tests" / "data" / "decoders" else ROOT / "tests" / "data" / "sizes"
        jobs = [(out / f"{name}.dynamo20.onnx", lambda p, n=name: export_other(n, p)) for name in OTHERS]
    else:
        for name in args.names:
            for variant in args.variants:
                suffix, opset = VARIANTS[variant]
                jobs.append((args.out_dir / f"{name}{suffix}.dynamo{opset}.onnx", lambda p, n=name, v=variant: export(n, args.size, v, p)))
    for path, make in jobs:
        try:
            if args.force or not path.exists():
                make(path)
        except Exception as e:  # one line: exporter errors come from deep inside torch
            print(f"FAIL {path.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            failed += 1
            continue
        m = onnx.load(str(path))
        opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        hist = " ".join(f"{k}:{v}" for k, v in collections.Counter(n.op_type for n in m.graph.node).most_common())
        print(f"{path.name:34s} opset {opset}  {path.stat().st_size / 1024:6.0f} KiB  {hist}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
