#!/usr/bin/env python3
"""The RL benchmark: the trained agent next to greedy and TASO search, under one cost model.

Per model (--models): `rlflow optimise --search greedy|taso --json`, then `rlflow train-agent` on that
model alone, then `rlflow optimise --search rl --agent AGENT --rollouts K --json` with the new agent.
Every run uses the same cost model (--cost-model, default analytic; --device-profile, default h100-datasheet;
--deterministic is passed when the cost model is analytic). Improvement = (before_ms - after_ms) /
before_ms of the cost that optimise reports for its own result.

Generalisation (--generalise [TRAIN ...] --eval EVAL ...): one agent trained on every TRAIN model together
(train-agent with --model repeated), evaluated with --search rl on each held-out EVAL model next to
greedy and TASO on it. When --models also names an EVAL model, its per-model agent is trained too and the
table gives the held-out agent's improvement as a share of the per-model agent's. With --generalise alone only this runs (written to bench_rl_generalise.*);
with --models given too, both tables run and go to bench_rl.*.

Writes OUT_DIR/bench_rl.md (markdown tables), OUT_DIR/bench_rl.json (every number), the training curves
OUT_DIR/bench_rl_<model>.png and OUT_DIR/bench_rl_generalise_<eval>.png (scripts/train/plot_training.py), and
keeps the agents and their JSONL logs under OUT_DIR/rl/. A failing run becomes an "error: ..." cell of its row, never a crash; the exit status is 1
when any run failed.

    scripts/bench/bench_rl [--models squeezenet1_1 resnet18] [--episodes 200] [--seed 0] [--rollouts 8]
    scripts/bench/bench_rl --generalise squeezenet1_1 resnet18 resnet50 --eval inception_v3 bert_base --episodes 200
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("lib", "train")]
import rlflow_json  # noqa: E402

DEFAULT_MODELS = ["squeezenet1_1", "resnet18", "bert_base"]
DEFAULT_TRAIN = ["squeezenet1_1", "resnet18", "resnet50"]
DEFAULT_EVAL = "inception_v3"


def log(msg: str) -> None:
    print(f"[bench_rl] {msg}", file=sys.stderr, flush=True)


rlflow = rlflow_json.rlflow


def model_path(name: str) -> Path:
    p = Path(name)
    if p.suffix == ".onnx" or "/" in name:
        return p if p.is_absolute() else (Path.cwd() / p)
    return ROOT / "models" / f"{name}.onnx"


def model_name(name: str) -> str:
    return Path(name).stem if name.endswith(".onnx") else Path(name).name


def cost_args(args) -> list[str]:
    out = ["--cost-model", args.cost_model]
    if args.device_profile:
        out += ["--device-profile", args.device_profile]
    if args.deterministic:
        out += ["--deterministic"]
    return out


def optimise(args, model: Path, out: Path, search: str, extra: list[str] | None = None) -> dict:
    """One optimise run: {improvement, before_ms, after_ms, search_s, wall_s, ...} or {error, wall_s}."""
    if not model.exists():
        return {"error": f"{model}: missing (scripts/corpus/export_models {model.stem})"}
    # --measure off: the strategies are compared under the cost model they searched with; the
    # never-slower gate would measure on this machine's CPU and keep inputs a GPU cost prefers.
    cmd = ["optimise", str(model), "-o", str(out), "--search", search, "--time-limit", str(args.time_limit),
           "--measure", "off", *cost_args(args), *(extra or [])]
    r = rlflow(args.binary, cmd, args.timeout)
    if not r["ok"]:
        return {"error": r["error"], "wall_s": r["wall_s"]}
    doc = r["doc"]
    cost = doc.get("cost") or {}
    before, after = cost.get("before_ms"), cost.get("after_ms")
    res = {"wall_s": r["wall_s"], "before_ms": before, "after_ms": after, "cost_model": cost.get("model"),
           "search_s": ((doc.get("search_report") or {}).get("seconds") or {}).get("total"),
           "stop": (doc.get("search_report") or {}).get("stop_reason"), "steps": len(doc.get("steps") or []),
           "rules_applied": doc.get("rules_applied"),
           "phases": (doc.get("search_report") or {}).get("phases") or [],
           "table": {k: (cost.get("table") or {}).get(k) for k in ("hits", "misses")} if cost.get("table") else None}
    if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before > 0:
        res["improvement"] = (before - after) / before
    else:
        res["error"] = f"no cost before/after in the optimise output ({cost!r})"
    return res


def train(args, models: list[Path], agent: Path, log_path: Path, seed: int | None = None,
          extra: list[str] | None = None) -> dict:
    """One fresh train-agent run (an old agent and log at those paths are removed first)."""
    missing = [m for m in models if not m.exists()]
    if missing:
        return {"error": ", ".join(f"{m}: missing (scripts/corpus/export_models {m.stem})" for m in missing)}
    agent.parent.mkdir(parents=True, exist_ok=True)
    rlflow_json.fresh(agent, log_path)  # train-agent appends to an existing log; this run starts afresh
    cmd = ["train-agent", *[a for m in models for a in ("--model", str(m))], "--out", str(agent), "--log", str(log_path),
           "--episodes", str(args.episodes), "--seed", str(args.seed if seed is None else seed), *cost_args(args),
           *(extra or [])]
    if args.config:
        cmd += ["--config", args.config]
    if args.imitation_epochs:
        cmd += ["--imitation-epochs", str(args.imitation_epochs)]
    if args.dagger_rounds:
        cmd += ["--dagger-rounds", str(args.dagger_rounds)]
    r = rlflow(args.binary, cmd, args.timeout)
    if not r["ok"]:
        return {"error": r["error"], "wall_s": r["wall_s"], "log": str(log_path)}
    doc = r["doc"]

    def by_model(key: str) -> dict:
        # train-agent keys its per-model numbers by the path it was given; key them by model name here.
        return {Path(k).stem: v for k, v in (doc.get(key) or {}).items()}

    return {"wall_s": r["wall_s"], "seconds": doc.get("seconds"), "agent": doc.get("agent", str(agent)),
            "log": doc.get("log", str(log_path)), "cost_model": doc.get("cost_model"), "rules": doc.get("rules"),
            "updates": doc.get("updates"), "episodes": doc.get("episodes"), "env_steps": doc.get("env_steps"),
            "real_step_ms": doc.get("real_step_ms"), "best_improvement": by_model("best_improvement"),
            "episodes_to_best": by_model("episodes_to_best"), "env_steps_to_best": by_model("env_steps_to_best"),
            "imitation": doc.get("imitation")}


def plot(logs: list[str], out: Path, title: str) -> str | None:
    """Training curves to `out`; returns an error message, or None."""
    logs = [p for p in logs if p and Path(p).is_file() and Path(p).stat().st_size > 0]
    if not logs:
        return "no training log to plot"
    try:
        import plot_training

        plot_training.plot(logs, out, title)
    except Exception as e:  # noqa: BLE001 — a plot failure must not lose the benchmark's numbers
        return f"{type(e).__name__}: {e}"
    return None


def per_model(args, name: str, tmp: Path) -> dict:
    """greedy and TASO once (deterministic), then per seed of --seeds: train-agent, optimise --search rl
    (and with --polish, again with the closing greedy descent). row["train"] / row["rl"] are the first
    seed's, row["runs"] every seed's."""
    model = model_path(name)
    stem = model_name(name)
    row: dict = {"model": stem, "path": str(model), "runs": []}
    for search in ("greedy", "taso"):
        log(f"{stem}: optimise --search {search}")
        row[search] = optimise(args, model, tmp / f"{stem}.{search}.onnx", search)
    for seed in args.seeds:
        run: dict = {"seed": seed}
        agent = args.out_dir / "rl" / (f"{stem}.pt" if len(args.seeds) == 1 else f"{stem}.s{seed}.pt")
        log(f"{stem}: train-agent --episodes {args.episodes} --seed {seed}")
        run["train"] = train(args, [model], agent, agent.with_suffix(".jsonl"), seed)
        if "error" in run["train"]:
            run["rl"] = {"error": "no agent (training failed)"}
        else:
            log(f"{stem}: optimise --search rl --rollouts {args.rollouts}" + (f" --beam {args.beam}" if args.beam else ""))
            run["rl"] = optimise(args, model, tmp / f"{stem}.rl.onnx", "rl", rl_extra(args, run["train"]["agent"]))
            if args.polish:
                log(f"{stem}: optimise --search rl ... --polish")
                run["rl_polish"] = optimise(args, model, tmp / f"{stem}.rlp.onnx", "rl",
                                            rl_extra(args, run["train"]["agent"]) + ["--polish"]
                                            + (["--never-below-greedy"] if args.never_below_greedy else []))
        row["runs"].append(run)
    row["train"], row["rl"] = row["runs"][0]["train"], row["runs"][0]["rl"]
    png = args.out_dir / f"bench_rl_{stem}.png"
    err = plot([r["train"].get("log") for r in row["runs"]], png,
               f"rlflow train-agent on {stem} ({args.episodes} episodes, seeds {' '.join(map(str, args.seeds))}, "
               f"{args.cost_model} cost)")
    row["plot"] = str(png) if err is None else None
    if err:
        row["plot_error"] = err
    return row


def rl_extra(args, agent: str) -> list[str]:
    extra = ["--agent", agent, "--rollouts", str(args.rollouts)]
    if args.beam or args.polish:
        extra += ["--budget", str(args.beam_budget)]
    if args.beam:
        extra += ["--beam", str(args.beam)]
    return extra


def generalise(args, tmp: Path) -> list[dict]:
    """One agent trained on every --generalise model, then one row per held-out --eval model."""
    train_names = [model_name(n) for n in args.generalise]
    tag = "+".join(train_names)
    agent = args.out_dir / "rl" / f"generalise.{tag}.pt"
    log(f"generalise: train-agent on {', '.join(train_names)} --episodes {args.episodes} --seed {args.seed}")
    trained = train(args, [model_path(n) for n in args.generalise], agent,
                    args.out_dir / "rl" / f"generalise.{tag}.jsonl")
    rows = []
    for name in args.eval:
        stem = model_name(name)
        model = model_path(name)
        row: dict = {"eval": stem, "eval_path": str(model), "train_models": train_names, "train": trained}
        for search in ("greedy", "taso"):
            log(f"generalise: {stem}: optimise --search {search}")
            row[search] = optimise(args, model, tmp / f"{stem}.{search}.onnx", search)
        if "error" in trained:
            row["rl"] = {"error": "no agent (training failed)"}
        else:
            log(f"generalise: {stem}: optimise --search rl --rollouts {args.rollouts}"
                + (f" --beam {args.beam}" if args.beam else "") + " (held out)")
            row["rl"] = optimise(args, model, tmp / f"{stem}.rl.onnx", "rl", rl_extra(args, trained["agent"]))
            if args.polish:  # the held-out agent's best graph, then greedy descent (no fallback: the agent alone)
                log(f"generalise: {stem}: optimise --search rl ... --polish (held out)")
                row["rl_polish"] = optimise(args, model, tmp / f"{stem}.rlp.onnx", "rl",
                                            rl_extra(args, trained["agent"]) + ["--polish"])
        rows.append(row)
    png = args.out_dir / f"bench_rl_generalise_{tag}.png"
    err = plot([trained.get("log")], png, f"rlflow train-agent on {', '.join(train_names)} (held out: "
                                          f"{', '.join(model_name(n) for n in args.eval)}; "
                                          f"{args.episodes} episodes, seed {args.seed}, {args.cost_model} cost)")
    for row in rows:
        row["plot"] = str(png) if err is None else None
        if err:
            row["plot_error"] = err
    return rows


# ---- table -----------------------------------------------------------------------------------------

def cell_err(msg: str) -> str:
    return "error: " + str(msg).replace("|", "\\|").replace("\n", " ")


def pct(res: dict) -> str:
    if "error" in res:
        return cell_err(res["error"])
    return f"{100 * res['improvement']:.2f}"


def num(v, fmt: str) -> str:
    return "n/a" if not isinstance(v, (int, float)) else fmt.format(v)


def vs_taso(row: dict) -> str:
    rl, taso = row["rl"], row["taso"]
    if "improvement" in rl and "improvement" in taso and "error" not in rl and "error" not in taso:
        return f"{100 * (rl['improvement'] - taso['improvement']):+.2f}"
    return "n/a"


def train_cells(t: dict, models: list[str]) -> list[str]:
    """training wall s, episodes to best, env steps to best, real env step ms."""
    if "error" in t:
        return [cell_err(t["error"]), "", "", ""]

    def per(key: str) -> str:
        d = t.get(key) or {}
        if len(models) == 1:
            return num(d.get(models[0]), "{}")
        return ", ".join(f"{m}: {num(d.get(m), '{}')}" for m in models)

    return [num(t.get("wall_s"), "{:.1f}"), per("episodes_to_best"), per("env_steps_to_best"),
            num(t.get("real_step_ms"), "{:.3f}")]


def rl_seconds(res: dict) -> str:
    return "" if "error" in res else num(res.get("search_s"), "{:.2f}")


def mean_std(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "n/a"
    m = sum(values) / len(values)
    if len(values) == 1:
        return fmt.format(m)
    sd = (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return f"{fmt.format(m)} ± {fmt.replace('+', '').format(sd)}"


def curve(log_path: str | None, episodes: int) -> list[float | None]:
    """The training log's best improvement (%) after a quarter, half, three quarters and all of the episodes."""
    marks = [max(1, round(episodes * q)) for q in (0.25, 0.5, 0.75, 1.0)]
    out: list[float | None] = [None] * 4
    try:
        lines = [json.loads(x) for x in Path(log_path).read_text().splitlines() if x.strip()] if log_path else []
    except (OSError, ValueError):
        return out
    for i, m in enumerate(marks):
        seen = [x for x in lines if x.get("episodes", 0) <= m and "best_improvement" in x]
        if seen:
            out[i] = 100 * seen[-1]["best_improvement"]
    return out


def table_seeds(rows: list[dict], episodes: int) -> str:
    """Per model, mean ± std over the seeds (sample std); a failed run is left out of the mean and counted."""
    q = [max(1, round(episodes * f)) for f in (0.25, 0.5, 0.75, 1.0)]
    lines = ["| model | greedy % (s) | taso % (s) | rl % | rl + polish % | polish vs greedy (pp) | "
             f"training best % after {q[0]} / {q[1]} / {q[2]} / {q[3]} episodes | training wall s | real env steps | "
             "rl (+ polish) optimise s | seeds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = r["runs"]
        ok = lambda key: [x[key] for x in runs if key in x and "improvement" in x[key]]  # noqa: E731
        rl, rlp = ok("rl"), ok("rl_polish")
        trains = [x["train"] for x in runs if "error" not in x["train"]]
        g = r["greedy"]
        vs = [100 * (x["improvement"] - g["improvement"]) for x in rlp] if "improvement" in g else []
        curves = [curve(t.get("log"), episodes) for t in trains]
        cur = " / ".join(mean_std([c[i] for c in curves if c[i] is not None], "{:.1f}") for i in range(4))
        steps = [t["env_steps"] + ((t.get("imitation") or {}).get("env_steps") or 0) for t in trains
                 if isinstance(t.get("env_steps"), int)]
        secs = mean_std([x["search_s"] for x in rl if isinstance(x.get("search_s"), (int, float))], "{:.1f}")
        if rlp:
            secs += " (" + mean_std([x["search_s"] for x in rlp if isinstance(x.get("search_s"), (int, float))], "{:.1f}") + ")"
        failed = len(runs) - len(rl)
        cells = [r["model"], f"{pct(g)} ({num(g.get('search_s'), '{:.2f}')})", f"{pct(r['taso'])} ({num(r['taso'].get('search_s'), '{:.2f}')})",
                 mean_std([100 * x["improvement"] for x in rl]), mean_std([100 * x["improvement"] for x in rlp]) if rlp else "-",
                 mean_std(vs, "{:+.2f}") if vs else "-", cur, mean_std([t["wall_s"] for t in trains], "{:.0f}"),
                 mean_std(steps, "{:.0f}"), secs, f"{len(runs)}" + (f" ({failed} failed)" if failed else "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_per_model(rows: list[dict]) -> str:
    lines = ["| model | greedy % | taso % | rl % | rl vs taso (pp) | training wall s | episodes to best | "
             "env steps to best | real env step ms | rl optimise s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["model"], pct(r["greedy"]), pct(r["taso"]), pct(r["rl"]), vs_taso(r),
                 *train_cells(r["train"], [r["model"]]), rl_seconds(r["rl"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def vs_per_model(r: dict, per_model_rows: list[dict]) -> str:
    """The held-out agent's improvement as a share of the per-model agent's, when both ran."""
    own = next((p for p in per_model_rows if p["model"] == r["eval"]), None)
    if own is None or "improvement" not in own["rl"] or "improvement" not in r["rl"]:
        return "n/a"
    if own["rl"]["improvement"] <= 0:
        return "n/a (per-model agent found nothing)"
    return f"{100 * r['rl']['improvement'] / own['rl']['improvement']:.1f}% of {pct(own['rl'])}"


def table_generalise(rows: list[dict], per_model_rows: list[dict]) -> str:
    lines = ["| eval (held out) | trained on | greedy % | taso % | rl % | rl vs taso (pp) | vs per-model agent | "
             "training best % | training wall s | episodes to best | env steps to best | real env step ms | "
             "rl optimise s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["train"]
        best = "" if "error" in t else ", ".join(
            f"{m}: {num(100 * v if isinstance(v, (int, float)) else None, '{:.2f}')}"
            for m, v in ((m, (t.get("best_improvement") or {}).get(m)) for m in r["train_models"]))
        cells = [r["eval"], ", ".join(r["train_models"]), pct(r["greedy"]), pct(r["taso"]), pct(r["rl"]), vs_taso(r),
                 vs_per_model(r, per_model_rows), best, *train_cells(t, r["train_models"]), rl_seconds(r["rl"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def has_error(row: dict) -> bool:
    return any("error" in (row.get(k) or {}) for k in ("greedy", "taso", "train", "rl")) or \
        any("error" in (run.get(k) or {}) for run in row.get("runs", []) for k in ("train", "rl", "rl_polish"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None,
                    help=f"zoo names or .onnx paths, one agent each (default: {' '.join(DEFAULT_MODELS)}; "
                         "not run with --generalise unless given)")
    ap.add_argument("--generalise", nargs="*", default=None, metavar="TRAIN",
                    help=f"train one agent on these models together (default: {' '.join(DEFAULT_TRAIN)}) "
                         "and evaluate it on --eval")
    ap.add_argument("--eval", nargs="+", default=[DEFAULT_EVAL],
                    help=f"held-out models of --generalise, each evaluated with the one agent (default: {DEFAULT_EVAL})")
    ap.add_argument("--episodes", type=int, default=200, help="train-agent --episodes (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="train-agent --seed (default 0)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="per-model agents: one per seed, and a mean ± std table over them (default: --seed alone)")
    ap.add_argument("--polish", action="store_true",
                    help="also run optimise --search rl --polish (greedy descent from the agent's best graph) per agent")
    ap.add_argument("--never-below-greedy", action="store_true",
                    help="with --polish: optimise --never-below-greedy too (greedy from the input as a fallback; "
                         "search_report.phases records which graph was returned)")
    ap.add_argument("--rollouts", type=int, default=8, help="optimise --search rl --rollouts (default 8)")
    ap.add_argument("--beam", type=int, default=0,
                    help="optimise --search rl --beam W: policy-guided beam search after the rollouts (default 0: none)")
    ap.add_argument("--beam-budget", type=int, default=100000,
                    help="optimise --budget with --beam: states the beam may cost (default 100000)")
    ap.add_argument("--config", default=None, help="train-agent --config (agent hyperparameters YAML)")
    ap.add_argument("--cost-model", default="analytic", choices=["auto", "cpu", "analytic", "cudnn", "recorded"],
                    help="recorded: the recorded H100 timings (configs/devices/h100-cost-table.json), deterministic; "
                         "use it with --device-profile h100")
    ap.add_argument("--imitation-epochs", type=int, default=0,
                    help="train-agent --imitation-epochs: behaviour cloning of greedy before PPO (default 0: none)")
    ap.add_argument("--dagger-rounds", type=int, default=0, help="train-agent --dagger-rounds (default 0)")
    ap.add_argument("--device-profile", default="h100-datasheet", help="analytic device profile (default h100-datasheet, the profile the numbers in docs/rl.md were measured with; '' for none)")
    ap.add_argument("--deterministic", action=argparse.BooleanOptionalAction, default=None,
                    help="pass --deterministic (default: when the cost model is analytic)")
    ap.add_argument("--time-limit", type=float, default=120, help="optimise --time-limit for greedy/taso/rl (default 120)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="kill any one rlflow run after this many seconds and record it as an error (default: no limit)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results", help="results folder (default results/)")
    ap.add_argument("--out", default=None, help="stem of the .md/.json files (default OUT_DIR/bench_rl, or "
                                                "OUT_DIR/bench_rl_generalise when only --generalise runs)")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    if args.deterministic is None:
        args.deterministic = args.cost_model == "analytic"  # recorded is deterministic by itself
    if args.generalise is not None and not args.generalise:
        args.generalise = list(DEFAULT_TRAIN)
    overlap = {model_name(n) for n in args.eval} & {model_name(n) for n in args.generalise or []}
    if args.generalise is not None and overlap:
        print(f"bench_rl: error: --eval {', '.join(sorted(overlap))} is one of the training models; it must be held out",
              file=sys.stderr)
        return 2
    args.seeds = args.seeds or [args.seed]
    if args.episodes < 1 or args.rollouts < 0:
        print("bench_rl: error: --episodes must be >= 1 and --rollouts >= 0", file=sys.stderr)
        return 2
    run_models = args.models if args.models is not None else ([] if args.generalise is not None else DEFAULT_MODELS)
    args.out_dir = args.out_dir.resolve()
    (args.out_dir / "rl").mkdir(parents=True, exist_ok=True)
    out_stem = Path(args.out) if args.out else args.out_dir / ("bench_rl" if run_models else "bench_rl_generalise")

    config = {"cost_model": args.cost_model, "device_profile": args.device_profile or None,
              "deterministic": args.deterministic, "episodes": args.episodes, "seed": args.seed,
              "seeds": args.seeds, "polish": args.polish,
              "rollouts": args.rollouts, "beam": args.beam, "time_limit_s": args.time_limit, "config": args.config,
              "imitation_epochs": args.imitation_epochs, "dagger_rounds": args.dagger_rounds,
              "binary": args.binary, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    version = subprocess.run([args.binary, "--version"], capture_output=True, text=True).stdout.strip() \
        if Path(args.binary).exists() else None
    config["rlflow_version"] = version

    rows, gen_rows = [], []
    with tempfile.TemporaryDirectory(prefix="rlflow-bench-rl-") as tmp:
        for name in run_models:
            rows.append(per_model(args, name, Path(tmp)))
            r = rows[-1]
            log(f"{r['model']}: greedy {pct(r['greedy'])}, taso {pct(r['taso'])}, rl {pct(r['rl'])} (% improvement)")
        if args.generalise is not None:
            gen_rows.extend(generalise(args, Path(tmp)))

    note = (f"cost model {args.cost_model}"
            + (f", device profile {args.device_profile}" if args.device_profile else "")
            + (", deterministic" if args.deterministic else "")
            + f"; {args.episodes} training episodes, seed{'s' if len(args.seeds) > 1 else ''} {' '.join(map(str, args.seeds))}"
            + (f", {args.imitation_epochs} epochs of imitation of greedy first" if args.imitation_epochs else "")
            + (f" and {args.dagger_rounds} DAgger rounds" if args.dagger_rounds else "")
            + f"; rl: {args.rollouts} rollouts" + (f", beam {args.beam}" if args.beam else "")
            + (", rl + polish: then greedy descent from its best graph" if args.polish else "") + "; "
              f"greedy/taso time limit {args.time_limit:g} s. Improvement = (before - after) / before of the cost.")
    parts = []
    if rows:
        parts.append("## RL vs greedy / TASO (one agent per model)\n\n" + table_per_model(rows))
    if rows and (len(args.seeds) > 1 or args.polish):
        parts.append(f"## Over seeds {' '.join(map(str, args.seeds))} (mean ± std)\n\n" + table_seeds(rows, args.episodes))
    if gen_rows:
        parts.append("## Generalisation (one agent, evaluated on a held-out model)\n\n" + table_generalise(gen_rows, rows))
    text = note + "\n\n" + "\n\n".join(parts)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(out_stem) + ".md").write_text(text + "\n")
    Path(str(out_stem) + ".json").write_text(json.dumps({"config": config, "per_model": rows, "generalise": gen_rows},
                                                        indent=2, default=str))
    print(text)
    for r in rows + gen_rows:
        if r.get("plot_error"):
            log(f"plot of {r.get('model', r.get('eval'))} failed: {r['plot_error']}")
    log(f"wrote {out_stem}.md, {out_stem}.json")
    return 1 if any(has_error(r) for r in rows + gen_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
