#!/usr/bin/env python3
"""The model-based benchmark: real environment steps of the dream-trained agent against the model-free agent.

Per model (default squeezenet1_1 resnet18 bert_base), analytic cost model (--device-profile, default h100-datasheet),
or the recorded H100 timings (--cost-model recorded --device-profile h100):
1. greedy and taso: `rlflow optimise M --search greedy|taso`.
2. Model-based: `rlflow train-world-model --model M --out DIR/M.wm.pt --episodes W --seed S` (random frozen encoder:
   no real steps are spent on it), then `rlflow train-agent --world-model DIR/M.wm.pt --model M --out DIR/M.mb.pt
   --episodes D --dream-batch B --eval-every 0 --seed S`. Real steps = the data set's steps + the final real
   evaluation rollout. Its final improvement: `rlflow optimise M --search rl --agent DIR/M.mb.pt --rollouts R`.
3. Model-free: `rlflow train-agent --model M --out DIR/M.mf.pt --episodes E --seed S`, continued with --resume up to
   E, 2E, 4E, ... --max-mf-episodes; after each stage the same optimise --rollouts R. Its real steps are its
   training env steps. The first stage whose improvement reaches the model-based one gives "model-free steps to
   match" (model-free rollouts at optimise time are not counted for either agent).
4. Dream step time (train-agent's dream_step_ms) against the real step time (train-world-model's real_step_ms).

Writes --md and --json-out. A failing run becomes an "error: ..." cell; the exit status is 1 when any run failed.

    scripts/bench/bench_model_based [--models squeezenet1_1 resnet18 bert_base] [--seed 0] [--wm-episodes 30]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("lib", "bench")]
import rlflow_json  # noqa: E402
from bench_rl import cost_args, model_name, model_path, optimise  # noqa: E402

rlflow = rlflow_json.rlflow


def log(msg: str) -> None:
    print(f"[bench_model_based] {msg}", file=sys.stderr, flush=True)


fresh = rlflow_json.fresh


def model_based(args, model: Path, name: str) -> dict:
    wm, agent = args.out_dir / f"{name}.wm.pt", args.out_dir / f"{name}.mb.pt"
    fresh(wm, Path(f"{wm}.jsonl"), Path(f"{wm}.data"), agent, Path(f"{agent}.jsonl"))
    log(f"{name}: train-world-model --episodes {args.wm_episodes}")
    r = rlflow(args.binary, ["train-world-model", "--model", str(model), "--out", str(wm), "--episodes",
                             str(args.wm_episodes), "--seed", str(args.seed), *cost_args(args)], args.timeout)
    if not r["ok"]:
        return {"error": f"train-world-model: {r['error']}"}
    w = r["doc"]
    res = {"wm_wall_s": r["wall_s"], "data_steps": w.get("data_steps"), "real_step_ms": w.get("real_step_ms"),
           "heldout_nll": w.get("heldout_nll"), "reward_mse": w.get("reward_mse"),
           "done_accuracy": w.get("done_accuracy"), "mask_accuracy": w.get("mask_accuracy")}
    log(f"{name}: train-agent --world-model --episodes {args.dream_episodes} --dream-batch {args.dream_batch}")
    r = rlflow(args.binary, ["train-agent", "--world-model", str(wm), "--model", str(model), "--out", str(agent),
                             "--episodes", str(args.dream_episodes), "--dream-batch", str(args.dream_batch),
                             "--eval-every", "0", "--seed", str(args.seed), *cost_args(args)], args.timeout)
    if not r["ok"]:
        res["error"] = f"train-agent --world-model: {r['error']}"
        return res
    d = r["doc"]
    res.update({"dream_wall_s": r["wall_s"], "dream_steps": d.get("dream_steps"), "dream_step_ms": d.get("dream_step_ms"),
                "dream_score": d.get("dream_score"), "greedy_real_score": d.get("real_score"),
                "eval_steps": d.get("real_eval_steps")})
    res["real_steps"] = (res["data_steps"] or 0) + (res["eval_steps"] or 0)
    o = optimise(args, model, args.out_dir / f"{name}.mb.onnx", "rl",
                 ["--agent", str(agent), "--rollouts", str(args.rollouts)])
    res["optimise"] = o
    if "error" in o:
        res["error"] = f"optimise: {o['error']}"
    else:
        res["improvement"] = o["improvement"]
    return res


def model_free(args, model: Path, name: str, target: float | None) -> dict:
    """Stages of one model-free run until its optimise improvement reaches `target` (or the episode cap)."""
    agent = args.out_dir / f"{name}.mf.pt"
    fresh(agent, Path(f"{agent}.jsonl"))
    stages, episodes, res = [], args.mf_episodes, {}
    while True:
        log(f"{name}: model-free train-agent --episodes {episodes}")
        cmd = ["train-agent", "--model", str(model), "--out", str(agent), "--episodes", str(episodes),
               "--seed", str(args.seed), *cost_args(args)]
        if stages:
            cmd.append("--resume")
        r = rlflow(args.binary, cmd, args.timeout)
        if not r["ok"]:
            res["error"] = f"train-agent: {r['error']}"
            break
        o = optimise(args, model, args.out_dir / f"{name}.mf.onnx", "rl",
                     ["--agent", str(agent), "--rollouts", str(args.rollouts)])
        stage = {"episodes": episodes, "env_steps": r["doc"].get("env_steps"), "improvement": o.get("improvement"),
                 "train_wall_s": r["wall_s"]}
        if "error" in o:
            stage["error"] = o["error"]
        stages.append(stage)
        imp = stage.get("improvement")
        if target is not None and isinstance(imp, float) and imp >= target - 1e-9 and "steps_to_match" not in res:
            res["steps_to_match"] = stage["env_steps"]
            res["episodes_to_match"] = episodes
            break
        if episodes * 2 > args.max_mf_episodes:
            break
        episodes *= 2
    res["stages"] = stages
    if stages:
        res["improvement"] = stages[-1].get("improvement")
        res["env_steps"] = stages[-1].get("env_steps")
    return res


def pct(v) -> str:
    return f"{100 * v:.2f}%" if isinstance(v, (int, float)) else "n/a"


def table(rows: list[dict]) -> str:
    head = ("| model | greedy | taso | model-free (train steps) | model-based (real steps) | model-free steps to match "
            "| model-based / model-free steps | real step ms | dream step ms | dream speed-up |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        mb, mf = r.get("model_based", {}), r.get("model_free", {})
        cells = [r["model"], pct(r.get("greedy", {}).get("improvement")), pct(r.get("taso", {}).get("improvement"))]
        cells.append(f"{pct(mf.get('improvement'))} ({mf.get('env_steps', 'n/a')})" if "error" not in mf
                     else "error: " + mf["error"])
        cells.append(f"{pct(mb.get('improvement'))} ({mb.get('real_steps', 'n/a')})" if "error" not in mb
                     else "error: " + mb["error"])
        match = mf.get("steps_to_match")
        cells.append(str(match) if match is not None else f"not reached in {mf.get('env_steps', 'n/a')}")
        ratio = (mb["real_steps"] / match) if match and isinstance(mb.get("real_steps"), int) else None
        cells.append(f"{100 * ratio:.0f}%" if ratio is not None else
                     (f"< {100 * mb['real_steps'] / mf['env_steps']:.0f}%" if match is None and mf.get("env_steps")
                      and isinstance(mb.get("real_steps"), int) and "improvement" in mb else "n/a"))
        rs, ds = mb.get("real_step_ms"), mb.get("dream_step_ms")
        cells += [f"{rs:.3f}" if isinstance(rs, float) else "n/a", f"{ds:.4f}" if isinstance(ds, float) else "n/a",
                  f"{rs / ds:.0f}x" if isinstance(rs, float) and isinstance(ds, float) and ds > 0 else "n/a"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["squeezenet1_1", "resnet18", "bert_base"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wm-episodes", type=int, default=30, help="random-agent episodes for the world model (default 30)")
    ap.add_argument("--dream-episodes", type=int, default=2048, help="dream episodes (default 2048)")
    ap.add_argument("--dream-batch", type=int, default=32, help="dream episodes per batch and PPO update (default 32)")
    ap.add_argument("--mf-episodes", type=int, default=16, help="first model-free stage (default 16), then doubled")
    ap.add_argument("--max-mf-episodes", type=int, default=512, help="last model-free stage at most (default 512)")
    ap.add_argument("--rollouts", type=int, default=8, help="optimise --rollouts for both agents (default 8)")
    ap.add_argument("--time-limit", type=float, default=120, help="optimise --time-limit (default 120)")
    ap.add_argument("--device-profile", default="h100-datasheet", help="analytic device profile (default h100-datasheet, the profile the numbers in docs/rl.md were measured with; '' for none)")
    ap.add_argument("--cost-model", default="analytic", choices=["analytic", "recorded"],
                    help="analytic (default), or recorded: the recorded H100 timings, with --device-profile h100; both deterministic")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per rlflow run (default: none)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "model_based")
    ap.add_argument("--md", type=Path, default=ROOT / "results" / "bench_model_based.md")
    ap.add_argument("--json-out", type=Path, default=ROOT / "results" / "bench_model_based.json")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args()
    args.deterministic = args.cost_model == "analytic"  # recorded is deterministic by itself
    if min(args.wm_episodes, args.dream_episodes, args.dream_batch, args.mf_episodes) < 1:
        print("bench_model_based: error: episode counts and --dream-batch must be >= 1", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows, failed = [], False
    for m in args.models:
        path, name = model_path(m), model_name(m)
        if not path.exists():
            rows.append({"model": name, "model_based": {"error": f"{path}: missing"}, "model_free": {"error": "missing"}})
            failed = True
            continue
        row: dict = {"model": name}
        for search in ("greedy", "taso"):
            log(f"{name}: optimise --search {search}")
            row[search] = optimise(args, path, args.out_dir / f"{name}.{search}.onnx", search)
        row["model_based"] = model_based(args, path, name)
        row["model_free"] = model_free(args, path, name, row["model_based"].get("improvement"))
        failed = failed or any("error" in row[k] for k in ("greedy", "taso", "model_based", "model_free"))
        rows.append(row)
        args.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))
    md = (f"Model-based vs model-free ({args.cost_model} cost, profile {args.device_profile or 'none'}, seed {args.seed}; "
          f"world model from {args.wm_episodes} random-agent episodes with a random frozen encoder; "
          f"{args.dream_episodes} dream episodes, {args.dream_batch} per update; optimise --rollouts {args.rollouts}; "
          f"{time.strftime('%Y-%m-%d %H:%M')}).\n\n" + table(rows) + "\n")
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(md)
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
