#!/usr/bin/env python3
"""Data-parallel `rlflow train-agent` on this machine: starts N ranks on 127.0.0.1 (libtorch c10d, gloo).

Every rank gets the same train-agent arguments plus --world-size N --rank R --master 127.0.0.1:PORT.
Rank R collects the episodes e of each update with e mod N == R (train-agent cycles its --model list
by episode, so with N models and N ranks each rank plays its own model); PPO sums every minibatch's
gradients over the ranks. Rank 0 writes --out and --log; its stdout is this script's stdout. Given
the seed, the agent equals the one-process run's up to floating-point summation order.

    scripts/train/train_ranks --ranks 2 -- --model models/squeezenet1_1.onnx --model models/resnet18.onnx \\
        --out agent.pt --episodes 64 --json

Stderr gets one line with the wall time and, with --json, the episodes per second. Exit status: 0
when every rank succeeded, else the first failing rank's exit status (the others are stopped).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--port", type=int, default=0, help="rendezvous port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--timeout", type=float, default=None, help="stop every rank after this many seconds")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args(argv)
    if args.ranks < 1:
        print("train_ranks: error: --ranks must be at least 1", file=sys.stderr)
        return 2
    if not rest:
        print("train_ranks: error: give the train-agent arguments after --", file=sys.stderr)
        return 2
    if rest[0] == "train-agent":
        rest = rest[1:]
    port = args.port or free_port()
    master = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="rlflow-ranks-") as tmp:
        procs, outs, errs = [], [], []
        t0 = time.monotonic()
        for r in range(args.ranks):
            out = open(Path(tmp) / f"rank{r}.out", "w+")
            err = open(Path(tmp) / f"rank{r}.err", "w+")
            cmd = [args.binary, "train-agent", *rest, "--world-size", str(args.ranks), "--rank", str(r), "--master", master]
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL))
            outs.append(out)
            errs.append(err)
        failed = None
        deadline = None if args.timeout is None else t0 + args.timeout
        while any(p.poll() is None for p in procs):
            for r, p in enumerate(procs):
                if p.poll() not in (None, 0) and failed is None:
                    failed = r
            if failed is not None or (deadline is not None and time.monotonic() > deadline):
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.05)
        for p in procs:
            p.wait()
        wall = time.monotonic() - t0
        if failed is None:
            failed = next((r for r, p in enumerate(procs) if p.returncode != 0), None)
        for f in outs + errs:
            f.seek(0)
        texts = [f.read() for f in outs]
        err_texts = [f.read() for f in errs]
        sys.stdout.write(texts[0])
        if failed is not None:
            for r, text in enumerate(err_texts):
                for line in text.strip().splitlines()[-3:]:
                    print(f"[rank {r}] {line}", file=sys.stderr)
            code = procs[failed].returncode
            print(f"train_ranks: rank {failed} failed (exit {code})", file=sys.stderr)
            return code if code > 0 else 1
        rate = ""
        if "--json" in rest:
            try:
                doc = json.loads(texts[0])
                rate = f", {doc['episodes'] / wall:.2f} episodes/s, {doc['env_steps'] / wall:.1f} env steps/s"
            except (ValueError, KeyError):
                pass
        print(f"[train_ranks] {args.ranks} rank(s) on {master}: {wall:.2f} s wall{rate}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
