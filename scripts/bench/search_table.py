#!/usr/bin/env python3
"""Greedy, TASO, exhaustive and the RL agent side by side on the transformer models (issue 32).

Each row is NAME[:LAYERS]@OPSET: a zoo model (models/NAME.onnx) or a path under models/ (hf/small/llama),
optimised with `--opset OPSET`, so the search starts from the graph with that opset's composite chains
fused (LayerNorm 17, Gelu 20, RMSNorm, rotary and attention 23). `:LAYERS` exports a shallower copy of
gpt_block or transformer_encoder (scripts/corpus/export_models.py's builders, same seed) into OUT_DIR, small
enough for exhaustive search to finish.

Per row, under the recorded H100 cost (--cost-model recorded --device-profile h100, what --target h100
uses; every number is a prediction, none a GPU measurement):
  greedy             optimise --search greedy
  taso a=1.0 / 1.05  optimise --search taso --alpha A --budget BUDGET
  exhaustive         optimise --search exhaustive --budget 10^7 --time-limit EXHAUSTIVE_LIMIT; "optimum" when
                     it exhausted every reachable graph, otherwise a lower bound (it stopped at the time limit)
  rl                 train-agent --opset OPSET (default config: imitation of greedy, one DAgger round, PPO),
                     then optimise --search rl --rollouts 8 with that agent; per seed of --seeds
  rl + polish        the same agent's graph, then greedy descent (optimise --search rl --polish)
A cell is the improvement of the written file over the input, (before - after) / before, in %.

    scripts/bench/search_table                       # the default rows below
    scripts/bench/search_table --rows gpt_block:1@17 --episodes 50 --log docs/measurements/search_table-DATE.md

Writes OUT_DIR/search_table.md and .json; --log also writes the table with its command to that file.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("bench", "corpus")]
import bench_rl  # noqa: E402  (its optimise/train wrappers)

DEFAULT_ROWS = ["gpt_block:1@17", "gpt_block@17", "transformer_encoder:1@17", "transformer_encoder@17",
                "hf/small/llama@23"]
LAYERED = {"gpt_block", "transformer_encoder"}


def log(msg: str) -> None:
    print(f"[search_table] {msg}", file=sys.stderr, flush=True)


def parse_row(spec: str) -> tuple[str, int | None, int]:
    name, _, opset = spec.partition("@")
    if not opset.isdigit():
        raise SystemExit(f"search_table: row {spec!r}: expected NAME[:LAYERS]@OPSET")
    name, _, layers = name.partition(":")
    if layers and (not layers.isdigit() or name not in LAYERED):
        raise SystemExit(f"search_table: row {spec!r}: :LAYERS needs a number and one of {sorted(LAYERED)}")
    return name, int(layers) if layers else None, int(opset)


def model_for(name: str, layers: int | None, out_dir: Path) -> Path:
    """The zoo or HF file, or a shallower export of it (made once, then reused)."""
    if layers is None:
        p = ROOT / "models" / f"{name}.onnx"
        return p
    path = out_dir / f"{name}-{layers}layer.onnx"
    if path.exists():
        return path
    import export_models as em

    entry = em.ZOO[name]
    builder = {"gpt_block": em.build_gpt_block, "transformer_encoder": em.build_transformer_encoder}[name]
    shallow = em.ZooEntry(functools.partial(builder, layers=layers), entry.input_name, entry.input_shape, entry.opset)
    log(f"exporting {name} with {layers} layer(s) to {path}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = em.export_one(path.stem, shallow, out_dir, 0, False)
    return Path(written)


def run_row(args, spec: str, tmp: Path) -> dict:
    name, layers, opset = parse_row(spec)
    model = model_for(name, layers, args.out_dir)
    row: dict = {"row": spec, "model": str(model), "opset": opset}
    if not model.exists():
        row["error"] = f"{model}: missing (scripts/corpus/export_models, scripts/corpus/export_hf_models)"
        return row
    o = ["--opset", str(opset)]
    tag = spec.replace("/", "_").replace("@", "_o").replace(":", "_l")
    runs = [("greedy", "greedy", []),
            ("taso_1.0", "taso", ["--alpha", "1.0", "--budget", str(args.budget)]),
            ("taso_1.05", "taso", ["--alpha", "1.05", "--budget", str(args.budget)])]
    for key, search, extra in runs:
        log(f"{spec}: {key}")
        row[key] = bench_rl.optimise(args, model, tmp / f"{tag}.{key}.onnx", search, o + extra)
    log(f"{spec}: exhaustive (time limit {args.exhaustive_limit:g} s)")
    saved = args.time_limit
    args.time_limit = args.exhaustive_limit
    row["exhaustive"] = bench_rl.optimise(args, model, tmp / f"{tag}.exh.onnx", "exhaustive", o + ["--budget", "10000000"])
    args.time_limit = saved
    row["rl"], row["rl_polish"] = [], []
    for seed in args.seeds:
        agent = args.out_dir / "rl" / f"{tag}.s{seed}.pt"
        log(f"{spec}: train-agent --opset {opset} --episodes {args.episodes} --seed {seed}")
        t = bench_rl.train(args, [model], agent, agent.with_suffix(".jsonl"), seed, o)
        if "error" in t:
            row["rl"].append({"error": "training: " + t["error"], "seed": seed})
            continue
        for key, more in (("rl", []), ("rl_polish", ["--polish"])):
            log(f"{spec}: optimise --search rl {' '.join(more)} (seed {seed})")
            r = bench_rl.optimise(args, model, tmp / f"{tag}.{key}.s{seed}.onnx", "rl",
                                  o + bench_rl.rl_extra(args, t["agent"]) + more)
            r["seed"], r["train_wall_s"] = seed, t.get("wall_s")
            row[key].append(r)
    return row


def pct(res: dict | None) -> str:
    if not res:
        return "n/a"
    if "error" in res:
        return bench_rl.cell_err(res["error"])
    return f"{100 * res['improvement']:.2f}"


def exhaustive_cell(res: dict) -> str:
    if "error" in res:
        return bench_rl.cell_err(res["error"])
    stop = res.get("stop") or ""
    done = stop.startswith("exhausted")
    return f"{100 * res['improvement']:.2f} ({'optimum' if done else 'stopped: ' + stop.split(' (')[0] + ', a lower bound'})"


def seeds_cell(runs: list[dict]) -> str:
    ok = [100 * r["improvement"] for r in runs if "improvement" in r and "error" not in r]
    bad = [r for r in runs if "error" in r or "improvement" not in r]
    if not ok:
        return bench_rl.cell_err(bad[0]["error"]) if bad else "n/a"
    cell = bench_rl.mean_std(ok) + (f" (min {min(ok):.2f})" if len(ok) > 1 else "")
    return cell + (f", {len(bad)} failed" if bad else "")


def table_cell(res: dict) -> str:
    t = res.get("table") or {}
    return "n/a" if t.get("hits") is None else f"{t['hits']} / {t['misses']}"


def table(rows: list[dict]) -> str:
    lines = ["| row (model:layers@opset) | greedy % | TASO a=1.0 % | TASO a=1.05 % | exhaustive % | RL agent % | "
             "RL + polish % | agent - best TASO (pp) | H100 table hits / profile-priced (greedy's file) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['row']} | {bench_rl.cell_err(r['error'])} |  |  |  |  |  |  |  |")
            continue
        tasos = [r[k]["improvement"] for k in ("taso_1.0", "taso_1.05") if "improvement" in r[k] and "error" not in r[k]]
        rl_ok = [x["improvement"] for x in r["rl"] if "improvement" in x and "error" not in x]
        diff = f"{100 * (min(rl_ok) - max(tasos)):+.2f} (worst seed)" if tasos and rl_ok else "n/a"
        lines.append("| " + " | ".join([r["row"], pct(r["greedy"]), pct(r["taso_1.0"]), pct(r["taso_1.05"]),
                                        exhaustive_cell(r["exhaustive"]), seeds_cell(r["rl"]), seeds_cell(r["rl_polish"]),
                                        diff, table_cell(r["greedy"])]) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=DEFAULT_ROWS, help="NAME[:LAYERS]@OPSET rows (default: %(default)s)")
    ap.add_argument("--episodes", type=int, default=200, help="train-agent --episodes (default 200)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="train-agent seeds (default 0)")
    ap.add_argument("--rollouts", type=int, default=8, help="optimise --search rl --rollouts (default 8)")
    ap.add_argument("--budget", type=int, default=1000, help="TASO --budget (default 1000)")
    ap.add_argument("--time-limit", type=float, default=120, help="optimise --time-limit for greedy/TASO/RL (default 120)")
    ap.add_argument("--exhaustive-limit", type=float, default=300, help="exhaustive --time-limit in s (default 300)")
    ap.add_argument("--timeout", type=float, default=None, help="kill any one rlflow run after this many s")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "search_table")
    ap.add_argument("--log", type=Path, default=None, help="also write the table with its command to this markdown file")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    # What bench_rl's wrappers read: the recorded H100 cost, as optimise --target h100 prices.
    args.cost_model, args.device_profile, args.deterministic = "recorded", "h100", False
    args.seed, args.config, args.imitation_epochs, args.dagger_rounds = args.seeds[0], None, 0, 0
    args.beam, args.polish, args.beam_budget = 0, False, 100000
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rlflow-search-table-") as tmp:
        for spec in args.rows:
            rows.append(run_row(args, spec, Path(tmp)))
            (args.out_dir / "search_table.json").write_text(json.dumps(rows, indent=1))
    md = table(rows)
    (args.out_dir / "search_table.md").write_text(md + "\n")
    print(md)
    if args.log:
        cmd = "scripts/bench/search_table " + " ".join(sys.argv[1:])
        args.log.write_text(f"# scripts/bench/search_table, {datetime.date.today().isoformat()}\n\n"
                            f"`{cmd}` (binary {args.binary}; recorded H100 cost: every number is predicted)\n\n"
                            f"{md}\n")
    failed = any("error" in r or any("error" in (r.get(k) or {}) for k in ("greedy", "taso_1.0", "taso_1.05", "exhaustive"))
                 for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
