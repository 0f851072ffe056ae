#!/usr/bin/env python3
"""onnxruntime behind rlflow's `bench --target ort`: a long-lived helper process.

rlflow starts it once and talks to it in JSON lines on stdin/stdout, one reply per request:
  {"cmd": "hello"}                                    -> {"ok": true, "onnxruntime": "1.32.0", "cores": 2}
  {"cmd": "load", "path": P, "threads": T, "seed": S,
   "inputs": [{"name": N, "shape": [...]}, ...],
   "clock": "auto" | "wall"}                           -> {"ok": true, "id": K}
  {"cmd": "run", "id": K, "n": R}                      -> {"ok": true, "ms": [R times], "clock": C}
  {"cmd": "quit"}                                      -> (exits)
Sessions use onnxruntime's default graph optimisation level (ORT_ENABLE_ALL) on the CPU execution
provider, as a user's deployment would; T = 0 lets onnxruntime use every core. Worker threads do not
spin between runs, so that interleaved sessions do not slow each other down. Inputs are seeded:
float inputs N(0, 1), integer inputs zeros, booleans false. "inputs" gives static shapes for
inputs whose dimensions the file leaves symbolic; other inputs take their shapes from the file.
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
    rng = np.random.default_rng(int(req.get("seed", 0)))
    feeds = {}
    for i in sess.get_inputs():
        shape = given.get(i.name, i.shape)
        if any(not isinstance(d, int) or d < 0 for d in shape):
            raise ValueError(f"input '{i.name}' has symbolic shape {i.shape}: give its static shape")
        dtype = DTYPES.get(i.type)
        if dtype is None:
            raise ValueError(f"input '{i.name}' has type {i.type}, which the benchmark cannot generate")
        if dtype.startswith("float"):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[i.name] = np.zeros(shape, dtype=dtype)
    sessions.append((sess, feeds, threads == 1 and req.get("clock", "auto") != "wall"))
    return {"ok": True, "id": len(sessions) - 1}


def run(req: dict, sessions: list) -> dict:
    sess, feeds, one_thread = sessions[int(req["id"])]
    clock = time.thread_time_ns if one_thread else time.perf_counter_ns
    times = []
    for _ in range(max(1, int(req.get("n", 1)))):
        t0 = clock()
        sess.run(None, feeds)
        times.append((clock() - t0) * 1e-6)
    return {"ok": True, "ms": times, "clock": "thread CPU" if one_thread else "wall"}


def main() -> int:
    sessions: list = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "quit":
                return 0
            if cmd == "hello":
                import onnxruntime as ort
                reply = {"ok": True, "onnxruntime": ort.__version__, "cores": os.cpu_count()}
            elif cmd == "load":
                reply = load(req, sessions)
            elif cmd == "run":
                reply = run(req, sessions)
            else:
                reply = {"ok": False, "error": f"unknown command {cmd!r}"}
        except Exception as e:  # noqa: BLE001 - every failure becomes one reply line
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}".replace("\n", " ")}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
