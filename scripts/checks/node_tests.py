#!/usr/bin/env python3
"""Run the ONNX backend node tests shipped in the onnx wheel through
`rlflow run MODEL --data-dir test_data_set_0 --json`.

A test is selected when every op in its model is in --ops (default: the ops
rlflow supports). Exit status of rlflow run: 0 = pass, 4 = mismatch (failed),
3 = unsupported (counted separately, not a failure); anything else, a crash, a
timeout or missing/invalid JSON on stdout is a failure. A test in KNOWN_FAILURES
(an executor defect, with its reason) that fails is a known failure, counted
separately; one that passes is a failure, so that the list is kept short.

    scripts/checks/node_tests                          # default op set
    scripts/checks/node_tests --ops Conv Relu -k pads  # only Conv/Relu tests whose name contains 'pads'
    scripts/checks/node_tests --json results/node.json -j 2
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]

DEFAULT_OPS = (
    "Conv MatMul Gemm Add Sub Mul Div Relu Sigmoid Tanh Erf Clip Softmax LayerNormalization "
    "ReduceMean Pow Sqrt BatchNormalization MaxPool AveragePool GlobalAveragePool Concat Split "
    "Transpose Reshape Flatten Pad Slice Gather Squeeze Unsqueeze Identity Dropout Gelu HardSigmoid HardSwish "
    "Cast CastLike Constant ConstantOfShape Shape Range "
    # ONNX ops carried verbatim and run by the executor's ONNX op table (src/exec/onnx_ops.cpp)
    "Where Equal Less Greater LessOrEqual GreaterOrEqual Not And Or Xor BitShift BitwiseAnd BitwiseOr BitwiseXor "
    "BitwiseNot Expand Tile Trilu CumSum ScatterND ScatterElements Scatter GatherElements GatherND OneHot NonZero "
    "Neg Abs Exp Log Reciprocal Floor Ceil Round Sign Min Max Mean Sum Mod Sin Cos Tan Asin Acos Atan Sinh Cosh "
    "Asinh Acosh Atanh IsNaN IsInf Softsign Softplus Mish LeakyRelu Elu Selu Celu ThresholdedRelu PRelu "
    "ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare "
    "ArgMax ArgMin TopK LogSoftmax Hardmax LpNormalization Einsum InstanceNormalization GroupNormalization "
    "Resize ConvTranspose DepthToSpace SpaceToDepth GlobalMaxPool Size NegativeLogLikelihoodLoss "
    "SoftmaxCrossEntropyLoss GridSample DequantizeLinear QuantizeLinear DynamicQuantizeLinear MatMulInteger EyeLike Det Shrink "
    "MeanVarianceNormalization LRN ReverseSequence HannWindow HammingWindow BlackmanWindow CenterCropPad Compress LpPool"
).split()


# Executor defects the node tests found, each with its reason. Remove an entry when the executor is
# fixed (a listed test that passes fails the run). The four onnx 1.19.1 found (AveragePool's divisor
# with count_include_pad and a ceil_mode overhang; TopK's order among equal values) were fixed on
# 2026-11-26.
KNOWN_FAILURES: Dict[str, str] = {}

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Case:
    name: str
    dir: str
    op: str  # row of the per-op table
    ops: List[str]
    opset: int
    ir_version: int
    status: str = "not run"  # passed | failed | unsupported | known_failure
    exit_code: Optional[int] = None
    max_abs_diff: Optional[float] = None
    seconds: float = 0.0
    message: str = ""


def node_test_root() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def _row_op(test_name: str, ops: List[str]) -> str:
    """Single-op tests are filed under their op; a multi-op test under the op its
    name starts with (test_layer_normalization_* -> LayerNormalization)."""
    if len(ops) == 1:
        return ops[0]
    flat = test_name[len("test_"):].replace("_", "").lower()
    for op in sorted(ops, key=len, reverse=True):
        if flat.startswith(op.lower()):
            return op
    return "+".join(ops)


def discover(root: Path, supported: set, pattern: Optional[str]) -> tuple:
    import onnx

    cases: List[Case] = []
    skipped = 0
    rx = re.compile(pattern) if pattern else None
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if rx and not rx.search(d.name):
            continue
        model_path = d / "model.onnx"
        data = d / "test_data_set_0"
        if not model_path.is_file() or not data.is_dir():
            continue
        try:
            model = onnx.load(str(model_path), load_external_data=False)
        except Exception:
            skipped += 1
            continue
        ops = sorted({n.op_type for n in model.graph.node})
        default_domain = all(n.domain in ("", "ai.onnx") for n in model.graph.node)
        if not ops or not default_domain or (supported is not None and not set(ops) <= supported):
            skipped += 1
            continue
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        cases.append(Case(d.name, str(d), _row_op(d.name, ops), ops, opset, model.ir_version))
    return cases, skipped


def run_case(case: Case, binary: str, atol: Optional[float], rtol: Optional[float], timeout: float) -> Case:
    cmd = [binary, "run", str(Path(case.dir) / "model.onnx"), "--data-dir",
           str(Path(case.dir) / "test_data_set_0"), "--json"]
    if atol is not None:
        cmd += ["--atol", repr(atol)]
    if rtol is not None:
        cmd += ["--rtol", repr(rtol)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        case.seconds = time.perf_counter() - t0
        case.status, case.message = "failed", f"timeout after {timeout:.0f} s"
        return known(case)
    except OSError as e:
        case.status, case.message = "failed", f"cannot run {binary}: {e}"
        return case
    case.seconds = time.perf_counter() - t0
    case.exit_code = p.returncode
    err = ANSI.sub("", p.stderr).strip().splitlines()
    case.message = err[-1][:300] if err else ""

    doc = None
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        pass
    if isinstance(doc, dict):
        d = doc.get("max_abs_diff")
        case.max_abs_diff = float(d) if isinstance(d, (int, float)) else None

    if p.returncode == 3:
        case.status = "unsupported"
    elif p.returncode == 0:
        if not isinstance(doc, dict) or "ok" not in doc:
            case.status, case.message = "failed", "exit 0 but stdout is not a JSON document with 'ok'"
        elif doc["ok"] is not True:
            case.status, case.message = "failed", "exit 0 but JSON says ok=false"
        else:
            case.status = "passed"
    elif p.returncode == 4:
        case.status = "failed"
        if not case.message:
            case.message = f"mismatch, max_abs_diff={case.max_abs_diff}"
    else:
        case.status = "failed"
        sig = f" (signal {-p.returncode})" if p.returncode < 0 else ""
        case.message = f"exit {p.returncode}{sig}: {case.message}"
    return known(case)


def known(case: Case) -> Case:
    """Applies KNOWN_FAILURES: a listed failure is expected (with its reason); a listed pass is not."""
    reason = KNOWN_FAILURES.get(case.name)
    if reason is None:
        return case
    if case.status == "failed":
        case.status, case.message = "known_failure", f"{reason} ({case.message})"
    elif case.status == "passed":
        case.status, case.message = "failed", "passes but is listed in KNOWN_FAILURES: remove it there"
    return case


def print_table(cases: List[Case], out=sys.stdout) -> Dict[str, int]:
    rows: Dict[str, Dict[str, int]] = defaultdict(
        lambda: {"cases": 0, "passed": 0, "failed": 0, "unsupported": 0, "known_failure": 0})
    for c in cases:
        r = rows[c.op]
        r["cases"] += 1
        r[c.status] = r.get(c.status, 0) + 1
    totals = {k: sum(r[k] for r in rows.values()) for k in ("cases", "passed", "failed", "unsupported", "known_failure")}
    w = max([len("op"), len("total")] + [len(op) for op in rows])
    header = f"{'op':<{w}}  {'cases':>5}  {'passed':>6}  {'failed':>6}  {'unsupported':>11}  {'known failure':>13}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for op in sorted(rows):
        r = rows[op]
        print(f"{op:<{w}}  {r['cases']:>5}  {r['passed']:>6}  {r['failed']:>6}  {r['unsupported']:>11}  "
              f"{r['known_failure']:>13}", file=out)
    print("-" * len(header), file=out)
    print(f"{'total':<{w}}  {totals['cases']:>5}  {totals['passed']:>6}  {totals['failed']:>6}  "
          f"{totals['unsupported']:>11}  {totals['known_failure']:>13}", file=out)
    return {"per_op": dict(rows), **totals}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=DEFAULT_OPS, metavar="OP",
                    help="supported op types (default: rlflow's op set)")
    ap.add_argument("--all", action="store_true",
                    help="every default-domain node test, whatever its ops (coverage; ignores --ops)")
    ap.add_argument("-k", "--filter", metavar="REGEX", help="only tests whose directory name matches")
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow")),
                    help="rlflow binary (default: $RLFLOW_BIN or build/rlflow)")
    ap.add_argument("--atol", type=float, help="passed to rlflow run --atol")
    ap.add_argument("--rtol", type=float, help="passed to rlflow run --rtol")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per test (default 120)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="tests run in parallel (default 1)")
    ap.add_argument("--json", metavar="OUT", type=Path, help="write all results to this JSON file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failed/unsupported test with its message")
    ap.add_argument("--list", action="store_true", help="list the selected tests and exit")
    args = ap.parse_args(argv)

    try:
        root = node_test_root()
    except ImportError:
        print("error: the onnx Python package is missing; run scripts/setup/setup", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"error: no node test data at {root}", file=sys.stderr)
        return 2
    if args.filter:
        try:
            re.compile(args.filter)
        except re.error as e:
            print(f"error: bad --filter regex: {e}", file=sys.stderr)
            return 2

    cases, skipped = discover(root, None if args.all else set(args.ops), args.filter)
    if args.list:
        for c in cases:
            print(f"{c.name:60s} {c.op:20s} opset {c.opset:2d} ir {c.ir_version}")
        print(f"{len(cases)} selected, {skipped} skipped (use ops outside --ops)")
        return 0
    if not cases:
        print("error: no node tests selected", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print(f"error: rlflow binary not found at {args.binary}; build it first (or pass --binary)", file=sys.stderr)
        return 2

    tty = sys.stderr.isatty()
    t0 = time.perf_counter()
    done = 0
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_case, c, args.binary, args.atol, args.rtol, args.timeout) for c in cases]
        for _ in cf.as_completed(futures):
            done += 1
            if tty:
                print(f"\r[node_tests] {done}/{len(cases)}", end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    wall = time.perf_counter() - t0

    if args.verbose:
        for c in cases:
            if c.status != "passed":
                print(f"{c.status.upper():11s} {c.name} (opset {c.opset}): {c.message}")
        print()
    summary = print_table(cases)
    print(f"{skipped} node tests skipped ({'other domains' if args.all else 'ops outside the supported set'}); {wall:.1f} s")
    if summary["cases"]:
        print(f"coverage: {summary['passed']} of {summary['cases']} selected cases pass "
              f"({100.0 * summary['passed'] / summary['cases']:.1f}%)")

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "binary": args.binary,
            "node_test_root": str(root),
            "ops": sorted(args.ops),
            "skipped": skipped,
            "known_failures": KNOWN_FAILURES,
            "wall_s": wall,
            "summary": summary,
            "tests": [asdict(c) for c in cases],
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{summary['passed']} passed, {summary['failed']} failed, {summary['known_failure']} known failures (KNOWN_FAILURES)")
    # --all measures coverage: failures there are findings to report, not a broken build.
    return 1 if summary["failed"] and not args.all else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # e.g. piped into head
        os._exit(1)
