#!/usr/bin/env python3
"""Python half of scripts/gpu/gpu_campaign: the parts that are easier in Python than in bash.

    gpu_campaign.py zoo                              the zoo model names, one a line
    gpu_campaign.py export-zoo ARGS...               scripts/corpus/export_models.py ARGS with the TorchScript exporter
    gpu_campaign.py export-hf ARGS...                scripts/corpus/export_hf_models.py ARGS, likewise
    gpu_campaign.py make-table CACHE PREFIX OUT      keep the cache's devices named PREFIX..., curate them into OUT
    gpu_campaign.py hitrate OUT JSON...              sum the recorded-table hits and misses of `optimise --json` files
    gpu_campaign.py torchbench A B --json OUT        the independent runtime: A against B, interleaved
    gpu_campaign.py ctest-summary LOG OUT            ctest's verdict as JSON
    gpu_campaign.py env OUT                          this machine: GPU, driver, torch, python
    gpu_campaign.py report STATE OUT.md              the dated campaign report

torchbench loads both ONNX files with onnx2torch and times them in PyTorch: on a GPU each as a
captured CUDA graph replayed (eager when capture fails; the report says which), TF32 allowed as in
rlflow's cuDNN backend; on a CPU eagerly, or through onnxruntime when onnx2torch is not installed
(the dry run). Rounds are interleaved in a new random order each round; the speedup is the median
of the per-round ratios A/B with the binomial order-statistic interval, as `rlflow bench` computes it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


# --------------------------------------------------------------------------- exports


def _torchscript_exporter() -> None:
    """torch >= 2.9 exports with dynamo by default; the corpus and the recorded table are TorchScript
    exports (what the scripts meant on torch 1.13), so ask for that exporter where one can choose."""
    import inspect

    import torch

    orig = torch.onnx.export
    if "dynamo" not in inspect.signature(orig).parameters:
        return

    def export(*args, **kwargs):
        kwargs.setdefault("dynamo", False)
        return orig(*args, **kwargs)

    torch.onnx.export = export


def run_script(name: str, argv: list[str]) -> int:
    _torchscript_exporter()
    sys.path.insert(0, str(SCRIPTS / "corpus"))
    sys.argv = [str(SCRIPTS / "corpus" / name), *argv]
    try:
        runpy.run_path(str(SCRIPTS / "corpus" / name), run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


# --------------------------------------------------------------------------- cost table


def make_table(cache: str, prefix: str, out: str) -> int:
    with open(cache, encoding="utf-8") as f:
        doc = json.load(f)
    devices = {fp: t for fp, t in doc.get("devices", {}).items() if fp.startswith(prefix) and isinstance(t, dict)}
    if not devices:
        print(f"{cache}: no device named {prefix}... in the cost cache", file=sys.stderr)
        return 1
    filtered = dict(doc, devices=devices)
    src = Path(out).with_name("cost-cache." + prefix.strip("/") + ".json")
    src.write_text(json.dumps(filtered, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for fp, t in devices.items():
        print(f"{fp}: {len(t)} timings")
    # curate_cost_table.py refuses to write a table whose corrected entries still contradict their
    # siblings: with noisy timings the median fused-ReLU delta alone can exceed the act check's
    # 10 us slack. Then wider slacks, said in the report, rather than no table at all.
    attempts = []
    for extra in ([], ["--slack-us", "20"], ["--slack-us", "40"]):
        p = subprocess.run([sys.executable, str(SCRIPTS / "gpu" / "curate_cost_table.py"), str(src), "-o", out, "--json", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        attempts.append({"args": extra, "exit": p.returncode, "stderr": p.stderr.strip()[-300:]})
        if p.returncode == 0:
            doc = {"args": extra, "attempts": attempts, "report": json.loads(p.stdout)}
            Path(out).with_suffix(".curation.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            print(f"curated{' with ' + ' '.join(extra) if extra else ''}: {out}")
            return 0
        print(f"curate_cost_table.py {' '.join(extra)}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}",
              file=sys.stderr)
    return 1


def hitrate(out: str, files: list[str]) -> int:
    rows, hits, misses = [], 0, 0
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                table = json.load(f)["cost"]["table"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"{path}: no recorded-table counts ({e})", file=sys.stderr)
            return 1
        rows.append({"file": os.path.basename(path), "hits": table["hits"], "misses": table["misses"]})
        hits += table["hits"]
        misses += table["misses"]
    rate = misses / (hits + misses) if hits + misses else 0.0
    doc = {"hits": hits, "misses": misses, "miss_rate": rate, "runs": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"recorded table: {hits} hits, {misses} misses ({100 * rate:.1f}% missed) over {len(rows)} searches")
    return 0


# --------------------------------------------------------------------------- statistics (as src/bench/stats.cpp)


def median(v: list[float]) -> float:
    return statistics.median(v) if v else 0.0


def _binomial_half_cdf(n: int, k: int) -> float:
    lh = n * math.log(0.5)
    s = 0.0
    for i in range(0, min(k, n) + 1):
        s += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + lh)
    return min(1.0, s)


def median_ci(v: list[float], confidence: float) -> tuple[float, float, float]:
    v = sorted(v)
    n = len(v)
    alpha = 1 - confidence
    j = 0
    while j + 1 <= n // 2 and _binomial_half_cdf(n, j) <= alpha / 2:
        j += 1
    if j == 0:
        return v[0], v[-1], 1 - 2 * 0.5 ** n
    return v[j - 1], v[n - j], 1 - 2 * _binomial_half_cdf(n, j - 1)


# --------------------------------------------------------------------------- the independent runtime


def _inputs(path: str, seed: int):
    """Seeded inputs from the ONNX graph's declared inputs (symbolic dims at 1); token ids below the
    vocabulary that export_hf_models recorded, attention masks of ones."""
    import numpy as np
    import onnx
    from onnx import helper

    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    meta = {p.key: p.value for p in m.metadata_props}
    vocab = int(meta.get("rlflow_hf.vocab_size", "2"))
    rng = np.random.RandomState(seed)
    out = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        if dtype.kind == "f":
            a = rng.standard_normal(dims).astype(dtype)
        elif dtype.kind == "b":
            a = np.ones(dims, dtype)
        elif "mask" in vi.name:
            a = np.ones(dims, dtype)
        else:
            a = rng.randint(0, vocab, size=dims).astype(dtype)
        out.append((vi.name, a))
    return out


class OrtRunner:
    def __init__(self, path: str, seed: int):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.feed = dict(_inputs(path, seed))
        self.mode = f"onnxruntime {ort.__version__} CPU, 1 thread"

    def time_once(self) -> float:
        t = time.perf_counter()
        self.sess.run(None, self.feed)
        return (time.perf_counter() - t) * 1e3

    def output(self):
        return self.sess.run(None, self.feed)[0]


class TorchRunner:
    def __init__(self, path: str, seed: int, device: str, graph: bool):
        import torch
        from onnx2torch import convert

        self.torch = torch
        self.device = device
        self.model = convert(path).eval().to(device)
        self.inputs = [torch.from_numpy(a).to(device) for _, a in _inputs(path, seed)]
        self.graph = None
        self.mode = f"torch {torch.__version__} {device} eager"
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cudnn.benchmark = False
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
        if graph and device == "cuda":
            try:
                with torch.inference_mode():
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(3):
                            self.model(*self.inputs)
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        self.static_out = self.model(*self.inputs)
                self.graph = g
                self.mode = f"torch {torch.__version__} CUDA graph replay"
            except Exception as e:  # capture fails on some converted graphs; eager still measures
                self.mode = f"torch {torch.__version__} cuda eager (graph capture failed: {str(e).splitlines()[0][:120]})"
                torch.cuda.synchronize()

    def _run(self):
        if self.graph is not None:
            self.graph.replay()
            return self.static_out
        with self.torch.inference_mode():
            return self.model(*self.inputs)

    def time_once(self) -> float:
        if self.device == "cuda":
            self.start.record()
            self._run()
            self.end.record()
            self.end.synchronize()
            return self.start.elapsed_time(self.end)
        t = time.perf_counter()
        self._run()
        return (time.perf_counter() - t) * 1e3

    def output(self):
        out = self._run()
        if isinstance(out, (tuple, list)):
            out = out[0]
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        return out.detach().float().cpu().numpy()


def torchbench(args) -> int:
    import numpy as np

    runtime = args.runtime
    if runtime == "auto":
        import importlib.util

        runtime = "torch" if importlib.util.find_spec("onnx2torch") else "ort"
    doc = {"ok": False, "files": [], "runtime": runtime, "device": args.device}
    try:
        if runtime == "torch":
            runners = [TorchRunner(p, args.seed, args.device, not args.eager) for p in (args.a, args.b)]
        else:
            runners = [OrtRunner(p, args.seed) for p in (args.a, args.b)]
        outs = [r.output() for r in runners]
        diff = float(np.max(np.abs(outs[0].astype(np.float64) - outs[1].astype(np.float64)))) if outs[0].shape == outs[1].shape else None
        for r in runners:
            for _ in range(args.warmup):
                r.time_once()
        rng = random.Random(args.seed)
        ms: list[list[float]] = [[], []]
        t0 = time.monotonic()
        rounds = 0
        while rounds < args.rounds:
            order = [0, 1]
            rng.shuffle(order)
            for i in order:
                ms[i].append(runners[i].time_once())
            rounds += 1
            if args.max_seconds and time.monotonic() - t0 > args.max_seconds and rounds >= 10:
                break
        ratios = [a / b for a, b in zip(ms[0], ms[1]) if b > 0]
        lo, hi, cov = median_ci(ratios, args.confidence)
        for path, r, m in zip((args.a, args.b), runners, ms):
            clo, chi, _ = median_ci(m, args.confidence)
            doc["files"].append({"file": path, "mode": r.mode, "median_ms": median(m), "median_ci_ms": [clo, chi], "ms": m})
        doc.update(ok=True, rounds=rounds, warmup=args.warmup, confidence=args.confidence, ci_coverage=cov,
                   speedup=median(ratios), speedup_ci=[lo, hi], max_abs_diff=diff,
                   mode=" / ".join(sorted({r.mode for r in runners})))
    except Exception as e:
        doc["error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"
    text = json.dumps(doc, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    if doc["ok"]:
        print(f"{doc['mode']}: {doc['files'][0]['median_ms']:.4f} ms -> {doc['files'][1]['median_ms']:.4f} ms, "
              f"speedup {doc['speedup']:.3f}x [{doc['speedup_ci'][0]:.3f}, {doc['speedup_ci'][1]:.3f}] over {doc['rounds']} rounds")
        return 0
    print(doc["error"], file=sys.stderr)
    return 1


# --------------------------------------------------------------------------- ctest, environment


def ctest_summary(log: str, out: str) -> int:
    import re

    text = Path(log).read_text(encoding="utf-8", errors="replace")
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", text)
    failed = re.findall(r"^\s*\d+ - (\S+) \(([^)]*)\)", text.split("The following tests FAILED:")[-1], re.M) \
        if "The following tests FAILED:" in text else []
    doc = {"ok": bool(m), "failed": int(m[2]) if m else None, "total": int(m[3]) if m else None,
           "failed_tests": [{"name": n, "why": w} for n, w in failed]}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"ctest: {doc['total'] - doc['failed'] if m else '?'} of {doc['total']} passed" if m else "ctest: no summary line")
    return 0 if m else 1


def env(out: str) -> int:
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": sys.version.split()[0]}
    try:
        import torch

        doc["torch"] = torch.__version__
        doc["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            doc["gpu"] = p.name
            doc["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:  # the dry run's torch may lack CUDA; the record is still useful
        doc["torch_error"] = str(e)[:200]
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
        doc["nvidia_smi"] = q.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        doc["nvidia_smi"] = None
    Path(out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


# --------------------------------------------------------------------------- report


def _load(path: Path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _x(v, digits=3) -> str:
    return "—" if v is None else f"{v:.{digits}f}x"


def _ci(doc, key="speedup_ci") -> str:
    if not doc or not doc.get(key):
        return ""
    lo, hi = doc[key]
    return f" [{lo:.3f}, {hi:.3f}]"


def _ratio(a, b):
    """Speedup of b over a from two `rlflow cost --json` documents."""
    return a["total_ms"] / b["total_ms"] if a and b and b.get("total_ms") else None


def _bench_speedup(doc):
    """rlflow bench --json: the second file's speedup over the first, with its interval."""
    try:
        f = doc["runs"][0]["files"][1]
        return f["speedup"], f["speedup_ci"], [x["median_ms"] for x in doc["runs"][0]["files"]]
    except (KeyError, IndexError, TypeError):
        return None, None, None


def report(state: str, out: str) -> int:
    st = Path(state)
    cfg = _load(st / "campaign.json") or {}
    envd = _load(st / "env.json") or {}
    m = __import__("re").search(r"(\d{4}-\d\d-\d\d)", Path(out).name)
    date = m[1] if m else datetime.date.today().isoformat()
    lines = [f"# rlflow on a GPU: measured against predicted ({date})", ""]
    if cfg.get("dry_run"):
        lines += ["**Dry run** (no GPU): the cudnn cost model was replaced by `" + cfg.get("cost_model", "?") +
                  "`, `bench --target cudnn` by `--target " + cfg.get("bench_target", "?") +
                  "`, the CUDA-graph replay by " + cfg.get("independent", "?") + ". Numbers below test the plumbing only.", ""]
    lines += ["Machine: " + (envd.get("nvidia_smi") or envd.get("gpu") or "no GPU") +
              f"; torch {envd.get('torch', '?')} (CUDA {envd.get('cuda')}, cuDNN {envd.get('cudnn')}), python {envd.get('python', '?')}.",
              f"rlflow: `{cfg.get('rlflow_version', '?')}`, source hash {cfg.get('source_hash', '?')[:12]}.",
              f"Made by `scripts/gpu/gpu_campaign` ({cfg.get('calls', '?')} device calls); cost model `{cfg.get('cost_model')}`, "
              f"optimise `{cfg.get('optimise_args')}`, bench `{cfg.get('bench_args')}`.", ""]

    # Per-model table.
    lines += ["## Per model: predicted against measured", "",
              "Each row compares the input model with the file `rlflow optimise --target " + cfg.get("opt_target", "gpu") +
              "` wrote (*written*: the rewrites applied, and what optimise's own measurement on the target said). "
              "*recorded*: the predicted speedup of that file by `rlflow cost --cost-model recorded`, with the shipped "
              "table and profile, then with the table and profile this campaign made. *search*: the optimiser's own "
              "per-op estimate. *rlflow runner*: `rlflow bench IN OUT "
              "--target " + cfg.get("bench_target", "cudnn") + "` (process 1 / process 2). *independent*: " +
              cfg.get("independent", "onnx2torch in PyTorch") + ". *agreement*: the two rlflow processes' medians, "
              "process 2 / process 1 - 1, for IN and OUT. Speedups > 1 mean the output is faster; brackets are 95% intervals.", "",
              "| model | written | recorded, shipped | recorded, new | search | rlflow runner, p1 | p2 | independent | agreement IN / OUT |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for m in cfg.get("zoo", []):
        opt = _load(st / "optimise" / f"{m}.json")
        pin, pout = _load(st / "bench" / f"{m}.pred.in.json"), _load(st / "bench" / f"{m}.pred.out.json")
        oin, oout = _load(st / "bench" / f"{m}.predold.in.json"), _load(st / "bench" / f"{m}.predold.out.json")
        b1, b2 = _load(st / "bench" / f"{m}.bench1.json"), _load(st / "bench" / f"{m}.bench2.json")
        tb = _load(st / "bench" / f"{m}.independent.json")
        if opt is None:
            lines.append(f"| {m} | not optimised | | | | | | | |")
            continue
        if not opt.get("ok", False):
            lines.append(f"| {m} | failed: {str(opt.get('error', ''))[:80]} | | | | | | | |")
            continue
        written = f"{sum(opt.get('rules_applied', {}).values())} rewrites"
        if opt.get("kept_input"):
            written = "input kept"
        meas = opt.get("measured") or {}
        if meas.get("speedup") is not None:
            written += f" (measured {meas['speedup']:.3f}x{', accepted' if meas.get('accepted') else ''})"
        rec, old = _ratio(pin, pout), _ratio(oin, oout)
        search = opt.get("cost", {}).get("speedup")
        s1, c1, m1 = _bench_speedup(b1)
        s2, c2, m2 = _bench_speedup(b2)
        agree = "—"
        if m1 and m2:
            agree = " / ".join(f"{100 * (b / a - 1):+.1f}%" for a, b in zip(m1, m2))
        ind = "—"
        if tb and tb.get("ok"):
            ind = f"{tb['speedup']:.3f}x{_ci(tb)}"
            if "eager" in tb.get("mode", ""):
                ind += " (eager)"
        elif tb:
            ind = "failed"
            notes.append(f"- {m}, independent runtime: {tb.get('error', '?')}")
        if (st / "optimise" / f"{m}.reoptimised").exists():
            notes.append(f"- {m}: optimised again on a fresh machine before the benchmark (the first output was lost with the machine).")
        lines.append(f"| {m} | {written} | {_x(old)} | {_x(rec)} | {_x(search)} | "
                     f"{_x(s1)}{' [%.3f, %.3f]' % tuple(c1) if c1 else ''} | {_x(s2)}{' [%.3f, %.3f]' % tuple(c2) if c2 else ''} | "
                     f"{ind} | {agree} |")
    lines.append("")
    lines += notes + ([""] if notes else [])

    # The one-call mode: the seconds each step used against its budget.
    steps = st / "quick_steps.tsv"
    if steps.exists():
        rows = [r.split("\t") for r in steps.read_text().splitlines()[1:] if r.strip()]
        limit = (st / "quick_limit").read_text().strip() if (st / "quick_limit").exists() else "?"
        budget = sum(int(r[1]) for r in rows)
        used = sum(int(r[2]) for r in rows)
        lines += ["## Device time, by step (one-call mode)", "",
                  f"`scripts/gpu/gpu_campaign quick`: each step stops at its budget; the budgets add up to {limit} s, "
                  "what one device call may take. The report step writes this table, so it is not in it.", "",
                  "| step | budget s | used s | within budget |", "|---|---:|---:|---|"]
        lines += [f"| {r[0]} | {r[1]} | {r[2]} | {'yes' if int(r[2]) <= int(r[1]) else 'NO'}"
                  f"{'' if r[3] == '0' else ' (stopped at its budget)'} |" for r in rows]
        lines += [f"| all but the report | {budget} | {used} | {'yes' if used <= budget else 'NO'} |", ""]

    # Table hit rate.
    lines += ["## Recorded cost table", ""]
    rounds = sorted((st / "record").glob("r*/hitrate.json"))
    for p in rounds:
        h = _load(p)
        if h:
            lines.append(f"- round {p.parent.name[1:]}: {h['hits']} hits, {h['misses']} misses "
                         f"(**{100 * h['miss_rate']:.1f}% missed**) over {len(h['runs'])} searches under the new table")
    cur = _load(st / "out" / "h100-cost-table.curation.json")
    if cur and cur.get("report", {}).get("devices"):
        how = ("`scripts/gpu/curate_cost_table.py " + " ".join(cur["args"]) + "` (the default slack left contradictions)"
               if cur.get("args") else "`scripts/gpu/curate_cost_table.py` (defaults)")
        for d in cur["report"]["devices"]:
            lines.append(f"- {d['fingerprint']}: {d['entries_in']} timings, {d['replaced']} replaced by {how} "
                         f"({', '.join(f'{k} {v}' for k, v in d['per_check'].items())})")
    if not rounds:
        lines.append("- not recorded")
    lines.append("")

    cal = _load(st / "calibrate" / "calibrate.json")
    lines += ["## Calibration", ""]
    if cal and cal.get("ok"):
        f, b = cal.get("fit", {}), cal.get("base_fit", {})
        lines.append(f"`rlflow cost calibrate {cfg.get('calibrate_args', '')}`: {len(cal.get('samples', []))} ops, relative error "
                     f"median {100 * f.get('median_rel_error', 0):.1f}%, max {100 * f.get('max_rel_error', 0):.1f}% "
                     f"(base profile {cal.get('base')}: median {100 * b.get('median_rel_error', 0):.1f}%, max {100 * b.get('max_rel_error', 0):.1f}%).")
    else:
        lines.append("not calibrated" + (f": {cal.get('error')}" if cal else ""))
    lines.append("")

    ct = _load(st / "ctest" / "summary.json")
    lines += ["## Tests", ""]
    if ct and ct.get("ok"):
        lines.append(f"ctest: {ct['total'] - ct['failed']} of {ct['total']} passed{' (' + cfg['ctest_note'] + ')' if cfg.get('ctest_note') else ''}.")
        lines += [f"- failed: {t['name']} ({t['why']})" for t in ct["failed_tests"]]
    else:
        lines.append("ctest: not run")
    lines.append("")

    fails = (st / "failures.tsv").read_text(encoding="utf-8").splitlines() if (st / "failures.tsv").exists() else []
    rows = [f.split("\t") + ["", ""] for f in fails]
    lines += ["## Failures", ""] + ([f"- {r[0]} ({r[1]}): {r[2]}" for r in rows] if rows else ["none"]) + [""]
    lines += ["## Files", "",
              "`scripts/gpu/gpu_campaign fetch` copies `out/h100-cost-table.json` to `configs/devices/h100-cost-table.json`, "
              "`out/h100.yaml` to `configs/devices/h100.yaml` and this report to `docs/measurements/`. Before committing them, run "
              "`scripts/test` (tests and README tables that quote the shipped table may change) and update "
              "`configs/README.md`'s description of the table.", ""]
    Path(out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")
    return 0


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    if argv[:1] == ["export-zoo"]:
        return run_script("export_models.py", argv[1:])
    if argv[:1] == ["export-hf"]:
        return run_script("export_hf_models.py", argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("zoo")
    p = sub.add_parser("make-table")
    p.add_argument("cache")
    p.add_argument("prefix")
    p.add_argument("out")
    p = sub.add_parser("hitrate")
    p.add_argument("out")
    p.add_argument("files", nargs="+")
    p = sub.add_parser("torchbench")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--device", default="cuda")
    p.add_argument("--runtime", choices=["auto", "torch", "ort"], default="auto")
    p.add_argument("--eager", action="store_true", help="no CUDA graph")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--max-seconds", type=float, default=60)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    p = sub.add_parser("ctest-summary")
    p.add_argument("log")
    p.add_argument("out")
    p = sub.add_parser("env")
    p.add_argument("out")
    p = sub.add_parser("report")
    p.add_argument("state")
    p.add_argument("out")
    a = ap.parse_args(argv)
    if a.cmd == "zoo":
        sys.path.insert(0, str(SCRIPTS / "lib"))
        from rlflow_json import ZOO

        print("\n".join(ZOO))
        return 0
    if a.cmd == "make-table":
        return make_table(a.cache, a.prefix, a.out)
    if a.cmd == "hitrate":
        return hitrate(a.out, a.files)
    if a.cmd == "torchbench":
        return torchbench(a)
    if a.cmd == "ctest-summary":
        return ctest_summary(a.log, a.out)
    if a.cmd == "env":
        return env(a.out)
    return report(a.state, a.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
