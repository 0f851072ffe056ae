#!/usr/bin/env python3
"""Import/export cost of rlflow: time and peak memory of
`rlflow optimise MODEL -o TMP --search none` (parse, import, export, write).

    scripts/bench/bench_io                      # models/resnet50.onnx (exported if missing)
    scripts/bench/bench_io resnet18 vit_b_16 path/to/other.onnx --repeat 5

Prints a markdown table with the median wall time and the peak RSS over the
repeats, against the targets: wall < 3 s and peak RSS < 3x the file size.
Targets are reported, never asserted. MB = 10^6 bytes for both file and RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[2]
GNU_TIME = "/usr/bin/time"
WALL_TARGET_S = 3.0
RSS_TARGET_RATIO = 3.0
SMALL_FILE_MB = 20.0


class BenchError(Exception):
    pass


def resolve_model(arg: str) -> Path:
    """A path, or a zoo name looked up in models/ and exported when missing."""
    p = Path(arg)
    if p.suffix == ".onnx" or p.exists():
        if not p.is_file():
            raise BenchError(f"no such model file: {arg}")
        return p
    path = ROOT / "models" / f"{arg}.onnx"
    if not path.is_file():
        print(f"[bench_io] {path.relative_to(ROOT)} missing; exporting it", file=sys.stderr)
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus" / "export_models.py"), arg])
        if r.returncode != 0 or not path.is_file():
            raise BenchError(f"could not export '{arg}' (scripts/corpus/export_models {arg} failed)")
    return path


def _run_gnu_time(cmd: List[str]) -> Tuple[int, float, int, str]:
    """-> (exit code, wall s, max RSS bytes, stderr without time's report)."""
    t0 = time.perf_counter()
    p = subprocess.run([GNU_TIME, "-v"] + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    if not m:
        raise BenchError(f"could not parse {GNU_TIME} -v output")
    # GNU time appends its report (and "Command exited with non-zero status N") to stderr
    cut = [i for i in (p.stderr.rfind("Command exited with non-zero status"),
                       p.stderr.rfind("Command terminated by signal"),
                       p.stderr.rfind("\tCommand being timed:")) if i >= 0]
    stderr = p.stderr[:min(cut)] if cut else p.stderr
    rc = p.returncode
    sig = re.search(r"Command terminated by signal (\d+)", p.stderr)
    if sig:
        rc = -int(sig.group(1))
    return rc, wall, int(m.group(1)) * 1024, stderr


def _run_wait4(cmd: List[str]) -> Tuple[int, float, int, str]:
    """Fallback without GNU time: os.wait4 gives this one child's rusage
    (getrusage(RUSAGE_CHILDREN) would be the maximum over all children so far)."""
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, wall, usage.ru_maxrss * 1024, err.read()


def bench(model: Path, binary: str, repeat: int, extra: List[str]) -> dict:
    runner = _run_gnu_time if os.access(GNU_TIME, os.X_OK) else _run_wait4
    walls, rss = [], []
    with tempfile.TemporaryDirectory(prefix="rlflow-bench-") as tmp:
        out = os.path.join(tmp, "out.onnx")
        cmd = [binary, "optimise", str(model), "-o", out, "--search", "none"] + extra
        for _ in range(repeat):
            rc, wall, peak, stderr = runner(cmd)
            if rc != 0:
                tail = stderr.strip().splitlines()[-1:] or ["no message"]
                raise BenchError(f"rlflow exited {rc} on {model}: {tail[0][:200]}")
            walls.append(wall)
            rss.append(peak)
    size = model.stat().st_size
    return {
        "model": model.stem,
        "path": str(model),
        "file_mb": size / 1e6,
        "wall_s": walls,
        "wall_median_s": statistics.median(walls),
        "peak_rss_mb": max(rss) / 1e6,
        "rss_ratio": max(rss) / size if size else None,
        "method": "gnu-time" if runner is _run_gnu_time else "wait4",
    }


def markdown(rows: List[dict]) -> str:
    lines = [
        "| model | file MB | wall s (median) | peak RSS MB | RSS/file | targets (< 3 s, < 3x) |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | | | | FAIL: {r['error'].replace('|', '/')} |")
            continue
        wall_ok = r["wall_median_s"] < WALL_TARGET_S
        if r["file_mb"] < SMALL_FILE_MB:  # the process's baseline RSS dominates; the ratio means nothing
            rss_verdict = "n/a (small file)"
        else:
            rss_verdict = "ok" if r["rss_ratio"] < RSS_TARGET_RATIO else "MISSED"
        targets = f"wall {'ok' if wall_ok else 'MISSED'}, RSS {rss_verdict}"
        ratio = f"{r['rss_ratio']:.2f}x" if r["rss_ratio"] is not None else "n/a"
        lines.append(f"| {r['model']} | {r['file_mb']:.1f} | {r['wall_median_s']:.2f} | {r['peak_rss_mb']:.0f} "
                     f"| {ratio} | {targets} |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=["resnet50"], help="zoo names or .onnx paths (default: resnet50)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per model (default 3)")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")),
                    help="rlflow binary (default: $RLFLOW_BIN or build/rlflow)")
    ap.add_argument("--json", metavar="OUT", type=Path, help="also write the results as JSON")
    ap.epilog = "Arguments after -- go to rlflow optimise, e.g. -- --input-shape x:1,16"
    extra: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    args = ap.parse_args(argv)
    if args.repeat < 1:
        print("error: --repeat must be >= 1", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print(f"error: rlflow binary not found at {args.binary}; build it first (or pass --binary)", file=sys.stderr)
        return 2

    rows, failed = [], 0
    for name in args.models:
        try:
            rows.append(bench(resolve_model(name), args.binary, args.repeat, extra))
        except BenchError as e:
            print(f"error: {e}", file=sys.stderr)
            rows.append({"model": Path(name).stem, "error": str(e)[:120]})
            failed += 1
    print(markdown(rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"binary": args.binary, "repeat": args.repeat, "results": rows}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
