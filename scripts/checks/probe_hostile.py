#!/usr/bin/env python3
"""Runs rlflow against 21 hostile cases and checks each against README "Exit codes and guarantees".

    probe_hostile.py [--rlflow PATH] [--json FILE] [--only N[,N...]] [--keep DIR]

Exit codes rlflow promises: 0 ok; 2 usage (an output path it cannot write: a symlink, a folder
that takes no new file, a name too long); 3 bad input (an input file it cannot read: missing, a
FIFO, a device or a directory; a memory estimate over --memory-limit, opsets too new, a damaged
checkpoint or rollout file); 4 verification failed; 5 internal error. Exit 5, a death by a signal and a timeout are failures in every case, and every
error must be one line starting `rlflow: error:`.

Prints one line per case, `held` or `FAILED (reason)`, then "N/21 held"; the details of each failed
case (the commands, their exit codes, rlflow's stderr) go to stderr, and with --json FILE into FILE.
Exits 1 if any case failed, 2 on a usage error. Everything runs in a fresh temporary folder, with
fixed seeds; every subprocess has a timeout. Tiny models, built with onnx.helper.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 21
QUICK_S = 10.0      # a refusal of a path, FIFO or device must come within this
DEFAULT_TIMEOUT_S = 60.0
WORKERS = 2         # independent runs of a case (rollout flips, /dev/zero flags, FIFOs) go two at a time


# ----------------------------------------------------------------------------------------------
# Running rlflow


class Result:
    def __init__(self, cmd: str, rc: int, out: bytes, err: bytes, secs: float, rss_mb: float, timed_out: bool):
        self.cmd, self.rc, self.out, self.err_bytes = cmd, rc, out, err
        self.err = err.decode("utf-8", "replace")
        self.secs, self.rss_mb, self.timed_out = secs, rss_mb, timed_out

    def describe(self, lines: int = 4) -> str:
        if self.timed_out:
            status = "timed out"
        elif self.rc < 0:
            status = "killed by " + signal.Signals(-self.rc).name
        else:
            status = "exit %d" % self.rc
        tail = [l for l in self.err.strip().splitlines() if l.strip()][-lines:]
        s = "$ %s\n    -> %s in %.2fs, max RSS %.0f MB" % (self.cmd, status, self.secs, self.rss_mb)
        for l in tail:
            s += "\n    stderr: " + l[:400]
        return s


def _rc_of(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def run_process(argv: Sequence[str], cwd: Path, env: Dict[str, str], timeout: float,
                term_after: Optional[float] = None, as_limit: Optional[int] = None,
                display: Optional[str] = None) -> Result:
    """Runs argv with stdout/stderr to files; reaps it with wait4 for its own max RSS. A timeout
    kills its whole session (the processes it started); term_after sends SIGTERM to it alone."""
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()

    def pre():
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    t0 = time.monotonic()
    p = subprocess.Popen(list(argv), cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out_f,
                         stderr=err_f, start_new_session=True, preexec_fn=pre if as_limit else None)
    timed_out = False
    termed = False
    status, ru = 0, None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        now = time.monotonic() - t0
        if term_after is not None and not termed and now >= term_after:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            termed = True
        if now > timeout:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.005)
    secs = time.monotonic() - t0
    p.returncode = _rc_of(status)  # reaped here: Popen must not wait for it again
    try:  # whatever it left running in its session (e.g. a measuring child after SIGTERM)
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    out_f.seek(0)
    err_f.seek(0)
    res = Result(display or " ".join(shlex.quote(a) for a in argv), p.returncode, out_f.read(), err_f.read(),
                 secs, (ru.ru_maxrss / 1024.0) if ru else 0.0, timed_out)
    out_f.close()
    err_f.close()
    return res


def problem(r: Result, allowed: Sequence[int], quick: Optional[float] = None,
            max_rss_mb: Optional[float] = None) -> Optional[str]:
    """None if r exited with one of `allowed` (and, for an error, printed one error line), within
    `quick` seconds and `max_rss_mb`; otherwise a short reason."""
    if r.timed_out:
        return "timed out after %.0fs" % r.secs
    if r.rc < 0:
        return "killed by " + signal.Signals(-r.rc).name
    if r.rc == 5:
        return "exit 5 (internal error): " + last_line(r)
    if r.rc not in allowed:
        return "exit %d, expected %s%s" % (r.rc, "/".join(map(str, allowed)), (": " + last_line(r)) if r.rc else "")
    if r.rc != 0:
        lines = [l for l in r.err.splitlines() if l.strip()]
        errs = [l for l in lines if l.startswith("rlflow: error:")]
        if len(errs) != 1 or lines[-1] != errs[0]:
            return "exit %d but stderr does not end in exactly one 'rlflow: error:' line (%d error lines)" % (r.rc, len(errs))
    if quick is not None and r.secs > quick:
        return "exit %d but took %.1fs (want < %.0fs)" % (r.rc, r.secs, quick)
    if max_rss_mb is not None and r.rss_mb > max_rss_mb:
        return "exit %d but max RSS %.0f MB (want < %.0f MB)" % (r.rc, r.rss_mb, max_rss_mb)
    return None


def last_line(r: Result) -> str:
    lines = [l for l in r.err.splitlines() if l.strip()]
    return lines[-1][:200] if lines else "(no stderr)"


# ----------------------------------------------------------------------------------------------
# Models and onnxruntime

def make_model(nodes, inputs, outputs, inits=(), opset: int = 17, extra_opsets=(), **kw) -> onnx.ModelProto:
    g = oh.make_graph(nodes, "g", inputs, outputs, list(inits))
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)] + list(extra_opsets), **kw)


def vi(name, dtype, shape):
    return oh.make_tensor_value_info(name, dtype, shape)


def save(m: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(m.SerializeToString())
    return path


def external_tensor(name: str, dtype: int, dims, location: str, offset: int = 0, length: Optional[int] = None):
    t = onnx.TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.data_location = onnx.TensorProto.EXTERNAL
    kv = [("location", location), ("offset", str(offset))]
    if length is not None:
        kv.append(("length", str(length)))
    for k, v in kv:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def relu_relu_add(shape=(2, 3)) -> onnx.ModelProto:
    """y = Relu(Relu(x)) + x: the default rules fold Relu(Relu(x))."""
    nodes = [oh.make_node("Relu", ["x"], ["r1"]), oh.make_node("Relu", ["r1"], ["r2"]),
             oh.make_node("Add", ["r2", "x"], ["y"])]
    return make_model(nodes, [vi("x", TP.FLOAT, list(shape))], [vi("y", TP.FLOAT, list(shape))])


def sha(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


ORT_SCRIPT = r"""
import os, sys
os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
import numpy as np, onnxruntime as ort
model, feeds, out = sys.argv[1:4]
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.log_severity_level = 3
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
f = dict(np.load(feeds))
res = s.run(None, f)
np.savez(out, *[np.asarray(r) for r in res])
"""


def ort_eval(model: Path, feeds: Dict[str, np.ndarray], work: Path) -> Tuple[Optional[List[np.ndarray]], str]:
    """Runs `model` in onnxruntime in its own process (a hostile model may crash it)."""
    fd, fpath = tempfile.mkstemp(suffix=".npz", dir=str(work))
    os.close(fd)
    np.savez(fpath, **feeds)
    opath = fpath[:-4] + ".out.npz"
    try:
        r = subprocess.run([sys.executable, "-c", ORT_SCRIPT, str(model), fpath, opath], capture_output=True,
                           timeout=60, cwd=str(work))
    except subprocess.TimeoutExpired:
        return None, "onnxruntime timed out"
    if r.returncode != 0:
        if r.returncode < 0:
            return None, "onnxruntime killed by " + signal.Signals(-r.returncode).name
        lines = [l for l in r.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
        return None, "onnxruntime: " + (lines[-1][:200] if lines else "exit %d" % r.returncode)
    with np.load(opath) as z:
        outs = [z["arr_%d" % i] for i in range(len(z.files))]
    os.unlink(fpath)
    os.unlink(opath)
    return outs, ""


def same(a: List[np.ndarray], b: List[np.ndarray], atol=1e-4, rtol=1e-3) -> Optional[str]:
    """None if equal (NaN equals NaN, inf equals inf of its sign), else what differs."""
    if len(a) != len(b):
        return "%d outputs vs %d" % (len(a), len(b))
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return "output %d: shape %s vs %s" % (i, list(x.shape), list(y.shape))
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            if not np.array_equal(np.isnan(xf), np.isnan(yf)) or not np.allclose(xf, yf, atol=atol, rtol=rtol, equal_nan=True):
                return "output %d: %s vs %s" % (i, fmt(x), fmt(y))
        elif not np.array_equal(x, y):
            return "output %d: %s vs %s" % (i, fmt(x), fmt(y))
    return None


def fmt(a: np.ndarray) -> str:
    s = np.array2string(a.ravel()[:8], separator=",")
    return s + ("..." if a.size > 8 else "")


# ----------------------------------------------------------------------------------------------
# The probe

class Probe:
    def __init__(self, rlflow: str, work: Path):
        self.rlflow = rlflow
        self.work = work
        self.env = dict(os.environ)
        # Keep every cost cache inside the temporary folder.
        self.env["RLFLOW_COST_CACHE"] = str(work / "cost-cache.json")
        self.env["XDG_CACHE_HOME"] = str(work / "xdg-cache")
        self.env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.env.setdefault("OMP_NUM_THREADS", "1")
        self.details: List[str] = []
        self.fails: List[str] = []
        self.notes: List[str] = []
        self._rollout: Optional[Tuple[Path, List[str], bytes, Optional[str]]] = None
        self._gpus: Optional[int] = None

    # -- bookkeeping
    def fail(self, why: str):
        self.fails.append(why)

    def note(self, what: str):
        self.notes.append(what)

    def rl(self, args: Sequence[str], cwd: Path, **kw) -> Result:
        r = self._rl(args, cwd, **kw)
        self.details.append(r.describe())
        return r

    def _rl(self, args: Sequence[str], cwd: Path, timeout: float = DEFAULT_TIMEOUT_S, env: Optional[Dict[str, str]] = None,
            term_after: Optional[float] = None, as_limit: Optional[int] = None, shell: bool = False) -> Result:
        e = dict(self.env)
        if env:
            e.update(env)
        if shell:  # args[0] is a bash script that uses "$RLFLOW"
            e["RLFLOW"] = self.rlflow
            argv = ["bash", "-c", args[0]]
            disp = "(cd %s && %s)" % (cwd.name, args[0].replace('"$RLFLOW"', "rlflow"))
        else:
            argv = [self.rlflow] + list(args)
            pre = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in (env or {}).items())
            disp = "(cd %s && %srlflow %s)" % (cwd.name, pre + " " if pre else "", " ".join(shlex.quote(a) for a in args))
        return run_process(argv, cwd, e, timeout, term_after=term_after, as_limit=as_limit, display=disp)

    def rl_many(self, jobs: Sequence[Tuple[Sequence[str], Path, dict]]) -> List[Result]:
        """Runs independent rlflow commands two at a time (the runs are single-threaded and mostly
        start-up); the results and the details come back in the jobs' order."""
        from concurrent.futures import ThreadPoolExecutor
        details = self.details
        out: List[Result] = []
        with ThreadPoolExecutor(max_workers=WORKERS) as ex:
            futs = []
            for args, cwd, kw in jobs:
                def job(args=args, cwd=cwd, kw=kw):
                    return self._rl(args, cwd, **kw)
                futs.append(ex.submit(job))
            for f in futs:
                r = f.result()
                details.append(r.describe())
                out.append(r)
        return out

    def check(self, label: str, r: Result, allowed: Sequence[int], **kw) -> bool:
        p = problem(r, allowed, **kw)
        if p:
            self.fail("%s: %s" % (label, p))
            return False
        return True

    def casedir(self, n: int) -> Path:
        d = self.work / ("case%02d" % n)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def ort(self, model: Path, feeds) -> Tuple[Optional[List[np.ndarray]], str]:
        return ort_eval(model, feeds, self.work)

    def matches_input(self, label: str, orig: Path, out: Path, feeds) -> bool:
        ref, why = self.ort(orig, feeds)
        if ref is None:
            self.fail("%s: onnxruntime cannot run the input (%s)" % (label, why))
            return False
        got, why = self.ort(out, feeds)
        if got is None:
            self.fail("%s: exit 0 but the output does not run in onnxruntime (%s)" % (label, why))
            return False
        d = same(got, ref)
        if d:
            self.fail("%s: exit 0 but the output differs from onnxruntime on the input: %s (output vs input)" % (label, d))
            return False
        return True

    def gpus(self) -> int:
        if self._gpus is None:
            r = run_process([self.rlflow, "--version"], self.work, self.env, 30)
            m = re.search(r"GPUs: (\d+)", r.out.decode("utf-8", "replace") + r.err)
            self._gpus = int(m.group(1)) if m else 0
        return self._gpus

    # -- a small real rollout file (cases 12, 14, 18)
    WM_YAML = "model:\n  lstm_hidden: 8\n  mixtures: 2\ntraining:\n  epochs: 1\n  batch_episodes: 2\n"

    def rollout(self) -> Tuple[Path, List[str], bytes]:
        """(folder, the train-world-model arguments less --out/--data, the rollout file's bytes)."""
        if self._rollout is None:
            d = self.work / "rollout"
            d.mkdir(exist_ok=True)
            save(relu_relu_add(), d / "m.onnx")
            (d / "wm.yaml").write_text(self.WM_YAML)
            base = ["train-world-model", "--model", "m.onnx", "--episodes", "3", "--config", "wm.yaml",
                    "--deterministic", "--seed", "0"]
            r = self.rl(base + ["--out", "wm.pt"], d)
            data = d / "wm.pt.data"
            if r.rc != 0 or not data.exists():
                self._rollout = (d, base, b"", "could not make a rollout file: " + (problem(r, [0]) or "no wm.pt.data"))
            else:
                self._rollout = (d, base, data.read_bytes(), None)
        d, base, data, err = self._rollout
        if err:
            raise CaseError(err)
        return d, base, data

    def train_job(self, name: str, data: bytes) -> Tuple[List[str], Path, dict]:
        """Writes `data` as NAME.data; the train-world-model run that reads it, for rl_many."""
        d, base, _ = self.rollout()
        (d / (name + ".data")).write_bytes(data)
        return base + ["--out", name + ".pt", "--data", name + ".data"], d, {}

    def train_on(self, name: str, data: bytes) -> Result:
        args, d, kw = self.train_job(name, data)
        return self.rl(args, d, **kw)

    def control_rollout(self) -> bool:
        """The unpatched rollout file is accepted (exit 0) and reused as it is (not rewritten)."""
        d, base, data = self.rollout()
        r = self.train_on("control", data)
        if r.rc != 0:
            self.fail("control: the unpatched rollout file was not accepted: " + (problem(r, [0]) or ""))
            return False
        if (d / "control.data").read_bytes() != data:
            self.note("control run rewrote the rollout file (episodes topped up?)")
        return True


class CaseError(Exception):
    pass


def patch_header(data: bytes, **changes) -> bytes:
    nl = data.index(b"\n")
    h = json.loads(data[:nl])
    h.update(changes)
    return json.dumps(h, separators=(",", ":")).encode() + data[nl:]


# ----------------------------------------------------------------------------------------------
# The cases

def case01(p: Probe):
    """Cost cache path naming a non-cache file is never overwritten."""
    d = p.casedir(1)
    m = save(relu_relu_add(), d / "m.onnx")
    # Control: a cache path naming no file gets a cache written (so the cache is really written).
    r = p.rl(["cost", "m.onnx", "--cost-model", "cpu", "--cache", "real-cache.json"], d)
    if p.check("control (cost --cache new file)", r, [0]) and not (d / "real-cache.json").exists():
        p.fail("control: `cost --cache real-cache.json` wrote no cache, so the check below proves nothing")
    before = sha(m)
    r = p.rl(["optimise", "m.onnx", "-o", "o.onnx", "--cost-model", "cpu", "--search", "greedy", "--measure", "off"], d,
             env={"RLFLOW_COST_CACHE": str(d / "m.onnx")})
    p.check("RLFLOW_COST_CACHE=m.onnx optimise", r, [0, 2])
    if sha(m) != before:
        p.fail("RLFLOW_COST_CACHE=$PWD/m.onnx: m.onnx was overwritten")
    for name, text in [("notes.txt", "my notes, not a cache\n"), ("other.json", '{"format": "something-else", "a": 1}\n')]:
        f = d / name
        f.write_text(text)
        r = p.rl(["cost", "m.onnx", "--cost-model", "cpu", "--cache", name], d)
        p.check("cost --cache " + name, r, [0, 2])
        if f.read_text() != text:
            p.fail("cost --cache %s: the file was overwritten" % name)


def case02(p: Probe):
    """Outputs with external data: the old pair survives a failure or SIGTERM, or the complete new one replaces it."""
    d = p.casedir(2)
    rng = np.random.default_rng(2)
    # A: the input, with external data.
    x = vi("x", TP.FLOAT, [2, 3])
    y = vi("y", TP.FLOAT, [2, 3])
    w = nh.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w")
    a = make_model([oh.make_node("Relu", ["x"], ["r1"]), oh.make_node("Relu", ["r1"], ["r2"]),
                    oh.make_node("Add", ["r2", "w"], ["y"])], [x], [y], [w])
    onnx.save_model(a, str(d / "a.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="a.onnx.data", size_threshold=0)
    # B: a different model already at out.onnx + out.onnx.data.
    w2 = nh.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w2")
    b = make_model([oh.make_node("Mul", ["x", "w2"], ["m"]), oh.make_node("Sigmoid", ["m"], ["y"])], [x], [y], [w2])
    onnx.save_model(b, str(d / "out.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="out.onnx.data", size_threshold=0)
    old = {n: (d / n).read_bytes() for n in ("out.onnx", "out.onnx.data")}
    in_hash = (sha(d / "a.onnx"), sha(d / "a.onnx.data"))
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32)}
    ref_a, why = p.ort(d / "a.onnx", feeds)
    ref_b, why_b = p.ort(d / "out.onnx", feeds)
    if ref_a is None or ref_b is None or same(ref_a, ref_b) is None:
        raise CaseError("setup: models A and B do not run or do not differ (%s %s)" % (why, why_b))

    def restore():
        for n, data in old.items():
            (d / n).write_bytes(data)

    def leftovers() -> List[str]:
        known = {"a.onnx", "a.onnx.data", "out.onnx", "out.onnx.data", "bad-rules.json"}
        return sorted(n for n in os.listdir(d) if n not in known)

    verdicts: Dict[Tuple[Optional[str], Optional[str]], str] = {}

    def state() -> str:
        """'old' (the old pair, byte for byte), 'new' (out.onnx runs and matches A) or a reason."""
        if all((d / n).exists() and (d / n).read_bytes() == data for n, data in old.items()):
            return "old"
        key = (sha(d / "out.onnx"), sha(d / "out.onnx.data"))
        if key not in verdicts:  # onnxruntime once per distinct pair
            got, why = p.ort(d / "out.onnx", feeds)
            if got is None:
                verdicts[key] = "neither the old pair nor a new model that runs (%s)" % why
            else:
                diff = same(got, ref_a)
                verdicts[key] = "new" if diff is None else "neither the old pair nor a new model that matches the input (%s)" % diff
        return verdicts[key]

    # (a) A forced verification failure: an unsound rule marked proved (Relu(Relu(x)) -> Sigmoid(x)).
    bad_rule = {"default": True, "description": "unsound on purpose", "instances": [{"shapes": {"x": [2, 3]}}],
                "name": "probe_unsound", "outputs": {"r2": "r"}, "proof": {"outcome": "proved"},
                "provenance": "hand-written", "status": "proved",
                "source": [{"id": "r1", "inputs": ["x"], "op": "Relu"}, {"id": "r2", "inputs": ["r1"], "op": "Relu"}],
                "target": [{"id": "r", "inputs": ["x"], "op": "Sigmoid"}]}
    (d / "bad-rules.json").write_text(json.dumps({"format": "rlflow-rules", "version": 1, "rules": [bad_rule]}))
    r = p.rl(["optimise", "a.onnx", "-o", "out.onnx", "--search", "greedy", "--rules", "bad-rules.json", "--measure", "off"], d)
    # Since 2026-12-02 (issue 57 item 2) a rewrite that fails verification gives way to the input,
    # written as it is (exit 0): the old pair must be replaced whole by a model that matches A.
    if p.check("forced verification failure (--rules with an unsound rule)", r, [0]):
        s = state()
        if s != "new":
            p.fail("after the verification failure: " + s)
        elif "every rewritten candidate failed verification" not in r.err:
            p.fail("after the verification failure: no line says the input was written because verification failed")
    if leftovers():
        p.fail("after the verification failure, files left: %s" % leftovers())
    restore()
    # (b) Success: the new model replaces the old pair and matches the input. Measuring on, so that
    # a run lasts long enough (about a second) for the SIGTERMs below to land in it.
    run = ["optimise", "a.onnx", "-o", "out.onnx", "--search", "greedy", "--measure", "on", "--bench-rounds", "10"]
    r = p.rl(run, d)
    full = r.secs
    if p.check("optimise a.onnx -o out.onnx", r, [0]):
        s = state()
        if s != "new":
            p.fail("after a successful run: " + ("the old pair is still there" if s == "old" else s))
    if leftovers():
        p.fail("after a successful run, files left: %s" % leftovers())
    # (c) SIGTERM at fixed shares of that run's time, the last ones around the write at its end.
    seen = {"old": 0, "new": 0}
    for share in (0.1, 0.35, 0.6, 0.8, 0.9, 0.95, 1.0, 1.05):
        delay = share * full
        restore()
        r = p.rl(run, d, term_after=delay)
        if r.timed_out or (r.rc < 0 and r.rc != -signal.SIGTERM) or r.rc == 5:
            p.fail("SIGTERM at %.2fs: %s" % (delay, problem(r, [0])))
        s = state()
        if s in seen:
            seen[s] += 1
        else:
            p.fail("SIGTERM at %.2fs (%s): %s" % (delay, "exit %d" % r.rc if r.rc >= 0 else "killed", s))
        if leftovers():
            p.fail("SIGTERM at %.2fs: files left: %s" % (delay, leftovers()))
    p.note("SIGTERM at 0.1-1.05 x %.2fs: old pair kept %d, new model %d" % (full, seen["old"], seen["new"]))
    if (sha(d / "a.onnx"), sha(d / "a.onnx.data")) != in_hash:
        p.fail("the input a.onnx / a.onnx.data changed")


def case03(p: Probe):
    """-o onto a symlink is refused (exit 2) and the link is unchanged."""
    d = p.casedir(3)
    save(relu_relu_add(), d / "m.onnx")
    victim = d / "victim.bin"
    victim.write_bytes(b"not yours to replace\n")
    os.symlink("victim.bin", d / "link.onnx")
    os.symlink("nothere.onnx", d / "dangling.onnx")
    for link, target in (("link.onnx", "victim.bin"), ("dangling.onnx", "nothere.onnx")):
        r = p.rl(["optimise", "m.onnx", "-o", link, "--search", "none", "--measure", "off"], d)
        p.check("-o " + link, r, [2], quick=QUICK_S)
        if not (d / link).is_symlink() or os.readlink(d / link) != target:
            p.fail("-o %s: the link was replaced" % link)
    if victim.read_bytes() != b"not yours to replace\n":
        p.fail("-o link.onnx: the link's target was overwritten")
    if (d / "nothere.onnx").exists():
        p.fail("-o dangling.onnx: the link's target was created")


def case04(p: Probe):
    """External-data location that is a symlink to /etc/passwd is refused; nothing is written."""
    d = p.casedir(4)
    if not os.path.isfile("/etc/passwd"):
        raise CaseError("no /etc/passwd on this machine")
    secret = Path("/etc/passwd").read_bytes()[:24]
    x, y = vi("x", TP.FLOAT, [2, 3]), vi("y", TP.FLOAT, [2, 3])
    for sub, real in (("good", True), ("evil", False)):
        w = external_tensor("w", TP.FLOAT, [2, 3], "w.bin", 0, 24)
        save(make_model([oh.make_node("Add", ["x", "w"], ["y"])], [x], [y], [w]), d / sub / "m.onnx")
        if real:
            (d / sub / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
        else:
            os.symlink("/etc/passwd", d / sub / "w.bin")
    r = p.rl(["optimise", "good/m.onnx", "-o", "good-out.onnx", "--search", "none", "--measure", "off"], d)
    p.check("control: the same model with a real w.bin", r, [0])
    r = p.rl(["optimise", "evil/m.onnx", "-o", "evil-out.onnx", "--search", "none", "--measure", "off"], d)
    p.check("optimise, w.bin -> /etc/passwd", r, [2, 3], quick=QUICK_S)
    if (d / "evil-out.onnx").exists():
        p.fail("evil-out.onnx was written")
    r = p.rl(["info", "evil/m.onnx"], d)
    p.check("info, w.bin -> /etc/passwd", r, [2, 3], quick=QUICK_S)
    for f in d.rglob("*"):
        if f.is_file() and not f.is_symlink() and secret in f.read_bytes():
            p.fail("%s holds /etc/passwd's bytes" % f.relative_to(d))


def case05(p: Probe):
    """A model-local function: exit 0 with an output onnxruntime loads and that matches, or exit 3."""
    d = p.casedir(5)
    f = oh.make_function("local.fn", "ReluPlus", ["a"], ["b"],
                         [oh.make_node("Relu", ["a"], ["t"]), oh.make_node("Add", ["t", "a"], ["b"])],
                         opset_imports=[oh.make_opsetid("", 17)])
    nodes = [oh.make_node("ReluPlus", ["x"], ["h"], domain="local.fn"), oh.make_node("Mul", ["h", "x"], ["y"])]
    m = make_model(nodes, [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])],
                   extra_opsets=[oh.make_opsetid("local.fn", 1)], functions=[f])
    save(m, d / "m.onnx")
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)}
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--search", "greedy", "--measure", "off"], d)
    if p.check("optimise (model-local function)", r, [0, 3]) and r.rc == 0:
        p.matches_input("optimise", d / "m.onnx", d / "out.onnx", feeds)
    elif r.rc == 3:
        p.note("refused with exit 3")


def case06(p: Probe):
    """A BOOL initializer holding raw byte 7, cast to float: the output equals onnxruntime's."""
    d = p.casedir(6)
    b = oh.make_tensor("b", TP.BOOL, [3], vals=b"\x07\x00\x01", raw=True)
    nodes = [oh.make_node("Cast", ["b"], ["bf"], to=TP.FLOAT), oh.make_node("Add", ["bf", "x"], ["y"])]
    save(make_model(nodes, [vi("x", TP.FLOAT, [3])], [vi("y", TP.FLOAT, [3])], [b]), d / "m.onnx")
    feeds = {"x": np.array([0.25, -1.5, 2.0], np.float32)}
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--search", "greedy", "--measure", "off"], d)
    if p.check("optimise", r, [0]):
        p.matches_input("optimise", d / "m.onnx", d / "out.onnx", feeds)


def case07(p: Probe):
    """Constant folding with NaN, inf and empty tensors: the output equals onnxruntime's, or exit 3."""
    d = p.casedir(7)
    nan, inf = float("nan"), float("inf")
    xf = vi("x", TP.FLOAT, [4])
    yf = vi("y", TP.FLOAT, [4])
    c1 = nh.from_array(np.array([nan, 1.0, -1.0, nan], np.float32), "c1")
    c2 = nh.from_array(np.array([0.0, nan, 2.0, nan], np.float32), "c2")
    feeds_f = {"x": np.array([0.5, -1.5, 2.0, 3.0], np.float32)}
    subs = []
    for op in ("Max", "Min"):
        subs.append(("%s_nan" % op.lower(), make_model(
            [oh.make_node(op, ["c1", "c2"], ["k"]), oh.make_node("Add", ["k", "x"], ["y"])], [xf], [yf], [c1, c2]), feeds_f))
    cs = nh.from_array(np.array([nan, -2.0, 0.0, 3.0], np.float32), "cs")
    subs.append(("sign_nan", make_model(
        [oh.make_node("Sign", ["cs"], ["k"]), oh.make_node("Add", ["k", "x"], ["y"])], [xf], [yf], [cs]), feeds_f))
    ce = nh.from_array(np.zeros((0,), np.float32), "ce")
    subs.append(("reducemax_empty", make_model(
        [oh.make_node("ReduceMax", ["ce"], ["k"], keepdims=0), oh.make_node("Add", ["k", "x"], ["y"])],
        [xf], [yf], [ce], opset=18), feeds_f))
    ci = nh.from_array(np.array([inf, -inf, 1e10, 7.0], np.float32), "ci")
    subs.append(("cast_inf_int32", make_model(
        [oh.make_node("Cast", ["ci"], ["k"], to=TP.INT32), oh.make_node("Add", ["k", "x"], ["y"])],
        [vi("x", TP.INT32, [4])], [vi("y", TP.INT32, [4])], [ci]), {"x": np.array([1, 2, 3, 4], np.int32)}))
    results = []
    for name, m, feeds in subs:
        save(m, d / (name + ".onnx"))
        ref, why = p.ort(d / (name + ".onnx"), feeds)
        r = p.rl(["optimise", name + ".onnx", "-o", name + ".out.onnx", "--search", "greedy", "--measure", "off"], d)
        bad = problem(r, [0, 3])
        if bad:
            p.fail("%s: %s" % (name, bad))
            results.append(name + " FAIL")
            continue
        if r.rc == 3:
            results.append(name + " refused(3)")
            continue
        got, gwhy = p.ort(d / (name + ".out.onnx"), feeds)
        if got is None:
            p.fail("%s: exit 0 but the output does not run in onnxruntime (%s)" % (name, gwhy))
        elif ref is None:
            p.fail("%s: exit 0 (output %s) but onnxruntime refuses the input (%s)" % (name, fmt(got[0]), why))
        else:
            diff = same(got, ref)
            if diff:
                p.fail("%s: exit 0 but rlflow's output %s, onnxruntime on the input %s" % (name, fmt(got[0]), fmt(ref[0])))
            else:
                results.append(name + " ok")
                continue
        results.append(name + " FAIL")
    p.note(", ".join(results))


def case08(p: Probe):
    """Opset 25 or 99 in the default domain: exit 3. IR version 99 with nothing the linked onnx does not
    know: read as the newest IR it knows (exit 0, the output at that IR and equal to the input); with
    a field it does not know (an unknown field number on the model): exit 3."""
    d = p.casedir(8)
    for name, opset, ir, extra in (("opset25", 25, None, b""), ("opset99", 99, None, b""), ("ir99", 17, 99, b""),
                                   ("ir99field", 17, 99, b"\xa0\x1f\x01")):
        m = relu_relu_add()
        m.opset_import[0].version = opset
        if ir:
            m.ir_version = ir
        path = d / (name + ".onnx")
        if extra:
            path.write_bytes(m.SerializeToString() + extra)  # field 500, a varint: unknown to every onnx
        else:
            save(m, path)
        ok = [0] if name == "ir99" else [3]
        r = p.rl(["optimise", name + ".onnx", "-o", name + ".out.onnx", "--search", "none", "--measure", "off"], d)
        if p.check("optimise " + name, r, ok) and name == "ir99":
            out = onnx.load(str(d / "ir99.out.onnx"))
            if out.ir_version >= 99 or out.ir_version < 10:
                p.fail("ir99: the output has IR version %d" % out.ir_version)
            ref = relu_relu_add()  # the same model at an IR version onnxruntime reads
            save(ref, d / "ir99.ref.onnx")
            feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 3}
            p.matches_input("ir99", d / "ir99.ref.onnx", d / "ir99.out.onnx", feeds)
        r = p.rl(["info", name + ".onnx"], d)
        p.check("info " + name, r, ok)


def case09(p: Probe):
    """--input-shape overriding a static dim: refused (2/3), or the output keeps the declared shape."""
    d = p.casedir(9)
    save(relu_relu_add((2, 3)), d / "m.onnx")
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--input-shape", "x:4,3", "--search", "greedy", "--measure", "off"], d)
    if p.check("optimise --input-shape x:4,3 on x[2,3]", r, [0, 2, 3]) and r.rc == 0:
        try:
            m = onnx.load(str(d / "out.onnx"))
        except Exception as e:
            p.fail("exit 0 but out.onnx is not an ONNX model (%s)" % str(e)[:120])
            return
        dims = lambda v: [x.dim_value if x.HasField("dim_value") else x.dim_param for x in v.type.tensor_type.shape.dim]
        xin = [dims(i) for i in m.graph.input if i.name == "x"]
        yout = [dims(o) for o in m.graph.output]
        if xin != [[2, 3]] or yout != [[2, 3]]:
            p.fail("exit 0 and the output declares x %s, y %s (declared [2, 3])" % (xin, yout))
    else:
        p.note("refused with exit %d" % r.rc)


def range_model(limit: float) -> onnx.ModelProto:
    """y = x + ReduceSum(Range(0, limit, 1)) with float constants."""
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in (("start", 0.0), ("limit", limit), ("delta", 1.0))]
    nodes = [oh.make_node("Range", ["start", "limit", "delta"], ["r"]),
             oh.make_node("ReduceSum", ["r"], ["s"], keepdims=0), oh.make_node("Add", ["x", "s"], ["y"])]
    return make_model(nodes, [vi("x", TP.FLOAT, [1])], [vi("y", TP.FLOAT, [1])], inits)


AS_LIMIT = 8 << 30  # a safety net for the memory cases: no run may map more than 8 GiB


def case10(p: Probe):
    """Range(0, 1e30, 1): exit 3, not an empty tensor with exit 0."""
    d = p.casedir(10)
    save(range_model(1e30), d / "m.onnx")
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--search", "greedy", "--measure", "off"], d, as_limit=AS_LIMIT)
    p.check("optimise Range(0, 1e30, 1)", r, [3], quick=30)
    if (d / "out.onnx").exists():
        p.fail("out.onnx was written")


def case11(p: Probe):
    """Div and Mod of INT64_MIN by -1: no SIGFPE in optimise and info; exit 0 matching onnxruntime, or exit 3."""
    d = p.casedir(11)
    imin = np.iinfo(np.int64).min
    feeds = {"x": np.array([5, -3], np.int64)}
    for op, attrs, wrap in (("Div", {}, imin), ("Mod", {"fmod": 0}, 0)):
        a = nh.from_array(np.array([imin, imin], np.int64), "a")
        b = nh.from_array(np.array([-1, -1], np.int64), "b")
        nodes = [oh.make_node(op, ["a", "b"], ["q"], **attrs), oh.make_node("Add", ["q", "x"], ["y"])]
        save(make_model(nodes, [vi("x", TP.INT64, [2])], [vi("y", TP.INT64, [2])], [a, b]), d / (op + ".onnx"))
        r = p.rl(["info", op + ".onnx"], d)
        p.check("info " + op, r, [0, 3])
        r = p.rl(["optimise", op + ".onnx", "-o", op + ".out.onnx", "--search", "greedy", "--measure", "off"], d)
        if not p.check("optimise " + op, r, [0, 3]) or r.rc == 3:
            if r.rc == 3:
                p.note("%s: refused with exit 3" % op)
            continue
        got, gwhy = p.ort(d / (op + ".out.onnx"), feeds)
        if got is None:
            p.fail("%s: exit 0 but the output does not run in onnxruntime (%s)" % (op, gwhy))
            continue
        ref, why = p.ort(d / (op + ".onnx"), feeds)
        if ref is not None:
            diff = same(got, ref)
            if diff:
                p.fail("%s: exit 0 but output %s, onnxruntime on the input %s" % (op, fmt(got[0]), fmt(ref[0])))
            else:
                p.note("%s: exit 0, matches onnxruntime" % op)
        else:
            # onnxruntime cannot be the reference (it traps on the input itself): report the value.
            expect = (np.array([wrap, wrap], np.int64) + feeds["x"])
            p.note("%s: exit 0, output %s (%s; two's-complement wraparound gives %s)"
                   % (op, fmt(got[0]), why, fmt(expect)))


def case12(p: Probe):
    """A rollout file whose header says num_xfers 2^61: train-world-model exits 3, no crash."""
    d, base, data = p.rollout()
    p.control_rollout()
    r = p.train_on("numx", patch_header(data, num_xfers=2 ** 61))
    p.check("train-world-model --data (num_xfers 2^61)", r, [3], quick=30)


def case13(p: Probe):
    """A FIFO as the model, an external-data location, --agent and --rules: exit 3 (an input rlflow cannot read) quickly."""
    d = p.casedir(13)
    save(relu_relu_add(), d / "m.onnx")
    os.mkfifo(d / "ff")
    (d / "e").mkdir()
    w = external_tensor("w", TP.FLOAT, [2, 3], "w.fifo", 0, 24)
    save(make_model([oh.make_node("Add", ["x", "w"], ["y"])], [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])], [w]),
         d / "e" / "m.onnx")
    os.mkfifo(d / "e" / "w.fifo")
    runs = [("model (info)", ["info", "ff"]),
            ("model (optimise)", ["optimise", "ff", "-o", "o1.onnx", "--search", "none", "--measure", "off"]),
            ("external data (info)", ["info", "e/m.onnx"]),
            ("external data (optimise)", ["optimise", "e/m.onnx", "-o", "o2.onnx", "--search", "none", "--measure", "off"]),
            ("--agent", ["optimise", "m.onnx", "-o", "o3.onnx", "--search", "rl", "--agent", "ff", "--measure", "off"]),
            ("--rules", ["optimise", "m.onnx", "-o", "o4.onnx", "--rules", "ff", "--measure", "off"])]
    results = p.rl_many([(args, d, {"timeout": QUICK_S + 5}) for _, args in runs])
    for (label, _), r in zip(runs, results):
        p.check("FIFO as " + label, r, [3], quick=QUICK_S)


def case14(p: Probe):
    """Rollout files with one byte flipped (20 positions): train-world-model exits 3 on each."""
    d, base, data = p.rollout()
    if not p.control_rollout():
        return
    # One position in each twentieth of the file (the JSON header is most of a small file's first half).
    rnd = random.Random(14)
    positions = [rnd.randrange(i * len(data) // 20, (i + 1) * len(data) // 20) for i in range(20)]
    nl = data.index(b"\n")
    refused, accepted, other = [], [], []
    jobs = []
    for i, pos in enumerate(positions):
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        jobs.append(p.train_job("flip%02d" % i, bytes(flipped)))
    for pos, r in zip(positions, p.rl_many(jobs)):
        where = "%d(%s)" % (pos, "header" if pos <= nl else "body")
        bad = problem(r, [3])
        if bad is None:
            refused.append(where)
        elif r.rc == 0:
            accepted.append(where)
        else:
            other.append("%s: %s" % (where, bad))
    p.note("%d/20 refused with exit 3 (file %d bytes, header %d)" % (len(refused), len(data), nl + 1))
    if len(refused) < 20:
        p.fail("%d/20 refused" % len(refused))
    if accepted:
        p.fail("%d/20 flipped files accepted with exit 0 (byte %s)" % (len(accepted), ", ".join(accepted)))
    for o in other:
        p.fail("flip at " + o)


def case15(p: Probe):
    """External data declaring 1.5e9 floats with a 64-byte file: info and optimise exit 3 quickly, bounded memory."""
    d = p.casedir(15)
    w = external_tensor("w", TP.FLOAT, [1_500_000_000], "w.bin", 0)
    idx = nh.from_array(np.array([0], np.int64), "idx")
    nodes = [oh.make_node("Gather", ["w", "idx"], ["g"]), oh.make_node("Add", ["x", "g"], ["y"])]
    save(make_model(nodes, [vi("x", TP.FLOAT, [1])], [vi("y", TP.FLOAT, [1])], [w, idx]), d / "m.onnx")
    (d / "w.bin").write_bytes(bytes(range(64)))
    r = p.rl(["info", "m.onnx"], d, timeout=30, as_limit=AS_LIMIT)
    p.check("info", r, [3], quick=QUICK_S, max_rss_mb=1024)
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--memory-limit", "1000", "--search", "none", "--measure", "off"], d,
             timeout=30, as_limit=AS_LIMIT)
    p.check("optimise --memory-limit 1000", r, [3], quick=QUICK_S, max_rss_mb=1024)


def case16(p: Probe):
    """/dev/zero as every file flag: exit 3 quickly with bounded memory (a cost cache: kept in memory, exit 0)."""
    d = p.casedir(16)
    save(relu_relu_add(), d / "m.onnx")
    z = "/dev/zero"
    runs = [
        ["optimise", "m.onnx", "-o", "o1.onnx", "--search", "rl", "--agent", z, "--measure", "off"],
        ["optimise", "m.onnx", "-o", "o2.onnx", "--rules", z, "--measure", "off"],
        ["optimise", "m.onnx", "-o", "o3.onnx", "--cost-model", "recorded", "--cost-table", z, "--measure", "off"],
        ["optimise", "m.onnx", "-o", "o4.onnx", "--cost-model", "analytic", "--device-profile", z, "--measure", "off"],
        ["cost", "m.onnx", "--cost-model", "cpu", "--cache", z],
        ["cost", "m.onnx", "--cost-model", "recorded", "--cost-table", z],
        ["cost", "m.onnx", "--cost-model", "analytic", "--device-profile", z],
        ["train-agent", "--model", "m.onnx", "--out", "ag1.pt", "--episodes", "1", "--config", z],
        ["train-agent", "--model", "m.onnx", "--out", "ag2.pt", "--episodes", "1", "--rules", z],
        ["train-world-model", "--model", "m.onnx", "--out", "wm1.pt", "--episodes", "1", "--config", z],
        ["train-world-model", "--model", "m.onnx", "--out", "wm2.pt", "--episodes", "1", "--agent", z],
    ]
    results = p.rl_many([(args, d, {"timeout": QUICK_S + 5, "as_limit": AS_LIMIT}) for args in runs])
    for args, r in zip(runs, results):
        flag = args[args.index(z) - 1]
        p.check("%s %s /dev/zero" % (args[0], flag), r, [0, 3] if flag == "--cache" else [3], quick=QUICK_S, max_rss_mb=1024)


def case17(p: Probe):
    """A ~1 GB Range under --memory-limit 500: exit 3 before allocating."""
    d = p.casedir(17)
    n = 268_435_456.0  # 2^28 floats: 1 GiB
    save(range_model(n), d / "m.onnx")
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--memory-limit", "500", "--search", "none", "--measure", "off"], d,
             timeout=60, as_limit=AS_LIMIT)
    p.check("optimise --memory-limit 500 (Range of 2^28 floats)", r, [3], max_rss_mb=800)
    if (d / "out.onnx").exists():
        p.fail("out.onnx was written")


def nonutf8_model(d: Path) -> Path:
    """x[N, 3] where the dim's name is the bytes ff fe (set below protobuf's UTF-8 check)."""
    # onnx.helper refuses a str that is not UTF-8, so the model is written with a two-byte name that
    # occurs nowhere else, and those two bytes are swapped for ff fe in the serialised file.
    two_byte_name = "QZ"
    nodes = [oh.make_node("Relu", ["x"], ["y"])]
    m = make_model(nodes, [vi("x", TP.FLOAT, [two_byte_name, 3])], [vi("y", TP.FLOAT, [two_byte_name, 3])])
    raw = m.SerializeToString()
    tag = b"\x12\x02" + two_byte_name.encode()  # Dimension.dim_param (field 2), length 2
    if raw.count(tag) != 2:
        raise CaseError("setup: cannot place the non-UTF-8 dim name")
    raw = raw.replace(tag, b"\x12\x02\xff\xfe")
    path = d / "nonutf8.onnx"
    path.write_bytes(raw)
    return path


def case18(p: Probe):
    """Exit codes: ai.onnx domain 0; custom domain without opset 3; int32 Conv 0/3; --target gpu 2/3;
    rollout with a bad z_dim 3; --json with a non-UTF-8 dim name not 5 and parsing."""
    d = p.casedir(18)
    save(relu_relu_add(), d / "m.onnx")
    # ai.onnx spelled out
    m = relu_relu_add()
    m.opset_import[0].domain = "ai.onnx"
    save(m, d / "aionnx.onnx")
    r = p.rl(["optimise", "aionnx.onnx", "-o", "aionnx.out.onnx", "--search", "none", "--measure", "off"], d)
    p.check("opset_import domain 'ai.onnx'", r, [0])
    # a custom-domain node with no opset import for its domain
    m = make_model([oh.make_node("Foo", ["x"], ["y"], domain="com.example")], [vi("x", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2])])
    save(m, d / "custom.onnx")
    r = p.rl(["optimise", "custom.onnx", "-o", "custom.out.onnx", "--search", "none", "--measure", "off"], d)
    p.check("custom-domain node without its opset import", r, [3])
    # int32 Conv weights
    wt = nh.from_array(np.ones((1, 1, 1, 1), np.int32), "w")
    m = make_model([oh.make_node("Conv", ["x", "w"], ["y"])], [vi("x", TP.INT32, [1, 1, 3, 3])],
                   [vi("y", TP.INT32, [1, 1, 3, 3])], [wt])
    save(m, d / "conv32.onnx")
    r = p.rl(["optimise", "conv32.onnx", "-o", "conv32.out.onnx", "--search", "greedy", "--measure", "off"], d)
    p.check("int32 Conv", r, [0, 3])
    # --target gpu without a GPU
    r = p.rl(["optimise", "m.onnx", "-o", "gpu.out.onnx", "--target", "gpu", "--measure", "off"], d)
    p.check("--target gpu (GPUs here: %d)" % p.gpus(), r, [2, 3] if p.gpus() == 0 else [0, 2, 3])
    # a rollout whose header has a bad z_dim
    try:
        rd, base, data = p.rollout()
        z = json.loads(data[:data.index(b"\n")]).get("z_dim")
        for bad in (5, 0):
            r = p.train_on("zdim%d" % bad, patch_header(data, z_dim=bad))
            p.check("rollout header z_dim %d (was %s)" % (bad, z), r, [3])
    except CaseError as e:
        p.fail(str(e))
    # --json with a non-UTF-8 dim name
    nonutf8_model(d)
    for label, args in (("info --json", ["info", "nonutf8.onnx", "--json"]),
                        ("optimise --json", ["optimise", "nonutf8.onnx", "-o", "nonutf8.out.onnx", "--search", "none",
                                             "--measure", "off", "--json"])):
        r = p.rl(args, d)
        if p.check("non-UTF-8 dim name, " + label, r, [0, 2, 3]) and r.rc == 0:
            try:
                json.loads(r.out.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                p.fail("non-UTF-8 dim name, %s: exit 0 but stdout is not JSON (%s)" % (label, str(e)[:120]))


def case19(p: Probe):
    """Div of two int64 inputs: exit 0 with --verify, output matching onnxruntime on non-zero y."""
    d = p.casedir(19)
    nodes = [oh.make_node("Div", ["x", "y"], ["q"]), oh.make_node("Mul", ["q", "y"], ["m"]), oh.make_node("Sub", ["x", "m"], ["z"])]
    m = make_model(nodes, [vi("x", TP.INT64, [6]), vi("y", TP.INT64, [6])], [vi("q", TP.INT64, [6]), vi("z", TP.INT64, [6])])
    save(m, d / "m.onnx")
    r = p.rl(["optimise", "m.onnx", "-o", "out.onnx", "--verify", "--search", "greedy", "--measure", "off"], d)
    if p.check("optimise --verify (int64 x / int64 y)", r, [0]):
        feeds = {"x": np.array([7, -7, 9, -9, 0, 100], np.int64), "y": np.array([2, 2, -4, 3, 5, -7], np.int64)}
        p.matches_input("optimise", d / "m.onnx", d / "out.onnx", feeds)


def case20(p: Probe):
    """Path problems found up front: a too-long temporary name and -o /proc/x.onnx exit 2 (usage), a pipe as the model 3."""
    d = p.casedir(20)
    save(relu_relu_add(), d / "m.onnx")
    (d / "out").mkdir()
    long_name = "a" * 245 + ".onnx"  # 250 characters: fits NAME_MAX, its temporary name does not

    def one_line(r: Result, label: str):
        lines = [l for l in r.err.splitlines() if l.strip()]
        if r.rc != 0 and len(lines) != 1:
            p.fail("%s: %d lines on stderr, want 1" % (label, len(lines)))

    r = p.rl(["optimise", "m.onnx", "-o", "out/" + long_name, "--search", "none", "--measure", "off"], d, timeout=QUICK_S + 5)
    p.check("-o with a 250-character basename", r, [2], quick=QUICK_S)
    one_line(r, "-o with a 250-character basename")
    if os.listdir(d / "out"):
        p.fail("-o with a 250-character basename: left %s" % [n[:20] + "..." for n in os.listdir(d / "out")])
    existed = os.path.exists("/proc/x.onnx")
    r = p.rl(["optimise", "m.onnx", "-o", "/proc/x.onnx", "--search", "none", "--measure", "off"], d, timeout=QUICK_S + 5)
    p.check("-o /proc/x.onnx", r, [2], quick=QUICK_S)
    one_line(r, "-o /proc/x.onnx")
    if not existed and os.path.exists("/proc/x.onnx"):
        p.fail("-o /proc/x.onnx: the file exists")
    r = p.rl(['exec "$RLFLOW" optimise <(cat m.onnx) -o out/pipe.onnx --search none --measure off'], d,
             timeout=QUICK_S + 5, shell=True)
    p.check("optimise <(cat m.onnx)", r, [3], quick=QUICK_S)
    one_line(r, "optimise <(cat m.onnx)")
    if os.listdir(d / "out"):
        p.fail("optimise <(cat m.onnx): left %s" % os.listdir(d / "out"))


AGENT_YAML = ("network:\n  hidden: 8\n  gnn_rounds: 1\ntraining:\n  episodes_per_update: 1\n  num_envs: 1\n"
              "  imitation_epochs: 0\n  dagger_rounds: 0\nenv:\n  max_steps: 2\n")


def case21(p: Probe):
    """--resume under a different --target: refused with exit 2, the checkpoint unchanged."""
    d = p.casedir(21)
    save(relu_relu_add(), d / "m.onnx")
    (d / "agent.yaml").write_text(AGENT_YAML)
    base = ["train-agent", "--model", "m.onnx", "--out", "ag.pt", "--config", "agent.yaml", "--seed", "0"]
    r = p.rl(base + ["--episodes", "1", "--target", "ort"], d)
    if not p.check("train-agent --target ort (making the checkpoint)", r, [0]) or not (d / "ag.pt").exists():
        return
    before = sha(d / "ag.pt")
    r = p.rl(base + ["--episodes", "2", "--target", "h100", "--resume"], d)
    p.check("train-agent --resume --target h100 (checkpoint of --target ort)", r, [2])
    if sha(d / "ag.pt") != before:
        p.fail("the checkpoint ag.pt changed")


CASES: List[Tuple[int, str, Callable[[Probe], None]]] = [
    (1, "cost cache naming a non-cache file", case01),
    (2, "external-data output: old pair or complete new one", case02),
    (3, "-o onto a symlink", case03),
    (4, "external data symlinked to /etc/passwd", case04),
    (5, "model-local function", case05),
    (6, "BOOL initializer holding byte 7", case06),
    (7, "constant folding with NaN/inf/empty", case07),
    (8, "opset 25/99, IR version 99 (with and without an unknown field)", case08),
    (9, "--input-shape overriding a static dim", case09),
    (10, "Range(0, 1e30, 1)", case10),
    (11, "INT64_MIN Div/Mod -1", case11),
    (12, "rollout header num_xfers 2^61", case12),
    (13, "FIFO as model/external data/--agent/--rules", case13),
    (14, "rollout files with a flipped byte", case14),
    (15, "external data declaring 1.5e9 floats", case15),
    (16, "/dev/zero as every file flag", case16),
    (17, "Range memory estimate vs --memory-limit", case17),
    (18, "exit codes (ai.onnx, custom domain, int32 Conv, gpu, z_dim, non-UTF-8)", case18),
    (19, "Div of two int64 inputs with --verify", case19),
    (20, "path problems found up front", case20),
    (21, "--resume under a different --target", case21),
]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rlflow", default=os.environ.get("RLFLOW_BIN") or str(ROOT / "build" / "rlflow"),
                    help="the rlflow binary (default: $RLFLOW_BIN, else build/rlflow)")
    ap.add_argument("--json", metavar="FILE", help="also write the results and details as JSON to FILE")
    ap.add_argument("--only", metavar="N[,N...]", help="run only these cases (the summary counts them)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (created; kept) instead of a removed temporary folder")
    a = ap.parse_args(argv)
    rlflow = os.path.abspath(a.rlflow)
    if not (os.path.isfile(rlflow) and os.access(rlflow, os.X_OK)):
        print("probe_hostile: no rlflow binary at %s (build it, or pass --rlflow)" % rlflow, file=sys.stderr)
        return 2
    only = None
    if a.only:
        try:
            only = {int(s) for s in a.only.split(",")}
        except ValueError:
            print("probe_hostile: --only takes case numbers, e.g. 7,14", file=sys.stderr)
            return 2
    cases = [c for c in CASES if only is None or c[0] in only]

    t_all = time.monotonic()
    if a.keep:
        Path(a.keep).mkdir(parents=True, exist_ok=True)
        tmp_ctx = None
        work = Path(tempfile.mkdtemp(prefix="rlflow-probe.", dir=a.keep)).resolve()
    else:
        tmp_ctx = tempfile.TemporaryDirectory(prefix="rlflow-probe.")
        work = Path(tmp_ctx.name).resolve()
    probe = Probe(rlflow, work)
    records = []
    try:
        for n, title, fn in cases:
            probe.details, probe.fails, probe.notes = [], [], []
            t0 = time.monotonic()
            try:
                fn(probe)
            except CaseError as e:
                probe.fail(str(e))
            except Exception as e:  # a bug in the probe, or a file rlflow left that breaks it: not held
                probe.fail("probe error: %s: %s" % (type(e).__name__, e))
            held = not probe.fails
            secs = time.monotonic() - t0
            reason = "; ".join(probe.fails)
            line = "%2d. %-68s %s" % (n, title[:68], "held" if held else "FAILED (%s)" % (reason if len(reason) <= 240 else reason[:237] + "..."))
            if probe.notes and held:
                line += "  [" + "; ".join(probe.notes) + "]"
            print(line, flush=True)
            if not held:
                print("---- case %d: %s\n%s%s%s\n" % (n, title, "".join("  failed: %s\n" % x for x in probe.fails),
                                                     "".join("  note: %s\n" % x for x in probe.notes),
                                                     "\n".join(probe.details)), file=sys.stderr, flush=True)
            records.append({"case": n, "title": title, "held": held, "failures": list(probe.fails),
                            "notes": list(probe.notes), "seconds": round(secs, 2), "commands": list(probe.details)})
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    held_n = sum(r["held"] for r in records)
    total_s = time.monotonic() - t_all
    print("%d/%d held (%.0fs)" % (held_n, len(records), total_s))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rlflow": rlflow, "held": held_n, "total": len(records), "seconds": round(total_s, 1),
                       "cases": records}, f, indent=1)
            f.write("\n")
    return 0 if held_n == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
