#!/usr/bin/env python3
"""rlflow against the onnxsim and onnxslim simplifiers, measured in onnxruntime.

For each model:
  1. onnxsim (onnxsim.simplify), onnxslim (onnxslim.slim) and rlflow (`rlflow optimise MODEL -o OUT --json`,
     plus the arguments given after `--`) each write a model; the two Python tools run in a child process so
     that a crash in one is an error in its cell, not the end of the run;
  2. each output is checked against the original in onnxruntime (scripts/checks/check_ort.py: onnx.checker, then
     seeded inputs, atol 1e-4, rtol 1e-3); a failure marks the tool's cells "mismatch";
  3. node counts (len(graph.node)) of the four files;
  4. ONE `rlflow bench ORIG SIM SLIM RLFLOW --target ort --json [--rounds N]` call measures all of them,
     interleaved, at 1 thread and at every core: median ms and speedup over the original with its CI.
     A tool that failed is left out of the call. Should the call fail, every file is tried with
     `rlflow info FILE --json` (the same importer), a file it rejects is left out with that error, and the
     call is made once more.
A tool that fails on a model is recorded with its error and the run goes on. Writes a markdown table and a
JSON file (results/simplifiers.md, results/simplifiers.json by default). Exit status 1 when any tool failed,
any output mismatched or a measurement failed.

Models: names of the zoo (models/NAME.onnx, exported with scripts/corpus/export_models when missing) or paths to
.onnx files; by default every zoo model that has been exported. The rlflow binary is $RLFLOW_BIN or
build/rlflow.

    scripts/bench/compare_simplifiers                                 # the exported zoo models
    scripts/bench/compare_simplifiers --models resnet18 bert_base --rounds 50
    scripts/bench/compare_simplifiers --models tests/data/tiny_cnn.onnx -- --search greedy --time-limit 60
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts" / d) for d in ("lib", "checks")]
import check_ort  # noqa: E402
import rlflow_json  # noqa: E402

ZOO = rlflow_json.ZOO
TOOLS = ["onnxsim", "onnxslim", "rlflow"]  # the files after the original, in bench order
ATOL, RTOL = 1e-4, 1e-3
TWO_GB = 2**31


def log(msg: str) -> None:
    print(f"[compare_simplifiers] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the Python simplifiers

def simplify_child(argv: Sequence[str]) -> int:
    """Runs in the child process: TOOL SRC DST RESULT_JSON. Writes {ok, seconds, ...} or {ok: False, error}."""
    tool, src, dst, result_path = argv
    res: dict = {"ok": False}
    try:
        import onnx

        model = onnx.load(src)
        t0 = time.monotonic()
        if tool == "onnxsim":
            import onnxsim

            out, check_ok = onnxsim.simplify(model)
            res["onnxsim_check"] = bool(check_ok)
        elif tool == "onnxslim":
            import onnxslim

            out = onnxslim.slim(model)
        else:
            raise ValueError(f"unknown tool {tool}")
        res["seconds"] = time.monotonic() - t0
        if out is None:
            raise RuntimeError(f"{tool} returned no model")
        onnx.save(out, dst, save_as_external_data=out.ByteSize() >= TWO_GB)
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - every failure becomes the tool's error
        res["error"] = f"{type(e).__name__}: {check_ort._first_line(e)}"
    Path(result_path).write_text(json.dumps(res))
    return 0 if res["ok"] else 1


def run_python_tool(tool: str, src: Path, dst: Path, timeout: float) -> dict:
    """{ok, seconds, ...} or {ok: False, error}; never raises."""
    fd, result_name = tempfile.mkstemp(prefix=f"{tool}-", suffix=".json")
    os.close(fd)
    result_path = Path(result_name)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import compare_simplifiers as c; "
            "sys.exit(c.simplify_child(sys.argv[2:]))")
    cmd = [sys.executable, "-c", code, str(ROOT / "scripts" / "bench"), tool, str(src), str(dst), str(result_path)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        result_path.unlink(missing_ok=True)
        return {"ok": False, "error": f"timed out after {timeout:g} s"}
    wall = time.monotonic() - t0
    try:
        res = json.loads(result_path.read_text())
    except (OSError, json.JSONDecodeError):  # the child died before writing it
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        why = lines[-1].strip() if lines else "no output"
        if p.returncode < 0:
            why = f"killed by signal {-p.returncode}: {why}"
        res = {"ok": False, "error": f"{why} (exit {p.returncode})"}
    finally:
        result_path.unlink(missing_ok=True)
    res["wall_s"] = wall
    if res["ok"] and not dst.is_file():
        res = {"ok": False, "error": f"{tool} wrote no file", "wall_s": wall}
    return res


def tool_versions(binary: str) -> dict:
    out = {}
    for name in ("onnxsim", "onnxslim", "onnx", "onnxruntime"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    try:
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
        out["rlflow"] = p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        out["rlflow"] = None
    return out


# --------------------------------------------------------------------------- checks and node counts

def node_count(path: Path) -> Optional[int]:
    import onnx

    try:
        return len(onnx.load(str(path), load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001
        return None


def check_output(original: Path, output: Path) -> dict:
    """check_ort.check at atol 1e-4, rtol 1e-3: {check: ok|mismatch, check_detail, max_abs_diff}."""
    r = check_ort.check(str(original), str(output), ATOL, 0, rtol=RTOL)
    d = r.get("max_abs_diff")
    return {"check": "ok" if r["ok"] else "mismatch",
            "check_detail": check_ort.format_line(r),
            "max_abs_diff": d if d is None or math.isfinite(d) else None}


# --------------------------------------------------------------------------- rlflow bench

def parse_bench(doc: dict, labels: Sequence[str]) -> List[dict]:
    """`rlflow bench --json` output -> one entry per run (thread setting):
    {threads, runner, rounds, warmup, confidence, files: {label: {median_ms, median_ci_ms, speedup, speedup_ci}}}.
    labels name the files in the order they were passed (the first is the baseline)."""
    runs = []
    for run in doc.get("runs", []):
        files = run.get("files", [])
        if len(files) != len(labels):
            raise ValueError(f"rlflow bench reported {len(files)} files, {len(labels)} were given")
        runs.append({
            "threads": run.get("threads"),
            "runner": run.get("runner"),
            "rounds": run.get("rounds"),
            "warmup": run.get("warmup"),
            "confidence": run.get("confidence"),
            "files": {label: {k: f.get(k) for k in ("file", "median_ms", "median_ci_ms", "speedup", "speedup_ci")}
                      for label, f in zip(labels, files)},
        })
    if not runs:
        raise ValueError("rlflow bench reported no runs")
    return runs


def bench(binary: str, files: Dict[str, Path], rounds: Optional[int], timeout: float) -> dict:
    """One `rlflow bench` call over files (label -> path, original first): {ok, runs} or {ok: False, error}."""
    labels = list(files)
    args = ["bench", *[str(files[k]) for k in labels], "--target", "ort"]
    if rounds:
        args += ["--rounds", str(rounds)]
    r = rlflow_json.rlflow(binary, args, timeout)
    if not r["ok"]:
        return {"ok": False, "error": r["error"]}
    try:
        return {"ok": True, "runs": parse_bench(r["doc"], labels), "wall_s": r["wall_s"]}
    except (ValueError, AttributeError, TypeError) as e:
        return {"ok": False, "error": f"unreadable rlflow bench output: {e}"}


def measure(binary: str, model: Path, tools: dict, rounds: Optional[int], timeout: float) -> dict:
    """The bench call, with one retry leaving out the files rlflow cannot import. Sets tools[t]['bench_error']."""
    files = {"original": model}
    files.update({t: Path(tools[t]["file"]) for t in TOOLS if tools[t].get("file")})
    if len(files) < 2:
        return {"ok": False, "error": "no tool wrote a model"}
    res = bench(binary, files, rounds, timeout)
    if res["ok"]:
        return res
    log(f"rlflow bench failed ({res['error']}); checking which files rlflow can import")
    rejected = {}
    for label, path in files.items():
        info = rlflow_json.rlflow(binary, ["info", str(path)], timeout)
        if not info["ok"]:
            rejected[label] = info["error"]
    if not rejected or "original" in rejected:
        return res
    for label, why in rejected.items():
        tools[label]["bench_error"] = f"rlflow cannot load it: {why}"
    kept = {k: v for k, v in files.items() if k not in rejected}
    return bench(binary, kept, rounds, timeout) if len(kept) > 1 else res


# --------------------------------------------------------------------------- one model

def resolve_model(arg: str) -> Path:
    p = Path(arg)
    if p.suffix == ".onnx" or p.exists():
        if not p.is_file():
            raise FileNotFoundError(f"no such model file: {arg}")
        return p.resolve()
    path = ROOT / "models" / f"{arg}.onnx"
    if not path.is_file():
        log(f"{path.relative_to(ROOT)} missing; exporting it")
        subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus" / "export_models.py"), arg], check=False)
        if not path.is_file():
            raise FileNotFoundError(f"could not export '{arg}' (scripts/corpus/export_models {arg} failed)")
    return path


def model_name(path: Path) -> str:
    return path.name[: -len(".onnx")] if path.name.endswith(".onnx") else path.name


def compare_model(path: Path, work: Path, args, rlflow_args: List[str]) -> dict:
    name = model_name(path)
    rec: dict = {"model": name, "path": str(path), "tools": {"original": {"file": str(path), "nodes": node_count(path)}}}
    for tool in TOOLS:
        out = work / f"{name}.{tool}.onnx"
        log(f"{name}: {tool}")
        if tool == "rlflow":
            r = rlflow_json.rlflow(args.binary, ["optimise", str(path), "-o", str(out), *rlflow_args], args.timeout)
            t = {"ok": r["ok"], "wall_s": r["wall_s"]}
            if r["ok"]:
                doc = r["doc"]
                t["steps"] = len(doc.get("steps", []))
                t["search_s"] = (doc.get("time_s") or {}).get("search")
                if doc.get("kept_input"):
                    t["kept_input"] = doc["kept_input"]
                if not out.is_file():
                    t = {"ok": False, "error": "rlflow optimise wrote no file", "wall_s": r["wall_s"]}
            else:
                t["error"] = r["error"]
        else:
            t = run_python_tool(tool, path, out, args.timeout)
        if t["ok"]:
            t["file"] = str(out)
            t["nodes"] = node_count(out)
            t.update(check_output(path, out))
            if t["check"] != "ok":
                log(f"{name}: {tool}: {t['check_detail']}")
        else:
            log(f"{name}: {tool} failed: {t['error']}")
        rec["tools"][tool] = t
    log(f"{name}: rlflow bench")
    res = measure(args.binary, path, rec["tools"], args.rounds, args.timeout)
    if res["ok"]:
        rec["runs"] = res["runs"]
    else:
        rec["bench_error"] = res["error"]
        log(f"{name}: rlflow bench failed: {res['error']}")
    return rec


def failed(rec: dict) -> bool:
    tools = rec["tools"]
    return bool(rec.get("bench_error")) or any(
        not tools[t].get("ok") or tools[t].get("check") != "ok" or tools[t].get("bench_error") for t in TOOLS)


# --------------------------------------------------------------------------- the table

def _cell_text(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_ms(v: Optional[float]) -> str:
    if v is None:
        return "n/a"
    return f"{v:.2f}" if v >= 1 else f"{v:.3g}"


def fmt_threads(t) -> str:
    return "all" if t == 0 else str(t)


def tool_cell(t: dict, measured: Optional[dict]) -> str:
    if not t.get("ok"):
        return f"error: {_cell_text(t.get('error'))}"
    mark = " **mismatch**" if t.get("check") != "ok" else ""
    if measured is None:
        why = t.get("bench_error") or "not measured"
        return f"not measured: {_cell_text(why)}{mark}"
    s, ci = measured.get("speedup"), measured.get("speedup_ci") or [None, None]
    if s is None:
        return f"{fmt_ms(measured.get('median_ms'))} ms{mark}"
    ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if None not in ci[:2] else ""
    return f"{s:.3f}x{ci_text} ({fmt_ms(measured.get('median_ms'))} ms){mark}"


def nodes_cell(rec: dict) -> str:
    return "/".join("-" if rec["tools"].get(k, {}).get("nodes") is None else str(rec["tools"][k]["nodes"])
                    for k in ["original", *TOOLS])


def render_markdown(records: List[dict], meta: Optional[dict] = None) -> str:
    """The table (and notes) for records as compare_model makes them."""
    lines = []
    if meta:
        v = meta.get("versions", {})
        lines.append(f"onnxsim {v.get('onnxsim')}, onnxslim {v.get('onnxslim')}, {v.get('rlflow') or 'rlflow'}; "
                     f"onnxruntime {v.get('onnxruntime')}; `rlflow bench --target ort`"
                     + (f" --rounds {meta['rounds']}" if meta.get("rounds") else "")
                     + (f"; rlflow optimise args: `{' '.join(meta['rlflow_args'])}`" if meta.get("rlflow_args") else "")
                     + ". Speedup = original latency / tool latency, with its CI; mismatch = differs from the original "
                     f"in onnxruntime (atol {ATOL:g}, rtol {RTOL:g}).")
        lines.append("")
    lines += ["| model | threads | original ms | onnxsim (speedup [CI]) | onnxslim | rlflow | nodes orig/sim/slim/rlflow |",
              "|---|---|---|---|---|---|---|"]
    notes = []
    for rec in records:
        tools = rec["tools"]
        runs = rec.get("runs") or []
        if not runs:
            cells = [f"error: {_cell_text(t['error'])}" if not t.get("ok") else
                     ("ok" if t.get("check") == "ok" else "**mismatch**") for t in (tools[k] for k in TOOLS)]
            lines.append(f"| {rec['model']} | n/a | not measured: {_cell_text(rec.get('bench_error'))} | "
                         f"{' | '.join(cells)} | {nodes_cell(rec)} |")
        for run in runs:
            files = run["files"]
            orig = files.get("original", {})
            ci = orig.get("median_ci_ms") or [None, None]
            orig_text = fmt_ms(orig.get("median_ms"))
            if None not in ci[:2]:
                orig_text += f" [{fmt_ms(ci[0])}, {fmt_ms(ci[1])}]"
            cells = [tool_cell(tools[k], files.get(k)) for k in TOOLS]
            lines.append(f"| {rec['model']} | {fmt_threads(run.get('threads'))} | {orig_text} | {' | '.join(cells)} | "
                         f"{nodes_cell(rec)} |")
        for k in TOOLS:
            if tools[k].get("ok") and tools[k].get("check") != "ok":
                notes.append(f"- {rec['model']} / {k}: {_cell_text(tools[k].get('check_detail'), 400)}")
    if notes:
        lines += ["", "Mismatches:", *notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main

def main(argv: List[str]) -> int:
    argv, rlflow_args = rlflow_json.split_passthrough(argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None,
                    help="zoo names or .onnx paths (default: every exported zoo model)")
    ap.add_argument("--rounds", type=int, default=None, help="rlflow bench --rounds (default: rlflow's)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per tool run and per bench call")
    ap.add_argument("--out", default=str(ROOT / "results" / "simplifiers"), help="writes OUT.md and OUT.json")
    ap.add_argument("--keep", metavar="DIR", default=None, help="keep the tools' outputs in DIR (default: a temp dir)")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")))
    args = ap.parse_args(argv)

    if args.models is None:
        paths = [ROOT / "models" / f"{n}.onnx" for n in ZOO if (ROOT / "models" / f"{n}.onnx").is_file()]
        if not paths:
            ap.error("no zoo model in models/; export some (scripts/corpus/export_models NAME) or pass --models")
    else:
        try:
            paths = [resolve_model(m) for m in args.models]
        except FileNotFoundError as e:
            ap.error(str(e))
    if not os.access(args.binary, os.X_OK):
        ap.error(f"no rlflow binary at {args.binary} (build it, or set RLFLOW_BIN / --binary)")

    meta = {"versions": tool_versions(args.binary), "rounds": args.rounds, "rlflow_args": rlflow_args,
            "atol": ATOL, "rtol": RTOL, "target": "ort"}
    records = []
    with tempfile.TemporaryDirectory(prefix="rlflow-simplifiers-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for path in paths:
            records.append(compare_model(path, work, args, rlflow_args))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + ".json").write_text(
        json.dumps(check_ort._json_safe({"meta": meta, "models": records}), indent=2, allow_nan=False) + "\n")
    table = render_markdown(records, meta)
    out.with_name(out.name + ".md").write_text(table)
    print(table)
    return 1 if any(failed(r) for r in records) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
