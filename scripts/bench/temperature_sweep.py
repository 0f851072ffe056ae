#!/usr/bin/env python3
"""The dream-temperature sweep (RLFlow table 5.2): agents trained inside one world model at several temperatures.

1. The world model (skipped with --world-model WM): `rlflow train-world-model --model M --out OUT_DIR/wm.pt
   --episodes W --seed 0 --deterministic --json` with a random frozen encoder, or (--agent-episodes A > 0) with the
   encoder of a model-free agent `rlflow train-agent --model M --out OUT_DIR/agent.pt --episodes A` (an old wm.pt,
   its rollout data and log are removed first).
2. Per temperature tau (--temperatures) and seed (0 .. --seeds - 1): `rlflow train-agent --world-model WM --model M
   --out OUT_DIR/dream_t{tau}_s{seed}.pt --episodes D --temperature tau --seed seed --dream-batch B --eval-every 0
   --deterministic --json`.
   dream score = mean dream return of the last PPO update; real score = improvement (percent) of the agent's greedy
   rollout in the real environment.
3. One row per (penalty, tau): dream score and real score as mean +- std over the seeds (sample std, n - 1; 0 for
   one seed), mean dream step ms and mean training seconds.

Countering model exploitation (--ensemble K, --penalties L ...): the world model is a deep ensemble of K members
(model.ensemble K); the dream samples each next state from a random member (MBPO) and, for penalty L > 0, rewards
the members' mean reward minus L times their standard deviation (MOPO). Each penalty gets its own rows; the
unpenalised dream score (members' mean reward) and its gap to the real score are reported next to the objective,
with, per penalty, the largest gap and the rank correlation of dream and real score across the temperatures.
--cost-model recorded runs on the recorded H100 timings (deterministic without --deterministic).
--match-features builds the world model with model.match_features (an action is also the chosen match's features,
carried by the dream per location; docs/rl.md).

Every run passes --device-profile (default h100-datasheet; '' for none). Writes --md (markdown table, headed by the model,
episodes and the world model's held-out metrics), --json-out (every number) and --png (dream score and real score
against tau, std error bars, each seed as a dot). A failing run becomes an "error: ..." cell, never a crash; the exit
status is 1 when any run failed.

    scripts/bench/temperature_sweep [--model models/bert_base.onnx] [--temperatures 0.1 0.5 1.0 1.5 2.0 3.0] [--seeds 5]
    scripts/bench/temperature_sweep --world-model results/temperature_sweep/wm.pt --dream-episodes 640
    scripts/bench/temperature_sweep --ensemble 4 --penalties 0 1 --cost-model recorded --device-profile h100
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
import rlflow_json  # noqa: E402

DEFAULT_TEMPERATURES = [0.1, 0.5, 1.0, 1.5, 2.0, 3.0]
WM_METRICS = ("heldout_nll", "reward_mse", "mask_accuracy")


def log(msg: str) -> None:
    print(f"[temperature_sweep] {msg}", file=sys.stderr, flush=True)


rlflow = rlflow_json.rlflow


def common_args(args) -> list[str]:
    out = ["--model", str(args.model), "--cost-model", args.cost_model]
    if args.cost_model == "analytic":
        out += ["--deterministic"]
    if args.device_profile:
        out += ["--device-profile", args.device_profile]
    return out


fresh = rlflow_json.fresh


def last_log_record(path: Path) -> dict:
    """The last JSON object of a JSONL log ({} when there is none)."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError):
        return {}
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            return rec
    return {}


def build_world_model(args) -> dict:
    """Steps 1: {world_model, agent, heldout_nll, ...} or {error, ...}."""
    agent, wm = args.out_dir / "agent.pt", args.out_dir / "wm.pt"
    fresh(agent, Path(f"{agent}.jsonl"), wm, Path(f"{wm}.jsonl"), Path(f"{wm}.data"))
    res: dict = {"built": True, "agent_episodes": args.agent_episodes, "wm_episodes": args.wm_episodes}
    encoder: list[str] = []
    if args.agent_episodes > 0:
        log(f"train-agent (model-free) --episodes {args.agent_episodes} -> {agent}")
        r = rlflow(args.binary, ["train-agent", *common_args(args), "--out", str(agent), "--episodes",
                                 str(args.agent_episodes), "--seed", "0"], args.timeout)
        res["agent_wall_s"] = r["wall_s"]
        if not r["ok"]:
            res["error"] = f"train-agent: {r['error']}"
            return res
        res["agent"] = r["doc"].get("agent", str(agent))
        res["agent_doc"] = r["doc"]
        encoder = ["--agent", res["agent"]]
    wm_config: list[str] = []
    if args.ensemble > 1 or not args.count_state or args.match_features:
        cfg = args.out_dir / "world_model.yaml"
        cfg.write_text(f"model:\n  ensemble: {args.ensemble}\n  count_state: {'true' if args.count_state else 'false'}\n"
                       f"  match_features: {'true' if args.match_features else 'false'}\n")
        wm_config = ["--config", str(cfg)]
    log(f"train-world-model --episodes {args.wm_episodes} (ensemble {args.ensemble}) -> {wm}")
    r = rlflow(args.binary, ["train-world-model", *common_args(args), *encoder, *wm_config, "--out", str(wm),
                             "--episodes", str(args.wm_episodes), "--seed", "0"], args.timeout)
    res["wm_wall_s"] = r["wall_s"]
    if not r["ok"]:
        res["error"] = f"train-world-model: {r['error']}"
        return res
    doc = r["doc"]
    res["world_model"] = doc.get("world_model", str(wm))
    res["wm_doc"] = doc
    for k in (*WM_METRICS, "real_steps", "real_step_ms", "episodes"):
        res[k] = doc.get(k)
    return res


def given_world_model(args) -> dict:
    """--world-model: its held-out metrics come from the last line of its log (WM.jsonl), when there is one."""
    wm = args.world_model
    res: dict = {"built": False, "world_model": str(wm)}
    if not wm.is_file():
        res["error"] = f"{wm}: no such file"
        return res
    rec = last_log_record(Path(f"{wm}.jsonl"))
    for k in WM_METRICS:
        res[k] = rec.get(k)
    return res


def dream_run(args, wm: str, penalty: float, tau: float, seed: int) -> dict:
    out = args.out_dir / (f"dream_p{penalty:g}_t{tau:g}_s{seed}.pt" if penalty else f"dream_t{tau:g}_s{seed}.pt")
    fresh(out, Path(f"{out}.jsonl"))
    extra = ["--uncertainty-penalty", f"{penalty:g}"] if penalty else []
    r = rlflow(args.binary, ["train-agent", "--world-model", wm, *common_args(args), "--out", str(out), "--episodes",
                             str(args.dream_episodes), "--temperature", f"{tau:g}", "--seed", str(seed),
                             "--dream-batch", str(args.dream_batch), "--eval-every", "0", *extra], args.timeout)
    run: dict = {"penalty": penalty, "temperature": tau, "seed": seed, "wall_s": r["wall_s"]}
    if not r["ok"]:
        run["error"] = r["error"]
        return run
    doc = r["doc"]
    for k in ("agent", "dream_score", "dream_score_raw", "dream_greedy_score", "disagreement", "real_score", "dream_step_ms", "dream_steps",
              "seconds", "real_improvement", "updates", "dream_episodes", "real_eval_steps"):
        run[k] = doc.get(k)
    missing = [k for k in ("dream_score", "real_score") if not isinstance(run.get(k), (int, float))]
    if missing:
        run["error"] = f"no {' / '.join(missing)} in the train-agent output"
    return run


# ---- table -----------------------------------------------------------------------------------------

def cell_err(msg: str) -> str:
    return "error: " + str(msg).replace("|", "\\|").replace("\n", " ")


def stats(xs: list[float]) -> tuple[float, float] | None:
    """(mean, sample std) or None; std is 0 for a single value."""
    xs = [x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]
    if not xs:
        return None
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def summarise(penalty: float, tau: float, runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    row: dict = {"penalty": penalty, "temperature": tau, "seeds": len(runs), "ok": len(ok),
                 "errors": [f"seed {r['seed']}: {r['error']}" for r in runs if "error" in r]}
    for r in ok:
        raw = r.get("dream_score_raw", r.get("dream_score"))
        r["gap"] = raw - r["real_score"] if isinstance(raw, (int, float)) else None
        g = r.get("dream_greedy_score")
        r["greedy_gap"] = g - r["real_score"] if isinstance(g, (int, float)) else None
    for key in ("dream_score", "dream_score_raw", "dream_greedy_score", "real_score", "gap", "greedy_gap", "disagreement",
                "dream_step_ms", "seconds"):
        s = stats([r.get(key) for r in ok])
        row[key] = None if s is None else {"mean": s[0], "std": s[1]}
    return row


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def agreement(rows: list[dict]) -> dict:
    """Per penalty, for the training dream score (unpenalised mean return of the last update) and for the greedy
    dream score (the final controller's greedy rollout in the dream, the prediction of the real greedy rollout): the
    largest |dream - real| of the row means, and Spearman's rank correlation of the row means of dream and real score
    across the temperatures (None with fewer than 3 rows)."""
    def spearman(d: list[float], t: list[float]) -> float | None:
        if len(d) < 3:
            return None
        a, b = ranks(d), ranks(t)
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        va = sum((x - ma) ** 2 for x in a)
        vb = sum((y - mb) ** 2 for y in b)
        return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / math.sqrt(va * vb) if va > 0 and vb > 0 else None

    out = {}
    for pen in sorted({r["penalty"] for r in rows}):
        rs = [r for r in rows if r["penalty"] == pen and r.get("dream_score_raw") and r.get("real_score")]
        d = [r["dream_score_raw"]["mean"] for r in rs]
        t = [r["real_score"]["mean"] for r in rs]
        gs = [r for r in rs if r.get("dream_greedy_score")]
        g = [r["dream_greedy_score"]["mean"] for r in gs]
        gt = [r["real_score"]["mean"] for r in gs]
        out[pen] = {"max_gap": max((abs(x - y) for x, y in zip(d, t)), default=None), "spearman": spearman(d, t), "rows": len(rs),
                    "greedy_max_gap": max((abs(x - y) for x, y in zip(g, gt)), default=None),
                    "greedy_spearman": spearman(g, gt)}
    return out


def fmt_pm(v: dict | None, fmt: str, sd_fmt: str | None = None) -> str:
    return "n/a" if v is None else f"{fmt.format(v['mean'])} ± {(sd_fmt or fmt).format(v['std'])}"


def fmt_mean(v: dict | None, fmt: str) -> str:
    return "n/a" if v is None else fmt.format(v["mean"])


def table(rows: list[dict]) -> str:
    lines = ["| penalty | tau | dream score (objective) | dream score, unpenalised | real score % | gap (unpenalised - real) | "
             "greedy dream score | greedy gap (greedy dream - real) | reward disagreement | dream step ms | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tau = f"{r['temperature']:g}"
        if r["ok"] == 0:
            err = cell_err(r["errors"][0] if r["errors"] else "no runs")
            cells = [f"{r['penalty']:g}", tau, err, err, err, "", "", "", "", "", ""]
        else:
            cells = [f"{r['penalty']:g}", tau, fmt_pm(r["dream_score"], "{:.3f}"), fmt_pm(r["dream_score_raw"], "{:.3f}"),
                     fmt_pm(r["real_score"], "{:.2f}"), fmt_pm(r["gap"], "{:+.2f}", "{:.2f}"),
                     fmt_pm(r["dream_greedy_score"], "{:.2f}"), fmt_pm(r["greedy_gap"], "{:+.2f}", "{:.2f}"),
                     fmt_mean(r["disagreement"], "{:.3f}"),
                     fmt_mean(r["dream_step_ms"], "{:.4f}"), fmt_mean(r["seconds"], "{:.1f}")]
            if r["errors"]:  # some seeds failed: the numbers are over the others
                cells[2] += f" ({r['ok']} of {r['seeds']} seeds; {cell_err('; '.join(r['errors']))})"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def num(v, fmt: str) -> str:
    return "n/a" if not isinstance(v, (int, float)) else fmt.format(v)


def header(args, wm: dict) -> str:
    model = Path(args.model).stem
    prof = f", device profile {args.device_profile}" if args.device_profile else ""
    if "error" in wm and not wm.get("world_model"):
        wm_text = f"world model: {cell_err(wm['error'])}"
    else:
        enc = (f"the encoder of a {wm['agent_episodes']}-episode model-free agent" if wm.get("agent_episodes")
               else "a random frozen encoder")
        made = (f"built from {enc} and {wm['wm_episodes']} random-agent episodes"
                if wm.get("built") else f"given ({wm.get('world_model')})")
        wm_text = (f"world model {made}: held-out NLL {num(wm.get('heldout_nll'), '{:.4f}')}, "
                   f"reward MSE {num(wm.get('reward_mse'), '{:.5f}')}, "
                   f"mask accuracy {num(wm.get('mask_accuracy'), '{:.4f}')}")
    ens = (f"an ensemble of {args.ensemble} world models" if args.ensemble > 1 else "one world model")
    ens += " with explicit location counts (count_state)" if args.count_state else " without count_state"
    if args.match_features:
        ens += " and the chosen match's features (match_features)"
    return (f"Temperature sweep on {model}{prof}, {args.cost_model} cost (deterministic), {ens}; {args.dream_episodes} dream episodes "
            f"per agent ({args.dream_batch} per PPO update), seeds 0..{args.seeds - 1}; {wm_text}. Mean ± sample std over seeds; real score = improvement "
            f"(%) of the greedy rollout in the real environment.")


def plot(rows: list[dict], runs: list[dict], out: Path, title: str) -> str | None:
    """Dream score and real score against tau; returns an error message, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, (key, name) in zip(axes, (("dream_score_raw", "dream score (unpenalised; training and greedy)"),
                                          ("real_score", "real score (% improvement)"))):
            drawn = False
            for n, pen in enumerate(sorted({r["penalty"] for r in rows})):
                c = f"C{n}"
                pts = [(r["temperature"], r[key]) for r in rows if r["penalty"] == pen and r.get(key)]
                if not pts:
                    continue
                drawn = True
                ax.errorbar([t for t, _ in pts], [v["mean"] for _, v in pts], yerr=[v["std"] for _, v in pts],
                            color=c, marker="o", capsize=4, label=f"penalty {pen:g}: mean ± std")
                if key == "dream_score_raw":  # the greedy dream rollout: the dream's prediction of the real score
                    gp = [(r["temperature"], r["dream_greedy_score"]) for r in rows
                          if r["penalty"] == pen and r.get("dream_greedy_score")]
                    if gp:
                        ax.errorbar([t for t, _ in gp], [v["mean"] for _, v in gp], yerr=[v["std"] for _, v in gp],
                                    color=c, marker="s", linestyle="--", capsize=4,
                                    label=f"penalty {pen:g}: greedy dream rollout")
                seeds = [(r["temperature"], r[key]) for r in runs if r.get("penalty") == pen
                         and "error" not in r and isinstance(r.get(key), (int, float))]
                ax.scatter([t for t, _ in seeds], [v for _, v in seeds], color=c, alpha=0.3, s=14)
            if drawn:
                ax.legend(fontsize=8)
            else:
                ax.text(0.5, 0.5, "no successful runs", ha="center", va="center", transform=ax.transAxes,
                        color="grey")
            ax.set_xlabel("temperature tau")
            ax.set_ylabel(name)
            ax.set_title(name)
            ax.grid(True, alpha=0.3)
            if key == "real_score":
                ax.axhline(0.0, color="grey", linewidth=0.6)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
        plt.close(fig)
    except Exception as e:  # noqa: BLE001 — a plot failure must not lose the sweep's numbers
        return f"{type(e).__name__}: {e}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "bert_base.onnx",
                    help="ONNX model (default models/bert_base.onnx)")
    ap.add_argument("--temperatures", type=float, nargs="+", default=DEFAULT_TEMPERATURES,
                    help=f"dream temperatures (default {' '.join(f'{t:g}' for t in DEFAULT_TEMPERATURES)})")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 .. SEEDS-1 per temperature (default 5)")
    ap.add_argument("--world-model", type=Path, default=None,
                    help="use this world model (train-world-model --out) instead of building one")
    ap.add_argument("--agent-episodes", type=int, default=0,
                    help="episodes of a model-free agent whose encoder the world model uses (default 0: a random "
                         "frozen encoder, no real steps spent on it)")
    ap.add_argument("--wm-episodes", type=int, default=30, help="train-world-model --episodes (default 30)")
    ap.add_argument("--dream-episodes", type=int, default=1024, help="dream train-agent --episodes (default 1024)")
    ap.add_argument("--dream-batch", type=int, default=32, help="train-agent --dream-batch (default 32)")
    ap.add_argument("--ensemble", type=int, default=1, help="world-model ensemble members (model.ensemble; default 1)")
    ap.add_argument("--no-count-state", dest="count_state", action="store_false",
                    help="build the world model with model.count_state false (mask and count heads predict afresh; "
                         "the model before explicit location counts)")
    ap.add_argument("--match-features", action="store_true",
                    help="build the world model with model.match_features true (an action is also the chosen match's "
                         "features, carried by the dream per location; needs count_state)")
    ap.add_argument("--penalties", type=float, nargs="+", default=[0.0],
                    help="train-agent --uncertainty-penalty values, each with every temperature (default 0; > 0 needs --ensemble >= 2)")
    ap.add_argument("--cost-model", default="analytic", choices=["analytic", "recorded"],
                    help="analytic (with --deterministic) or recorded (the recorded H100 timings; use --device-profile h100)")
    ap.add_argument("--device-profile", default="h100-datasheet", help="analytic device profile (default h100-datasheet, the profile the numbers in docs/rl.md were measured with; '' for none)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="kill any one rlflow run after this many seconds and record it as an error (default: no limit)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "temperature_sweep",
                    help="checkpoints and logs (default results/temperature_sweep)")
    ap.add_argument("--md", type=Path, default=ROOT / "results" / "temperature_sweep.md")
    ap.add_argument("--json-out", type=Path, default=ROOT / "results" / "temperature_sweep.json")
    ap.add_argument("--png", type=Path, default=ROOT / "results" / "temperature_sweep.png")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    if args.seeds < 1 or min(args.wm_episodes, args.dream_episodes, args.dream_batch) < 1 or args.agent_episodes < 0:
        print("temperature_sweep: error: --seeds, --dream-batch and the episode counts must be >= 1 "
              "(--agent-episodes >= 0)", file=sys.stderr)
        return 2
    if args.ensemble < 1 or any(p < 0 for p in args.penalties) or (args.ensemble < 2 and any(p > 0 for p in args.penalties)
                                                                     and args.world_model is None):
        print("temperature_sweep: error: --ensemble must be >= 1, penalties >= 0, and a penalty needs --ensemble >= 2",
              file=sys.stderr)
        return 2
    if any(not math.isfinite(t) or t <= 0 for t in args.temperatures):
        print("temperature_sweep: error: temperatures must be > 0", file=sys.stderr)
        return 2
    args.model = args.model.resolve()
    args.out_dir = args.out_dir.resolve()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.world_model is not None:
        args.world_model = args.world_model.resolve()

    config = {"model": str(args.model), "device_profile": args.device_profile or None, "deterministic": True,
              "cost_model": args.cost_model, "ensemble": args.ensemble, "count_state": args.count_state,
              "match_features": args.match_features, "penalties": args.penalties,
              "temperatures": args.temperatures, "seeds": args.seeds, "agent_episodes": args.agent_episodes,
              "wm_episodes": args.wm_episodes, "dream_episodes": args.dream_episodes,
              "world_model": str(args.world_model) if args.world_model else None, "binary": args.binary,
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    config["rlflow_version"] = subprocess.run([args.binary, "--version"], capture_output=True, text=True).stdout.strip() \
        if Path(args.binary).exists() else None

    if not args.model.exists():
        wm = {"error": f"{args.model}: missing (scripts/corpus/export_models {args.model.stem})"}
    elif args.world_model is not None:
        wm = given_world_model(args)
    else:
        wm = build_world_model(args)
    if "error" in wm:
        log(f"world model: {wm['error']}")
    else:
        log(f"world model {wm['world_model']}: held-out NLL {num(wm.get('heldout_nll'), '{:.4f}')}, "
            f"reward MSE {num(wm.get('reward_mse'), '{:.5f}')}, mask accuracy {num(wm.get('mask_accuracy'), '{:.4f}')}")

    runs: list[dict] = []
    for pen in args.penalties:
        for tau in args.temperatures:
            for seed in range(args.seeds):
                if "error" in wm:
                    runs.append({"penalty": pen, "temperature": tau, "seed": seed, "error": f"no world model ({wm['error']})"})
                    continue
                log(f"penalty {pen:g}, tau {tau:g}, seed {seed}: train-agent --world-model --episodes {args.dream_episodes}")
                run = dream_run(args, wm["world_model"], pen, tau, seed)
                runs.append(run)
                if "error" in run:
                    log(f"penalty {pen:g}, tau {tau:g}, seed {seed}: {run['error']}")
                else:
                    log(f"penalty {pen:g}, tau {tau:g}, seed {seed}: dream score {run['dream_score']:.3f} "
                        f"(unpenalised {num(run.get('dream_score_raw'), '{:.3f}')}; greedy "
                        f"{num(run.get('dream_greedy_score'), '{:.2f}')}), "
                        f"real score {run['real_score']:.2f}% ({num(run.get('seconds'), '{:.1f}')} s)")
    rows = [summarise(pen, tau, [r for r in runs if r["penalty"] == pen and r["temperature"] == tau])
            for pen in args.penalties for tau in args.temperatures]
    agree = agreement(rows)

    head = header(args, wm)
    lines = [f"- penalty {pen:g}: largest |unpenalised dream - real| {num(a['max_gap'], '{:.2f}')} points; "
             f"Spearman rank correlation of dream and real score over the temperatures {num(a['spearman'], '{:+.2f}')}; "
             f"greedy dream: largest |greedy dream - real| {num(a['greedy_max_gap'], '{:.2f}')} points, "
             f"Spearman {num(a['greedy_spearman'], '{:+.2f}')}"
             for pen, a in agree.items()]
    text = head + "\n\n" + table(rows) + "\n\n" + "\n".join(lines)
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(text + "\n")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"config": config, "world_model": wm, "rows": rows, "runs": runs,
                                         "agreement": {f"{k:g}": v for k, v in agree.items()}},
                                        indent=2, default=str))
    err = plot(rows, runs, args.png, f"dream temperature sweep: {args.model.stem}, {args.dream_episodes} dream "
                                     f"episodes, {args.seeds} seed(s)")
    print(text)
    if err:
        log(f"plot failed: {err}")
    log(f"wrote {args.md}, {args.json_out}" + ("" if err else f", {args.png}"))
    return 1 if "error" in wm or any("error" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
