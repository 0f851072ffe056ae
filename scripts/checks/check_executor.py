#!/usr/bin/env python3
"""Check rlflow's reference executor against onnxruntime on whole models.

For each model: seeded inputs (float ~ N(0, 1), see check_ort.make_inputs), onnxruntime's outputs
(CPU, one thread) are written with the inputs as input_N.pb / output_N.pb into a temporary folder,
and `rlflow run MODEL --data-dir DIR --atol A` compares its executor's outputs with them.

    check_executor.py [--atol 1e-4] [--seed 0] MODEL.onnx [MODEL.onnx ...]

Prints one line per model and a final line `N passed, M failed`; exit 1 if any failed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_ort  # noqa: E402  (shares the input generator with the round-trip check)


def check_one(binary: str, model_path: str, atol: float, seed: int) -> tuple[bool, str]:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(model_path, load_external_data=False)
    shapes = check_ort.symbolic_inputs(model)
    feeds = check_ort.make_inputs(model, seed, shapes)
    outs = check_ort.session(model_path).run(None, feeds)
    with tempfile.TemporaryDirectory(prefix="rlflow-exec-") as d:
        for k, vi in enumerate(check_ort.graph_inputs(model)):
            t = numpy_helper.from_array(np.asarray(feeds[vi.name]), vi.name)
            Path(d, f"input_{k}.pb").write_bytes(t.SerializeToString())
        for k, o in enumerate(outs):
            Path(d, f"output_{k}.pb").write_bytes(numpy_helper.from_array(np.asarray(o)).SerializeToString())
        r = subprocess.run([binary, "run", model_path, "--data-dir", d, "--atol", str(atol), "--rtol", "0", "--json"],
                           capture_output=True, text=True)
    if r.returncode not in (0, 4):
        return False, f"rlflow run exited {r.returncode}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}"
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        return False, "rlflow run printed no JSON"
    return bool(doc.get("ok")), f"max_abs_diff={doc.get('max_abs_diff'):.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--binary", default=os.environ.get("RLFLOW_BIN", str(Path(__file__).resolve().parents[2] / "build" / "rlflow")))
    args = ap.parse_args()
    passed = failed = 0
    for m in args.models:
        ok, msg = check_one(args.binary, m, args.atol, args.seed)
        print(f"{'OK  ' if ok else 'FAIL'} {Path(m).name:28s} {msg}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
