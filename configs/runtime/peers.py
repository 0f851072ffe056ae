#!/usr/bin/env python3
"""The peer tools behind `rlflow compare`: a long-lived helper process.

rlflow starts it once and talks to it in JSON lines on stdin/stdout, one reply per request:
  {"cmd": "hello"}                                 -> {"ok": true, "peers": {NAME: VERSION or null}}
  {"cmd": "run", "peer": NAME, "src": P, "dst": Q,
   "timeout": SECONDS}                             -> {"ok": true, "status": S, "seconds": T, "error": E,
                                                       "version": V, "nodes": N}
  {"cmd": "nodes", "path": P}                      -> {"ok": true, "nodes": N}  (len(graph.node))
  {"cmd": "quit"}                                  -> (exits)
Each peer runs in a child process of its own (this file with `child PEER SRC DST RESULT`), so a
crash, a hang or a memory blow-up in one is that peer's result, never the end of the comparison.
S is "ok", "not installed", "failed" (E says why), "timed out" or "crashed" (E: the signal).

Peers (NAME: what runs, with the tool's defaults, as its own documentation shows it):
  onnxslim            onnxslim.slim(model)
  onnxsim             onnxsim.simplify(model)
  onnxoptimizer       onnxoptimizer.optimize(model)  (its default passes)
  ort-fusions         onnxscript.rewriter.ort_fusions.optimize_for_ort (onnxruntime's contrib ops)
  ort-transformers    onnxruntime.transformers.optimizer.optimize_model (model type gpt2;
                      ort-transformers:TYPE for another, e.g. ort-transformers:bert)
  resaved             onnx.load then onnx.save: the input unchanged, a noise control (its speedup is noise)
  script:PATH         `python PATH SRC DST`: a user's own pipeline; exit 0 and DST written is success
Models over 2 GB are saved with their weights in one external-data file beside DST.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_runner import serve  # noqa: E402  (the JSON-lines loop both helpers share)

os.environ.setdefault("ORT_LOGGING_LEVEL", "3")

# The peer's name -> the module whose version it reports.
MODULES = {
    "onnxslim": "onnxslim",
    "onnxsim": "onnxsim",
    "onnxoptimizer": "onnxoptimizer",
    "ort-fusions": "onnxscript",
    "ort-transformers": "onnxruntime",
    "resaved": "onnx",
}
TWO_GB = 2**31


def version_of(peer: str):
    base = peer.split(":", 1)[0]
    if base == "script":
        path = peer.split(":", 1)[1] if ":" in peer else ""
        return "script" if path and os.path.isfile(path) else None
    module = MODULES.get(base)
    if module is None:
        return None
    try:
        from importlib import metadata

        return metadata.version(module)
    except Exception:  # noqa: BLE001 - not installed, or installed without metadata
        try:
            mod = __import__(module)
            return str(getattr(mod, "__version__", "?"))
        except Exception:  # noqa: BLE001
            return None


def save(model, dst: str) -> None:
    import onnx

    if model.ByteSize() > TWO_GB:
        onnx.save_model(model, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(dst) + ".data")
    else:
        onnx.save_model(model, dst)


def child(peer: str, src: str, dst: str) -> None:
    """Runs one peer tool on SRC and writes DST (in the child process)."""
    import onnx

    base, _, arg = peer.partition(":")
    if base == "onnxslim":
        import onnxslim

        save(onnxslim.slim(onnx.load(src)), dst)
    elif base == "onnxsim":
        import onnxsim

        out, _check = onnxsim.simplify(onnx.load(src))
        save(out, dst)
    elif base == "onnxoptimizer":
        import onnxoptimizer

        save(onnxoptimizer.optimize(onnx.load(src)), dst)
    elif base == "ort-fusions":
        import onnx_ir as ir
        from onnxscript.rewriter import ort_fusions

        model = ir.load(src)
        ort_fusions.optimize_for_ort(model)
        save(ir.to_proto(model), dst)
    elif base == "resaved":
        save(onnx.load(src), dst)
    elif base == "ort-transformers":
        from onnxruntime.transformers import optimizer

        opt = optimizer.optimize_model(src, model_type=arg or "gpt2", opt_level=None)
        save(opt.model, dst)
    else:
        raise ValueError(f"unknown peer {peer!r}")


def run(req: dict) -> dict:
    peer, src, dst = req["peer"], req["src"], req["dst"]
    timeout = float(req.get("timeout", 600))
    version = version_of(peer)
    res = {"ok": True, "version": version, "seconds": 0.0, "error": None, "nodes": None}
    if version is None:
        res["status"] = "not installed"
        base = peer.split(":", 1)[0]
        res["error"] = ("no such file: " + peer.split(":", 1)[1]) if base == "script" else (
            f"{MODULES.get(base, base)} is not installed in {sys.executable}" if base in MODULES else f"unknown peer '{peer}'")
        return res
    if peer.startswith("script:"):
        argv = [sys.executable, peer.split(":", 1)[1], src, dst]
    else:
        argv = [sys.executable, os.path.abspath(__file__), "child", peer, src, dst]
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=timeout,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            res.update(status="timed out", seconds=time.monotonic() - t0, error=f"no result in {timeout:g} s")
            return res
        res["seconds"] = time.monotonic() - t0
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    if proc.returncode < 0:
        res.update(status="crashed", error=f"killed by signal {signal.Signals(-proc.returncode).name}")
    elif proc.returncode != 0:
        res.update(status="failed", error=(lines[-1] if lines else f"exit status {proc.returncode}")[:500])
    elif not os.path.isfile(dst):
        res.update(status="failed", error="it wrote no file")
    else:
        res["status"] = "ok"
        try:
            import onnx

            res["nodes"] = len(onnx.load(dst, load_external_data=False).graph.node)
        except Exception as e:  # noqa: BLE001 - a file onnx cannot read is a failure of the peer
            res.update(status="failed", error=f"its file does not load: {type(e).__name__}: {e}"[:500])
    return res


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "child":
        child(*sys.argv[2:])
        return 0

    def nodes(req: dict) -> dict:
        import onnx

        return {"ok": True, "nodes": len(onnx.load(req["path"], load_external_data=False).graph.node)}

    return serve({"hello": lambda req: {"ok": True, "peers": {p: version_of(p) for p in req.get("peers", list(MODULES))}},
                  "run": run, "nodes": nodes})


if __name__ == "__main__":
    sys.exit(main())
