#!/usr/bin/env python3
"""onnxruntime behind rlflow's `bench --target ort`: a long-lived helper process.

rlflow starts it once and talks to it in JSON lines on stdin/stdout, one reply per request:
  {"cmd": "hello"}                                    -> {"ok": true, "onnxruntime": "1.32.0", "cores": 2}
  {"cmd": "load", "path": P, "threads": T, "seed": S,
   "inputs": [{"name": N, "shape": [...]}, ...],
   "clock": "auto" | "wall"}                           -> {"ok": true, "id": K}
  {"cmd": "run", "id": K, "n": R}                      -> {"ok": true, "ms": [R times], "clock": C}
  {"cmd": "check", "reference": P, "candidate": Q,
   "inputs": [...], "seed": S, "atol": A, "rtol": R}  -> {"ok": true, "reference_error": E or null,
                                                        "candidate_error": E or null, "match": M,
                                                        "max_abs_diff": D, "message": TEXT}
  {"cmd": "quit"}                                      -> (exits)
Sessions use onnxruntime's default graph optimisation level (ORT_ENABLE_ALL) on the CPU execution
provider, as a user's deployment would; T = 0 lets onnxruntime use every core. Worker threads do not
spin between runs, so that interleaved sessions do not slow each other down. Inputs are seeded:
float inputs N(0, 1), integer inputs zeros, booleans false. "inputs" gives static shapes for
inputs whose dimensions the file leaves symbolic; other inputs take their shapes from the file.
"check" runs two models in onnxruntime (1 thread, ORT_ENABLE_ALL) on the same seeded inputs (float
N(0, 1), integers 0 or 1, booleans random; the shapes as for "load", from the reference's inputs)
and compares their outputs by name, else by position: |q - p| <= A + R |p| elementwise, NaN where
NaN. `rlflow compare` checks a peer tool's file against its input with it, as onnxruntime runs both.
Errors are replies {"ok": false, "error": "..."}, never tracebacks on stdout.

Clocks: a session with one intra-op thread computes on the thread that calls run(), so its runs are
timed in that thread's CPU time (C = "thread CPU"): time the scheduler gives other processes on a
busy machine does not count. A session with more threads is timed in wall-clock time (C = "wall"),
since its work is spread over threads this one does not see; "clock": "wall" in a load request
asks for wall-clock time whatever the threads.
"""
from __future__ import annotations

import json
import os
import sys
import time

DTYPES = {
    "tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def load(req: dict, sessions: list) -> dict:
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    threads = int(req.get("threads", 1))
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Several sessions share this process and run in turns. onnxruntime's worker threads spin after
    # each run by default, so an idle session's threads would steal cores from the next session's run
    # (measured on 2 cores, squeezenet1_1 against a copy of itself, 30 rounds: paired 95% CIs
    # [0.876x, 1.081x] and [0.927x, 1.110x] with spinning, [0.974x, 1.009x] and [0.988x, 1.048x]
    # without). Threads sleep instead.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    sess = ort.InferenceSession(req["path"], opts, providers=["CPUExecutionProvider"])
    given = {i["name"]: i["shape"] for i in req.get("inputs", [])}
    feeds = make_feeds(sess, given, int(req.get("seed", 0)), integers="zeros")
    sessions.append((sess, feeds, threads == 1 and req.get("clock", "auto") != "wall"))
    return {"ok": True, "id": len(sessions) - 1}


def session(path: str, threads: int = 1):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def make_feeds(sess, given: dict, seed: int, integers: str) -> dict:
    """Seeded inputs of the given static shapes: floats N(0, 1); integers and booleans all zero
    ("zeros", what the timing feeds) or each 0 or 1 at random ("binary", what the check feeds)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = given.get(i.name, i.shape)
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise ValueError(f"input '{i.name}' has symbolic shape {i.shape}: give its static shape")
        dtype = DTYPES.get(i.type)
        if dtype is None:
            raise ValueError(f"input '{i.name}' has type {i.type}, which rlflow cannot generate")
        if dtype.startswith("float"):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        elif integers == "zeros":
            feeds[i.name] = np.zeros(shape, dtype=dtype)
        else:
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feeds


CHECK_CACHE: dict = {}


def check(req: dict) -> dict:
    import numpy as np

    given = {i["name"]: i["shape"] for i in req.get("inputs", [])}
    atol, rtol = float(req.get("atol", 1e-4)), float(req.get("rtol", 1e-3))
    reply = {"ok": True, "reference_error": None, "candidate_error": None, "match": False, "max_abs_diff": None, "message": ""}
    # The reference's run is kept for the next check at the same sizes (rlflow compare checks every
    # peer's file at one binding before the next).
    key = json.dumps([req["reference"], req.get("inputs", []), int(req.get("seed", 0))])
    if CHECK_CACHE.get("key") != key:
        CHECK_CACHE.clear()
        try:
            ref = session(req["reference"])
            feeds = make_feeds(ref, given, int(req.get("seed", 0)), integers="binary")
            CHECK_CACHE.update(key=key, feeds=feeds, want=ref.run(None, feeds), names=[o.name for o in ref.get_outputs()])
        except Exception as e:  # noqa: BLE001 - the input itself fails at these sizes
            CHECK_CACHE.update(key=key, error=f"{type(e).__name__}: {e}".replace("\n", " ")[:500])
    if "error" in CHECK_CACHE:
        reply["reference_error"] = CHECK_CACHE["error"]
        return reply
    feeds, want, ref_names = CHECK_CACHE["feeds"], CHECK_CACHE["want"], CHECK_CACHE["names"]
    try:
        cand = session(req["candidate"])
        names = {i.name for i in cand.get_inputs()}
        got = cand.run(None, {k: v for k, v in feeds.items() if k in names})
    except Exception as e:  # noqa: BLE001
        reply["candidate_error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:500]
        return reply
    cand_names = [o.name for o in cand.get_outputs()]
    if len(cand_names) != len(ref_names):
        reply["message"] = f"{len(cand_names)} outputs where the input has {len(ref_names)}"
        return reply
    by_name = sorted(cand_names) == sorted(ref_names)
    worst = 0.0
    for k, name in enumerate(ref_names):
        a = np.asarray(want[k])
        b = np.asarray(got[cand_names.index(name)] if by_name else got[k])
        label = name if by_name else f"output {k} ({name})"
        if a.shape != b.shape:
            reply["message"] = f"{label}: shape {list(b.shape)} where the input gives {list(a.shape)}"
            return reply
        if a.dtype != b.dtype:
            reply["message"] = f"{label}: type {b.dtype} where the input gives {a.dtype}"
            return reply
        if a.size == 0:
            continue
        tol_a, tol_r = atol, rtol
        if a.dtype == np.float16:  # compared at its own precision: 16 half-precision epsilons (2^-10)
            tol_a, tol_r = max(atol, 16 * 2**-10), max(rtol, 16 * 2**-10)
        if a.dtype.kind in "fc":
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            nan_a, nan_b = np.isnan(a64), np.isnan(b64)
            if (nan_a != nan_b).any():
                reply["message"] = f"{label}: NaN at {int((nan_a != nan_b).sum())} elements where the other has none"
                return reply
            same_inf = np.isinf(a64) & (a64 == b64)
            diff = np.where(nan_a | same_inf, 0.0, np.abs(b64 - a64))
            bad = diff > tol_a + tol_r * np.where(same_inf, 0.0, np.abs(a64))
        else:
            diff = (a != b).astype(np.float64)
            bad = diff > 0
        d = float(diff.max())
        worst = max(worst, d)
        if bad.any():
            reply["max_abs_diff"] = worst
            reply["message"] = f"{label}: {int(bad.sum())} of {a.size} elements differ, max |diff| {d:.3g} (atol {tol_a:g}, rtol {tol_r:g})"
            return reply
    reply.update(match=True, max_abs_diff=worst)
    return reply


def run(req: dict, sessions: list) -> dict:
    sess, feeds, one_thread = sessions[int(req["id"])]
    clock = time.thread_time_ns if one_thread else time.perf_counter_ns
    times = []
    for _ in range(max(1, int(req.get("n", 1)))):
        t0 = clock()
        sess.run(None, feeds)
        times.append((clock() - t0) * 1e-6)
    return {"ok": True, "ms": times, "clock": "thread CPU" if one_thread else "wall"}


def serve(handlers: dict) -> int:
    """The JSON-lines loop: one request per line on stdin, one reply per line on stdout, until "quit"
    or the end of input. handlers: {cmd: function(request) -> reply}. Shared with peers.py."""
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "quit":
                return 0
            handler = handlers.get(cmd)
            reply = handler(req) if handler else {"ok": False, "error": f"unknown command {cmd!r}"}
        except Exception as e:  # noqa: BLE001 - every failure becomes one reply line
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}".replace("\n", " ")}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


def hello(req: dict) -> dict:
    import onnxruntime as ort

    return {"ok": True, "onnxruntime": ort.__version__, "cores": os.cpu_count()}


def main() -> int:
    sessions: list = []
    return serve({"hello": hello, "load": lambda req: load(req, sessions), "run": lambda req: run(req, sessions), "check": check})


if __name__ == "__main__":
    sys.exit(main())
