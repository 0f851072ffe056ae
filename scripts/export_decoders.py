#!/usr/bin/env python3
"""Export small HuggingFace decoders with torch's default (dynamo) exporter: the committed fixtures
of tests/data/decoders, which CI checks at every size without this script's venv.

    export_decoders.py [--out-dir tests/data/decoders] [--names llama ...] [--force]

Runs in the torch 2.x venv (scripts/torch2_corpus makes it; requirements-torch2.txt pins torch,
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

ROOT = Path(__file__).resolve().parent.parent

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
LAYERS = COMMON["num_hidden_layers"]
KV_HEADS, HEAD_DIM = 2, 8


def build(name: str):
    import torch
    import transformers

    cls, extra = FAMILIES[name]
    config = getattr(transformers, cls)(**COMMON, **extra)
    config._attn_implementation = "sdpa"  # transformers' default; the exporter decomposes it
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    return config, model


def export(name: str, variant: str, path: Path) -> None:
    import onnx
    import torch
    import transformers

    config, model = build(name)
    B, S, P = 2, 3, 5  # traced sizes: no 1, no two alike, so none is baked in unnoticed
    batch, seq, past = (torch.export.Dim(n) for n in ("batch_size", "sequence_length", "past_sequence_length"))
    ids = torch.randint(0, COMMON["vocab_size"], (B, S))
    if variant == "past":

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask, position_ids, *past_kv):
                cache = transformers.DynamicCache(config=config)
                for i in range(LAYERS):
                    cache.update(past_kv[2 * i], past_kv[2 * i + 1], i)
                res = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
                out = [res.logits]
                for layer in res.past_key_values.layers[:LAYERS]:
                    out += [layer.keys, layer.values]
                return tuple(out)

        pasts = [torch.randn(B, KV_HEADS, P, HEAD_DIM) for _ in range(2 * LAYERS)]
        args = (ids, torch.ones(B, P + S, dtype=torch.int64), torch.arange(P, P + S).expand(B, S), *pasts)
        kv = [f"past_key_values.{i}.{t}" for i in range(LAYERS) for t in ("key", "value")]
        names = ["input_ids", "attention_mask", "position_ids"] + kv
        outputs = ["logits"] + [f"present.{i}.{t}" for i in range(LAYERS) for t in ("key", "value")]
        shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: torch.export.Dim("total_sequence_length")},
                  "position_ids": {0: batch, 1: seq}, "past_kv": tuple({0: batch, 2: past} for _ in kv)}
        opset = 20
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
        opset = 23 if variant == "23" else 20
    tmp = path.with_suffix(".tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(Wrapped().eval(), args, dynamo=True, opset_version=opset, input_names=names,
                                 output_names=outputs, dynamic_shapes=shapes, external_data=False, verbose=False)
        prog.save(str(tmp))
    m = onnx.load(str(tmp))
    if variant == "past":
        for i in m.graph.input:
            if i.name == "attention_mask":
                i.type.tensor_type.shape.dim[1].dim_param = "past_sequence_length + sequence_length"
    # The exporter's per-node debug records (stack traces, module names) are four fifths of the
    # file; they change nothing that runs.
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.save(m, str(tmp))
    onnx.checker.check_model(str(tmp), full_check=True)
    os.replace(tmp, path)


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "tests" / "data" / "decoders")
    ap.add_argument("--names", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--force", action="store_true", help="re-export files that exist")
    args = ap.parse_args(argv)
    import onnx
    import torch
    import transformers

    torch.set_num_threads(1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, onnx {onnx.__version__}", flush=True)
    failed = 0
    for name in args.names:
        for variant, fname in (("20", f"{name}.dynamo20.onnx"), ("past", f"{name}_past.dynamo20.onnx"), ("23", f"{name}.dynamo23.onnx")):
            path = args.out_dir / fname
            try:
                if args.force or not path.exists():
                    export(name, variant, path)
            except Exception as e:  # one line: exporter errors come from deep inside torch
                print(f"FAIL {fname}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
                failed += 1
                continue
            m = onnx.load(str(path))
            opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            hist = " ".join(f"{k}:{v}" for k, v in collections.Counter(n.op_type for n in m.graph.node).most_common())
            print(f"{fname:34s} opset {opset}  {path.stat().st_size / 1024:6.0f} KiB  {hist}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
