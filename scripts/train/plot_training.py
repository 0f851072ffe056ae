#!/usr/bin/env python3
"""Training curves of one or more `rlflow train-agent` JSONL logs, rendered to a PNG.

Each log line is one PPO update (update, episodes, env_steps, mean_return, mean_improvement,
best_improvement, best_by_model, policy_loss, value_loss, entropy, approx_kl, clip_fraction, ...).
One subplot per quantity, each against episodes; one line per log (legend = the log's file stem).
When a log trained on several models, the best-improvement subplot also shows each model's best
(dashed, legend = log stem / model stem).

    scripts/train/plot_training results/rl/a.pt.jsonl [b.jsonl ...] [--out curves.png] [--title TEXT]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (key, subplot title, y label, scale): improvements are fractions in the log, shown as percent.
PANELS = [
    ("mean_return", "mean return", "return", 1.0),
    ("mean_improvement", "mean improvement", "%", 100.0),
    ("best_improvement", "best improvement", "%", 100.0),
    ("policy_loss", "policy loss", "loss", 1.0),
    ("value_loss", "value loss", "loss", 1.0),
    ("entropy", "entropy", "nats", 1.0),
    ("approx_kl", "approx KL", "KL", 1.0),
    ("clip_fraction", "clip fraction", "fraction", 1.0),
]


def stem(path: str | Path) -> str:
    """File stem without the .jsonl and an agent's .pt (a.pt.jsonl -> a)."""
    name = Path(path).name
    for suffix in (".jsonl", ".json", ".pt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or str(path)


def read_log(path: str | Path) -> list[dict]:
    """The log's records in file order; lines that are blank or not JSON objects are skipped with a warning."""
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"plot_training: warning: {path}:{n}: not JSON ({e.msg}); skipped", file=sys.stderr)
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


def series(records: list[dict], key: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
    """(episodes, values) for records that have both as numbers (the x falls back to the update index)."""
    xs, ys = [], []
    for i, r in enumerate(records):
        x = r.get("episodes", r.get("update", i + 1))
        y = r.get(key)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            xs.append(x)
            ys.append(y * scale)
    return xs, ys


def plot(logs: list[str | Path], out: str | Path, title: str | None = None) -> Path:
    """Renders the curves of `logs` to `out` (PNG); returns the output path. Raises on unreadable logs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [(stem(p), read_log(p)) for p in logs]
    cols = 4
    rows = (len(PANELS) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, name, ylabel, scale) in zip(axes.flat, PANELS):
        drew = False
        for i, (label, records) in enumerate(data):
            colour = colours[i % len(colours)]
            xs, ys = series(records, key, scale)
            if xs:
                ax.plot(xs, ys, color=colour, label=label, marker="o" if len(xs) < 30 else None, markersize=3)
                drew = True
            if key == "best_improvement":
                models = sorted({m for r in records for m in (r.get("best_by_model") or {})})
                if len(models) > 1:
                    for j, m in enumerate(models):
                        pts = [(r.get("episodes"), r["best_by_model"][m]) for r in records
                               if isinstance((r.get("best_by_model") or {}).get(m), (int, float))]
                        if not pts:
                            continue
                        mx, my = [x for x, _ in pts], [y * scale for _, y in pts]
                        # One log: a colour per model. Several: the log's colour, a line style per model.
                        single = len(data) == 1
                        ax.plot(mx, my, color=colours[(j + 1) % len(colours)] if single else colour,
                                linestyle="--" if single else ["--", ":", "-."][j % 3], linewidth=1,
                                marker="x" if len(mx) < 30 else None, markersize=4,
                                label=Path(m).stem if single else f"{label} / {Path(m).stem}")
                    drew = True
        ax.set_title(name)
        ax.set_xlabel("episodes")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if key in ("mean_return", "mean_improvement", "policy_loss"):
            ax.axhline(0.0, color="grey", linewidth=0.6)
        if key == "best_improvement" and any(len({m for r in rec for m in (r.get("best_by_model") or {})}) > 1
                                             for _, rec in data):
            ax.legend(fontsize=7)
        if not drew:
            ax.text(0.5, 0.5, f"no '{key}' in the logs", ha="center", va="center", transform=ax.transAxes,
                    color="grey")
    for ax in list(axes.flat)[len(PANELS):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if not handles:
        handles = [plt.Line2D([], [], color=colours[i % len(colours)]) for i in range(len(data))]
        labels = [label for label, _ in data]
    fig.legend(handles, labels, loc="upper right", ncol=min(len(labels), 4), fontsize=9)
    empty = [label for label, records in data if not records]
    fig.suptitle((title or "rlflow training: " + ", ".join(label for label, _ in data))
                 + (f"  (empty: {', '.join(empty)})" if empty else ""), x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="train-agent JSONL logs")
    ap.add_argument("--out", help="output PNG (default: the first log with a .png suffix)")
    ap.add_argument("--title", help="figure title (default: the log stems)")
    args = ap.parse_args()
    for p in args.logs:
        if not Path(p).is_file():
            print(f"plot_training: error: {p}: no such file", file=sys.stderr)
            return 2
    out = args.out or str(Path(args.logs[0]).with_suffix(".png"))
    try:
        path = plot(args.logs, out, args.title)
    except (OSError, UnicodeDecodeError) as e:
        print(f"plot_training: error: {e}", file=sys.stderr)
        return 3
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
