#!/usr/bin/env python3
"""Export a corpus of HuggingFace `transformers` models to ONNX, the way users do.

    export_hf_models.py [--size small|full] [--out models/hf] [--static-only|--dynamic-only] [names...]

Every model is built from its config class (no download: HF_HUB_OFFLINE=1) with seeded random
weights (torch.manual_seed), put in eval mode, and exported under torch.no_grad() with
torch.onnx.export (the TorchScript exporter of the installed torch; Debian's 1.13) at opset 17:

  models/hf/<size>/<name>.onnx          static: batch 1, sequence 128 (images 1x3x224x224)
  models/hf/<size>/<name>_dynamic.onnx  dynamic_axes "batch" and "sequence" (batch only for vision)

Text models take input_ids (int64) and attention_mask (int64); decoders run with use_cache=False and
return only their logits; encoders return only last_hidden_state. Attention is the "eager" (plain
ops) implementation. --size small is for CI (2 layers, small widths and vocabularies, each file a
few MB); --size full uses the config classes' defaults (bert-base, distilbert-base, gpt2, vit-base,
t5-small, convnext-tiny, resnet-50, roberta-base, whisper-tiny) and a 4-layer LLaMA-style decoder with
grouped-query attention (16 query / 4 key-value heads, hidden 1024).

Each file carries metadata_props (rlflow_hf.*: class, size, vocab_size) that scripts/checks/check_hf_corpus
uses to draw valid token ids. Prints a table of what was written; exits 1 if any export failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # never reach a model hub: everything is built from config classes
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[2]
OPSET = 17
SEQ = 128
IMAGE = 224
SEED = 0


# name -> spec. "kind": text (input_ids, attention_mask), text_past (a decoder with a KV cache, see
# Wrapped.with_past), image (pixel_values), audio (input_features).
# "out": the output field returned. "small"/"full": config keyword arguments.
def specs() -> dict:
    small_text = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, max_position_embeddings=256)
    return {
        "bert": dict(cls="BertModel", cfg="BertConfig", kind="text", out="last_hidden_state",
                     small=small_text, full={}),
        "distilbert": dict(cls="DistilBertModel", cfg="DistilBertConfig", kind="text", out="last_hidden_state",
                           small=dict(vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                      max_position_embeddings=256),
                           full={}),
        "gpt2": dict(cls="GPT2LMHeadModel", cfg="GPT2Config", kind="text", out="logits",
                     small=dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=256, use_cache=False),
                     full=dict(use_cache=False)),
        "llama": dict(cls="LlamaForCausalLM", cfg="LlamaConfig", kind="text", out="logits",
                      small=dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                 num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256,
                                 use_cache=False),
                      full=dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048,
                                use_cache=False)),
        "vit": dict(cls="ViTModel", cfg="ViTConfig", kind="image", out="last_hidden_state",
                    small=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                               image_size=IMAGE, patch_size=16),
                    full={}),
        "t5_encoder": dict(cls="T5EncoderModel", cfg="T5Config", kind="text", out="last_hidden_state",
                           small=dict(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                      use_cache=False),
                           full=dict(use_cache=False)),
        "convnext": dict(cls="ConvNextModel", cfg="ConvNextConfig", kind="image", out="last_hidden_state",
                         small=dict(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], image_size=IMAGE),
                         full={}),
        "resnet": dict(cls="ResNetModel", cfg="ResNetConfig", kind="image", out="last_hidden_state",
                       small=dict(embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], layer_type="bottleneck"),
                       full={}),
        "roberta": dict(cls="RobertaModel", cfg="RobertaConfig", kind="text", out="last_hidden_state",
                        small=dict(small_text, max_position_embeddings=258, pad_token_id=1, type_vocab_size=1),
                        # roberta-base: the class defaults are BERT's vocabulary and positions
                        full=dict(vocab_size=50265, max_position_embeddings=514, pad_token_id=1, type_vocab_size=1)),
        # Decoders with a KV cache, exported as optimum's text-generation-with-past does (only as
        # _dynamic): past_key_values.N.key/value inputs (batch, kv heads, past_sequence_length, head
        # dim), an attention_mask over "past_sequence_length + sequence_length", position_ids, and
        # logits plus present.N.key/value outputs.
        "gpt2_past": dict(cls="GPT2LMHeadModel", cfg="GPT2Config", kind="text_past", out="logits",
                          small=dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=256),
                          full={}),
        "llama_past": dict(cls="LlamaForCausalLM", cfg="LlamaConfig", kind="text_past", out="logits",
                           small=dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256),
                           full=dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                                     num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)),
        "whisper_encoder": dict(cls="WhisperEncoder", module="transformers.models.whisper.modeling_whisper",
                                cfg="WhisperConfig", kind="audio", out="last_hidden_state",
                                # the encoder needs exactly 2 * max_source_positions frames: 128 for small
                                small=dict(vocab_size=1000, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                                           encoder_ffn_dim=128, decoder_layers=2, decoder_attention_heads=4,
                                           decoder_ffn_dim=128, num_mel_bins=80, max_source_positions=64),
                                full={}),
    }


NAMES = list(specs())


class Wrapped:
    """Builds an nn.Module that calls the HF model with keyword inputs and returns one output tensor."""

    @staticmethod
    def make(model, input_names, out):
        import torch

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                kwargs = dict(zip(input_names, args))
                res = self.model(**kwargs, return_dict=True)
                return res[out]

        return Wrap().eval()

    @staticmethod
    def with_past(model, layers: int):
        """Flat inputs (input_ids, attention_mask, position_ids, past key, past value, ...) to flat
        outputs (logits, present key, present value, ...), as optimum's with-past decoders have."""
        import torch
        import transformers

        class WrapPast(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, position_ids, *past):
                cache = transformers.DynamicCache.from_legacy_cache(tuple((past[2 * i], past[2 * i + 1]) for i in range(layers)))
                res = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                 past_key_values=cache, use_cache=True, return_dict=True)
                present = res.past_key_values
                out = [res.logits]
                for k, v in (present if isinstance(present, tuple) else present.to_legacy_cache()):
                    out += [k, v]
                return tuple(out)

        return WrapPast().eval()


def past_layout(config):
    """(layers, key-value heads, head dim) of a decoder's cache."""
    layers = getattr(config, "num_hidden_layers", None) or config.n_layer
    heads = getattr(config, "num_attention_heads", None) or config.n_head
    kv = getattr(config, "num_key_value_heads", None) or heads
    hidden = getattr(config, "hidden_size", None) or config.n_embd
    return layers, kv, hidden // heads


def build(name: str, size: str):
    import importlib
    import torch
    import transformers

    spec = specs()[name]
    cfg_cls = getattr(transformers, spec["cfg"])
    config = cfg_cls(**spec[size])
    config._attn_implementation = "eager"  # plain MatMul/Softmax attention, no fused SDPA
    torch.manual_seed(SEED)
    module = importlib.import_module(spec["module"]) if "module" in spec else transformers
    model_cls = getattr(module, spec["cls"])
    model = model_cls(config).eval()
    return model, config, spec


def vocab_size(config) -> int | None:
    return getattr(config, "vocab_size", None)


def inputs_for(spec, config, batch: int, seq: int):
    import torch

    g = torch.Generator().manual_seed(SEED)
    if spec["kind"] in ("text", "text_past"):
        ids = torch.randint(0, vocab_size(config), (batch, seq), generator=g, dtype=torch.int64)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        return ["input_ids", "attention_mask"], (ids, mask)
    if spec["kind"] == "image":
        return ["pixel_values"], (torch.randn(batch, config.num_channels, IMAGE, IMAGE, generator=g),)
    frames = 2 * config.max_source_positions
    return ["input_features"], (torch.randn(batch, config.num_mel_bins, frames, generator=g),)


def export_one(name: str, size: str, dynamic: bool, out_dir: Path) -> dict:
    import onnx
    import torch

    t0 = time.monotonic()
    fname = f"{name}_dynamic.onnx" if dynamic else f"{name}.onnx"
    path = out_dir / fname
    row = {"name": path.stem, "file": str(path), "size": size, "dynamic": dynamic, "ok": False}
    try:
        model, config, spec = build(name, size)
        # Dynamic models are traced at batch 2 so no batch dimension of 1 is baked in as a constant.
        input_names, args = inputs_for(spec, config, 2 if dynamic else 1, SEQ)
        out = spec["out"]
        output_names = [out]
        wrap = Wrapped.make(model, input_names, out) if spec["kind"] != "text_past" else None
        dynamic_axes = None
        if spec["kind"] == "text_past":
            if not dynamic:
                row.update(ok=True, skipped=True, seconds=0.0)
                return row
            # Traced at batch 2, sequence 3, past 5: no size of 1 and no two sizes alike to bake in.
            import torch
            layers, kv, head_dim = past_layout(config)
            wrap = Wrapped.with_past(model, layers)
            g = torch.Generator().manual_seed(SEED)
            b, s, p = 2, 3, 5
            args = (torch.randint(0, vocab_size(config), (b, s), generator=g, dtype=torch.int64),
                    torch.ones(b, p + s, dtype=torch.int64), torch.arange(p, p + s).unsqueeze(0).expand(b, s).contiguous(),
                    *[torch.randn(b, kv, p, head_dim, generator=g) for _ in range(2 * layers)])
            pasts = [f"past_key_values.{i}.{t}" for i in range(layers) for t in ("key", "value")]
            input_names = ["input_ids", "attention_mask", "position_ids"] + pasts
            output_names = [out] + [f"present.{i}.{t}" for i in range(layers) for t in ("key", "value")]
            total = "past_sequence_length + sequence_length"
            dynamic_axes = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: total},
                            "position_ids": {0: "batch_size", 1: "sequence_length"}, out: {0: "batch_size", 1: "sequence_length"}}
            dynamic_axes.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in pasts})
            dynamic_axes.update({n: {0: "batch_size", 2: total} for n in output_names[1:]})
        elif dynamic:
            if spec["kind"] == "text":
                axes = {0: "batch", 1: "sequence"}
                dynamic_axes = {n: axes for n in input_names}
                dynamic_axes[out] = axes
            else:
                dynamic_axes = {n: {0: "batch"} for n in input_names}
                dynamic_axes[out] = {0: "batch"}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.onnx")
        with torch.no_grad():
            torch.onnx.export(wrap, args, str(tmp), input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes, opset_version=OPSET, do_constant_folding=True)
        m = onnx.load(str(tmp))
        meta = {"rlflow_hf.class": spec["cls"], "rlflow_hf.config": spec["cfg"], "rlflow_hf.size": size,
                "rlflow_hf.kind": spec["kind"], "rlflow_hf.seed": str(SEED),
                "rlflow_hf.transformers": __import__("transformers").__version__,
                "rlflow_hf.torch": torch.__version__}
        if vocab_size(config) is not None and spec["kind"] in ("text", "text_past"):
            meta["rlflow_hf.vocab_size"] = str(vocab_size(config))
        for k, v in meta.items():
            p = m.metadata_props.add()
            p.key, p.value = k, v
        onnx.save(m, str(tmp))
        os.replace(tmp, path)
        row.update(ok=True, ops=len(m.graph.node),
                   params=sum(int(__import__("numpy").prod(t.dims)) for t in m.graph.initializer),
                   mb=path.stat().st_size / 1e6, inputs=input_names, output=out)
    except Exception as e:  # one failing model must not stop the corpus
        row["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        if os.environ.get("RLFLOW_DEBUG"):
            traceback.print_exc()
    row["seconds"] = time.monotonic() - t0
    return row


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"models (default all): {', '.join(NAMES)}")
    ap.add_argument("--size", choices=["small", "full"], default="small")
    ap.add_argument("--out", default=str(ROOT / "models" / "hf"), help="root folder (default models/hf)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--static-only", action="store_true")
    g.add_argument("--dynamic-only", action="store_true")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        print(f"error: unknown model(s): {', '.join(unknown)} (known: {', '.join(NAMES)})", file=sys.stderr)
        return 2

    import warnings
    warnings.filterwarnings("ignore")  # TracerWarnings for every Python-level shape check
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    out_dir = Path(args.out) / args.size
    variants = [False] if args.static_only else [True] if args.dynamic_only else [False, True]
    rows = []
    for name in args.names or NAMES:
        for dyn in variants:
            r = export_one(name, args.size, dyn, out_dir)
            rows.append(r)
            print(f"  {'ok  ' if r['ok'] else 'FAIL'} {r['name']} ({r['seconds']:.1f} s)"
                  + ("" if r["ok"] else f": {r['error']}"), file=sys.stderr, flush=True)

    print(f"{'model':<28}{'ops':>7}{'params':>14}{'MB':>10}{'seconds':>9}")
    rows = [r for r in rows if not r.get("skipped")]
    for r in rows:
        if r["ok"]:
            print(f"{r['name']:<28}{r['ops']:>7}{r['params']:>14,}{r['mb']:>10.2f}{r['seconds']:>9.1f}")
        else:
            print(f"{r['name']:<28}  FAILED: {r['error']}")
    manifest = out_dir / "manifest.json"  # merged by name, so partial runs keep the other rows
    old = {}
    if manifest.exists():
        try:
            old = {r["name"]: r for r in json.loads(manifest.read_text())}
        except (ValueError, KeyError, TypeError):
            old = {}
    old.update({r["name"]: r for r in rows})
    manifest.write_text(json.dumps(sorted(old.values(), key=lambda r: r["name"]), indent=1) + "\n")
    print(f"wrote {sum(r['ok'] for r in rows)} of {len(rows)} models to {out_dir}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
