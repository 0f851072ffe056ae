#!/usr/bin/env python3
"""Scale benchmark (issue 30): `rlflow optimise` on a model whose weights live in external data.

    scripts/bench/bench_large_model                                  # 12 layers of width 4096 (~3.4 GB of weights)
    scripts/bench/bench_large_model --layers 2 --width 256           # a quick smoke test
    scripts/bench/bench_large_model --also-search-none --log docs/measurements/bench_large_model-DATE.md

Generates a decoder-style transformer (opset 17) straight to external data: each initializer's
bytes go to MODEL.onnx.data as they are drawn, so the generator holds about one weight matrix at a
time. Per layer: LayerNormalization, Q/K/V/O projections (MatMul + Add), single-head attention
(MatMul Q K^T, scale, Softmax, MatMul V), a residual Add, a second LayerNormalization, an MLP
width -> --mlp-hidden -> width with the decomposed (Erf) GELU, and a second residual Add; a final
LayerNormalization. Weights are N(0, 1) * 0.02 (seeded); LayerNorm scales are 1, biases 0.

Then runs `rlflow optimise MODEL -o OUT --json [--extra-args ...]` under /usr/bin/time -v and
reports: exit code, wall time, peak RSS (GNU time's maximum resident set size of rlflow, which
counts its largest child, not the sum), the peak of rlflow plus its children sampled from /proc
(the onnxruntime helper that measures candidates is a child process), weight bytes, both peaks over
the weight bytes (target: <= 2x), whether OUT keeps external data (every large initializer's
data_location is EXTERNAL, and the files it names exist, with their size), onnx.checker on OUT by
path, and the largest absolute difference between MODEL and OUT in onnxruntime on one seeded input
(the two sessions run one after the other). Targets are reported, not asserted; the exit status is
1 when rlflow fails or a check fails, 0 otherwise (a missed RSS target is reported only).
MB = 10^6 bytes, GB = 10^9 bytes.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GNU_TIME = "/usr/bin/time"
OPSET = 17
RSS_TARGET_RATIO = 2.0
ALIGN = 4096  # tensors start on page boundaries in the data file (mmap-friendly); padding is not weight
# rlflow writes external data only above this many weight bytes (ExportOptions::external_data_threshold
# in include/rlflow/onnx/model_io.h); a smoke-test model below it is written inline, as it should be.
EXTERNAL_THRESHOLD = 1800 << 20


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------

class ExternalWriter:
    """Appends tensors to one data file and returns TensorProtos that point into it."""

    def __init__(self, data_path: Path):
        self.data_path = data_path
        self.location = data_path.name  # relative to the model file
        self.f = open(data_path, "wb")
        self.offset = 0
        self.weight_bytes = 0
        self.count = 0

    def add(self, name: str, arr: np.ndarray):
        from onnx import TensorProto
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        pad = (-self.offset) % ALIGN
        if pad:
            self.f.write(b"\0" * pad)
            self.offset += pad
        data = arr.tobytes()
        self.f.write(data)
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(self.offset)), ("length", str(len(data)))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += len(data)
        self.weight_bytes += len(data)
        self.count += 1
        return t

    def close(self):
        self.f.close()


def generate(model_path: Path, layers: int, width: int, mlp_hidden: int, seq: int, seed: int) -> dict:
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    data_path = model_path.with_name(model_path.name + ".data")
    w = ExternalWriter(data_path)
    inits: List[TensorProto] = []
    nodes = []

    def weight(name: str, shape: Tuple[int, ...]) -> str:
        arr = rng.standard_normal(shape, dtype=np.float32)
        arr *= np.float32(0.02)
        inits.append(w.add(name, arr))
        del arr
        return name

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(w.add(name, arr))
        return name

    def scalar(name: str, value: float) -> str:  # tiny: inline
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, [], [value]))
        return name

    def node(op: str, inputs: List[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, n_in: int, n_out: int) -> str:
        mm = node("MatMul", [x, weight(f"{prefix}.weight", (n_in, n_out))], f"{prefix}.matmul")
        return node("Add", [mm, weight(f"{prefix}.bias", (n_out,))], f"{prefix}.out")

    def layer_norm(x: str, prefix: str) -> str:
        g = const(f"{prefix}.scale", np.ones(width, np.float32))
        b = const(f"{prefix}.bias", np.zeros(width, np.float32))
        return node("LayerNormalization", [x, g, b], f"{prefix}.out", axis=-1, epsilon=1e-5)

    half, one, inv_sqrt2 = scalar("c.half", 0.5), scalar("c.one", 1.0), scalar("c.inv_sqrt2", 2 ** -0.5)
    att_scale = scalar("c.att_scale", width ** -0.5)
    x = "x"
    for i in range(layers):
        p = f"layer{i}"
        h = layer_norm(x, f"{p}.ln1")
        q = linear(h, f"{p}.q", width, width)
        k = linear(h, f"{p}.k", width, width)
        v = linear(h, f"{p}.v", width, width)
        kt = node("Transpose", [k], f"{p}.kT", perm=[0, 2, 1])
        s = node("MatMul", [q, kt], f"{p}.scores")
        s = node("Mul", [s, att_scale], f"{p}.scaled")
        a = node("Softmax", [s], f"{p}.probs", axis=-1)
        a = node("MatMul", [a, v], f"{p}.ctx")
        o = linear(a, f"{p}.o", width, width)
        x = node("Add", [x, o], f"{p}.res1")
        h = layer_norm(x, f"{p}.ln2")
        m = linear(h, f"{p}.fc1", width, mlp_hidden)
        # GELU, decomposed: 0.5 * m * (1 + erf(m / sqrt(2)))
        e = node("Mul", [m, inv_sqrt2], f"{p}.gelu.div")
        e = node("Erf", [e], f"{p}.gelu.erf")
        e = node("Add", [e, one], f"{p}.gelu.add")
        e = node("Mul", [m, e], f"{p}.gelu.mul")
        g = node("Mul", [e, half], f"{p}.gelu.out")
        m = linear(g, f"{p}.fc2", mlp_hidden, width)
        x = node("Add", [x, m], f"{p}.res2")
    y = layer_norm(x, "ln_f")
    nodes.append(helper.make_node("Identity", [y], ["y"], name="y"))
    w.close()

    graph = helper.make_graph(
        nodes, f"decoder_{layers}x{width}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, width])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench_large_model")
    model.ir_version = 8
    with open(model_path, "wb") as f:
        f.write(model.SerializeToString())
    onnx.checker.check_model(str(model_path))
    return {"weight_bytes": w.weight_bytes, "external_tensors": w.count, "data_file_bytes": data_path.stat().st_size,
            "nodes": len(nodes), "data_path": data_path}


# ---------------------------------------------------------------------------------------------
# Running rlflow
# ---------------------------------------------------------------------------------------------

def _descendants(pid: int) -> List[int]:
    out, pending = [], [pid]
    while pending:
        p = pending.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    pending.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_rlflow(cmd: List[str], interval: float = 0.1) -> dict:
    """Runs cmd under GNU time -v, sampling the RSS sum of the process tree below time."""
    use_time = os.access(GNU_TIME, os.X_OK)
    full = ([GNU_TIME, "-v"] if use_time else []) + cmd
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        peak_tree = 0
        stop = threading.Event()

        def sample():
            nonlocal peak_tree
            while not stop.is_set():
                # GNU time's own RSS is ~2 MB; count only what runs below it
                pids = _descendants(proc.pid)
                if use_time:
                    pids = pids[1:]
                peak_tree = max(peak_tree, sum(_rss(p) for p in pids))
                stop.wait(interval)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        if use_time:
            proc.wait()
            usage_peak = None
        else:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            usage_peak = usage.ru_maxrss * 1024
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    rc = proc.returncode
    if use_time:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
        if not m:
            raise BenchError(f"could not parse {GNU_TIME} -v output")
        usage_peak = int(m.group(1)) * 1024
        sig = re.search(r"Command terminated by signal (\d+)", stderr)
        if sig:
            rc = -int(sig.group(1))
        else:
            ex = re.search(r"Command exited with non-zero status (\d+)", stderr)
            if ex:
                rc = int(ex.group(1))
        cut = [i for i in (stderr.rfind("Command exited with non-zero status"),
                           stderr.rfind("Command terminated by signal"),
                           stderr.rfind("\tCommand being timed:")) if i >= 0]
        if cut:
            stderr = stderr[:min(cut)]
    return {"rc": rc, "wall_s": wall, "peak_rss": usage_peak, "peak_tree_rss": peak_tree,
            "stdout": stdout, "stderr": stderr, "method": "gnu-time" if use_time else "wait4"}


# ---------------------------------------------------------------------------------------------
# Checks on the output
# ---------------------------------------------------------------------------------------------

def external_info(path: Path) -> dict:
    """Initializers' storage in the written model, without loading the weights."""
    import onnx
    from onnx import TensorProto
    m = onnx.load(str(path), load_external_data=False)
    ext, inline, inline_big = 0, 0, 0
    locations = set()
    for t in m.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            ext += 1
            for e in t.external_data:
                if e.key == "location":
                    locations.add(e.value)
        else:
            inline += 1
            if len(t.raw_data) > 4096 or len(t.float_data) > 1024:
                inline_big += 1
    files = {}
    for loc in sorted(locations):
        p = path.parent / loc
        files[loc] = p.stat().st_size if p.is_file() else None
    del m
    return {"external": ext, "inline": inline, "inline_big": inline_big, "files": files,
            "ok": ext > 0 and inline_big == 0 and bool(files) and all(v is not None for v in files.values())}


def check_onnx(path: Path) -> Optional[str]:
    import onnx
    try:
        onnx.checker.check_model(str(path))
        return None
    except Exception as e:  # noqa: BLE001 - reported
        return str(e).splitlines()[0][:200]


def ort_output(path: Path, feeds: Dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # no packed copies of the MatMul weights: the session then holds the weights about once
    opts.add_session_config_entry("session.disable_prepacking", "1")
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    y = sess.run(None, feeds)[0]
    del sess
    gc.collect()
    return y


def compare_ort(model: Path, out: Path, seq: int, width: int, seed: int) -> dict:
    rng = np.random.default_rng(seed + 1)
    feeds = {"x": rng.standard_normal((1, seq, width), dtype=np.float32)}
    a = ort_output(model, feeds)
    b = ort_output(out, feeds)
    return {"max_abs_diff": float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))),
            "finite": bool(np.isfinite(a).all() and np.isfinite(b).all()),
            "max_abs_out": float(np.max(np.abs(a)))}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def mb(n: Optional[int]) -> str:
    return "n/a" if n is None else f"{n / 1e6:,.0f}"


def markdown(rows: List[dict]) -> str:
    lines = [
        "| run | exit | wall s | peak RSS MB (rlflow) | RSS/weights | peak tree RSS MB (sampled) | tree/weights "
        "| weights MB | output external data | checker | ORT max abs diff | target (RSS <= 2x, external) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for r in rows:
        wb = r["weight_bytes"]
        ext = r.get("external")
        if ext is None:
            ext_s = "n/a (no output)"
        else:
            files = ", ".join(f"{k} {mb(v)} MB" if v is not None else f"{k} MISSING" for k, v in ext["files"].items())
            ext_s = (f"yes: {ext['external']} tensors, {files}" if ext["ok"]
                     else f"{'no' if wb <= EXTERNAL_THRESHOLD else 'NO'}: {ext['external']} external, "
                          f"{ext['inline']} inline ({ext['inline_big']} large)" + (f", {files}" if files else ""))
        checker = "n/a" if r.get("checker") == "skipped" else ("ok" if r.get("checker") is None else f"FAIL: {r['checker']}")
        cmp = r.get("ort")
        diff = "n/a" if cmp is None else (f"{cmp['max_abs_diff']:.2e}" if cmp["finite"] else "NON-FINITE")
        if isinstance(cmp, dict) and cmp.get("error"):
            diff = f"FAIL: {cmp['error']}"
        ratio = r["peak_rss"] / wb
        tratio = r["peak_tree_rss"] / wb
        if r["rc"] != 0:
            verdict = f"FAILED (exit {r['rc']})"
        else:
            small = wb <= EXTERNAL_THRESHOLD
            verdict = ", ".join([f"RSS {'ok' if ratio <= RSS_TARGET_RATIO else 'MISSED'}",
                                 f"tree {'ok' if tratio <= RSS_TARGET_RATIO else 'MISSED'}",
                                 "external n/a (below rlflow's 1800 MiB threshold)" if small
                                 else f"external {'ok' if ext and ext['ok'] else 'MISSED'}"])
            if small:
                verdict += " (small model: the process baseline dominates RSS)"
        lines.append(f"| {r['label']} | {r['rc']} | {r['wall_s']:.1f} | {mb(r['peak_rss'])} | {ratio:.2f}x "
                     f"| {mb(r['peak_tree_rss'])} | {tratio:.2f}x | {mb(wb)} | {ext_s} | {checker} | {diff} | {verdict} |")
    return "\n".join(lines)


def stage_times(stdout: str) -> Optional[str]:
    """rlflow's --json stage times and what the search did, in one line."""
    try:
        j = json.loads(stdout)
    except ValueError:
        return None
    parts = []
    t = j.get("time_s")
    if isinstance(t, dict):
        parts.append(", ".join(f"{k} {v:.1f}s" for k, v in t.items() if isinstance(v, (int, float))))
    if j.get("rules_applied"):
        parts.append("rules " + ", ".join(f"{k} x{v}" for k, v in j["rules_applied"].items()))
    m = j.get("measured")
    if isinstance(m, dict) and m.get("decision"):
        parts.append(m["decision"])
    sr = j.get("search_report")
    if isinstance(sr, dict) and sr.get("peak_state_mb") is not None:
        parts.append(f"search peak state {sr['peak_state_mb']:.0f} MB ({sr.get('stop_reason', '?')})")
    return "; ".join(parts) or None


def machine() -> str:
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return f"nproc {os.cpu_count()}, MemTotal {mem}"


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12, help="decoder layers (default 12)")
    ap.add_argument("--width", type=int, default=4096, help="model width (default 4096)")
    ap.add_argument("--mlp-hidden", type=int, default=512,
                    help="MLP hidden size (default 512: with 12 x 4096 that is 3.42 GB, just over 3 GiB; "
                         "the attention projections alone are exactly 3 GiB)")
    ap.add_argument("--seq", type=int, default=16, help="sequence length of the input [1, seq, width] (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="weights and ORT input seed (default 0)")
    ap.add_argument("--workdir", type=Path, help="where the models go (default: a new temp dir under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (a temp one is deleted otherwise)")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")),
                    help="rlflow binary (default: $RLFLOW_BIN or build/rlflow)")
    ap.add_argument("--extra-args", default="", help="more flags for rlflow optimise, one shell-quoted string")
    ap.add_argument("--also-search-none", action="store_true",
                    help="also run with --search none (import + export only) to separate them from the search")
    ap.add_argument("--no-ort", action="store_true", help="skip the onnxruntime comparison")
    ap.add_argument("--log", type=Path, help="append a dated markdown section to this file")
    ap.add_argument("--json", metavar="OUT", type=Path, help="also write the results as JSON")
    args = ap.parse_args(argv)
    if min(args.layers, args.width, args.mlp_hidden, args.seq) < 1:
        print("error: --layers, --width, --mlp-hidden and --seq must be >= 1", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print(f"error: rlflow binary not found at {args.binary}; build it first (or pass --binary)", file=sys.stderr)
        return 2
    if not os.access(GNU_TIME, os.X_OK):
        print(f"[bench_large_model] {GNU_TIME} missing (apt-get install -y time); using wait4's rusage", file=sys.stderr)

    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="rlflow-large-", dir="/tmp")) if temp else args.workdir
    work.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.extra_args)
    rows: List[dict] = []
    failed = 0
    try:
        model = work / f"decoder_{args.layers}x{args.width}.onnx"
        t0 = time.perf_counter()
        gen = generate(model, args.layers, args.width, args.mlp_hidden, args.seq, args.seed)
        print(f"[bench_large_model] generated {model} in {time.perf_counter() - t0:.1f}s: {gen['nodes']} nodes, "
              f"{gen['external_tensors']} external tensors, weights {gen['weight_bytes']:,} bytes "
              f"({gen['weight_bytes'] / 1e9:.3f} GB, {gen['weight_bytes'] / 2**30:.3f} GiB), data file "
              f"{gen['data_file_bytes']:,} bytes", file=sys.stderr)

        runs = [("default", [])]
        if args.also_search_none:
            runs.append(("--search none", ["--search", "none"]))
        for label, flags in runs:
            out = work / f"out_{'none' if flags else 'default'}.onnx"
            cmd = [args.binary, "optimise", str(model), "-o", str(out), "--json"] + flags + extra
            print(f"[bench_large_model] {label}: {shlex.join(cmd)}", file=sys.stderr)
            r = run_rlflow(cmd)
            row = {"label": f"{args.layers}x{args.width} {label}" + (f" {args.extra_args}" if extra else ""),
                   "cmd": shlex.join(cmd), "weight_bytes": gen["weight_bytes"], **r}
            st = stage_times(r["stdout"])
            row["stages"] = st
            if r["rc"] != 0:
                failed += 1
                tail = [ln for ln in r["stderr"].strip().splitlines() if ln.strip()][-10:]
                print(f"[bench_large_model] rlflow exited {r['rc']}; stderr tail:\n  " + "\n  ".join(tail), file=sys.stderr)
                row["stderr_tail"] = tail
            if out.is_file():
                row["external"] = external_info(out)
                row["checker"] = check_onnx(out)
                if row["checker"] is not None:
                    failed += 1
                if not args.no_ort:
                    try:
                        row["ort"] = compare_ort(model, out, args.seq, args.width, args.seed)
                        if not row["ort"]["finite"]:
                            failed += 1
                    except Exception as e:  # noqa: BLE001 - reported
                        row["ort"] = {"error": str(e).splitlines()[0][:160], "finite": False, "max_abs_diff": float("nan")}
                        failed += 1
            else:
                row["checker"] = "skipped"
            print(f"[bench_large_model] {label}: exit {r['rc']}, {r['wall_s']:.1f}s, peak RSS {r['peak_rss'] / 1e6:,.0f} MB "
                  f"(tree {r['peak_tree_rss'] / 1e6:,.0f} MB)" + (f"; stages: {st}" if st else ""), file=sys.stderr)
            rows.append(row)
            for f in (out, *(out.parent / k for k in (row.get("external") or {}).get("files", {}))):
                if f.is_file() and not args.keep:
                    f.unlink()
    finally:
        if temp and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"[bench_large_model] kept {work}", file=sys.stderr)

    table = markdown(rows)
    print(table)
    notes = []
    for r in rows:
        if r.get("stages"):
            notes.append(f"- {r['label']}: rlflow --json: {r['stages']}")
        if r.get("stderr_tail"):
            notes.append(f"- {r['label']}: rlflow exited {r['rc']}; stderr tail:\n\n```\n" + "\n".join(r["stderr_tail"]) + "\n```")
    if notes:
        print("\n" + "\n".join(notes))
    if args.log:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        with open(args.log, "a") as f:
            f.write(f"\n## {now}: {args.layers} layers x width {args.width} (MLP {args.mlp_hidden}, seq {args.seq})\n\n")
            f.write(f"- machine: {machine()}\n")
            f.write(f"- command: `scripts/bench/bench_large_model {shlex.join(argv)}`\n")
            f.write(f"- weights: {gen['weight_bytes']:,} bytes in {gen['external_tensors']} external tensors "
                    f"(data file {gen['data_file_bytes']:,} bytes with {ALIGN}-byte alignment)\n")
            for r in rows:
                f.write(f"- rlflow ({r['label']}): `{r['cmd']}`\n")
            f.write("\n" + table + "\n")
            if notes:
                f.write("\n" + "\n".join(notes) + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        slim = [{k: v for k, v in r.items() if k not in ("stdout", "stderr")} for r in rows]
        args.json.write_text(json.dumps({"binary": args.binary, "machine": machine(), "results": slim}, indent=1, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
