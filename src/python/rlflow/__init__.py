"""rlflow from Python: optimise an ONNX model into a faster equivalent one, price it, measure it.

    import rlflow
    result = rlflow.optimise("model.onnx", target="ort")
    onnx.save(result.model, "model.opt.onnx")

The functions run rlflow's C++ library in this process (the native module rlflow._rlflow). Their
keyword options are the command line's flags: ``budget=500`` is ``--budget 500``, ``deterministic=True``
is ``--deterministic``, ``verify=False`` is ``--no-verify``, ``input_shape={"x": (1, 3, 224, 224)}``
is ``--input-shape x:1,3,224,224``, ``fix={"batch": 1}`` is ``--fix batch=1``. The same flags give the
same file: ``rlflow.optimise(m, deterministic=True)`` writes the bytes ``rlflow optimise m
--deterministic`` writes. Errors raise UsageError (exit code 2), UnsupportedModel (3),
VerificationFailed (4) or InternalError (5), all of them RlflowError.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import onnx

from . import _rlflow

__all__ = [
    "optimise", "optimize", "cost", "bench", "compare", "targets", "Result", "Report",
    "RlflowError", "UsageError", "UnsupportedModel", "VerificationFailed", "InternalError",
]

# The shipped configs (rules, device profiles, cost tables, the onnxruntime runner) installed with the
# package; a build used in place finds them in its source tree instead.
_SHARE = Path(__file__).resolve().parent / "share"
if (_SHARE / "configs").is_dir():
    _rlflow.set_shipped_root(str(_SHARE))
# Measuring on onnxruntime runs a helper script in a Python that has onnxruntime: this one.
os.environ.setdefault("RLFLOW_PYTHON", sys.executable)

ModelLike = Union[str, os.PathLike, onnx.ModelProto]

# A ModelProto at least this large cannot be serialised whole (protobuf's 2 GB limit, with room for the
# graph): its weights are staged in a .data file beside it.
_PROTO_LIMIT = 2000 << 20


class RlflowError(Exception):
    """An rlflow command failed; ``exit_code`` is the command line's exit code for it."""

    exit_code = 5

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UsageError(RlflowError, ValueError):
    """Options that rlflow does not take (exit code 2)."""

    exit_code = 2


class UnsupportedModel(RlflowError):
    """A model rlflow cannot read or serve: malformed, unsupported, too large (exit code 3)."""

    exit_code = 3


class VerificationFailed(RlflowError):
    """Every rewritten graph differed from the input in onnxruntime-independent verification; nothing was written (exit code 4)."""

    exit_code = 4


class InternalError(RlflowError):
    """A fault of rlflow's own (exit code 5)."""

    exit_code = 5


_ERRORS = {2: UsageError, 3: UnsupportedModel, 4: VerificationFailed, 5: InternalError}


def _raise(code: int, message: str) -> None:
    raise _ERRORS.get(code, InternalError)(message)


class Report(dict):
    """The report of a command: the fields its ``--json`` document has (``report["cost"]["speedup"]``,
    or ``report.cost``). ``to_html()`` renders optimise's report as the page ``--report`` writes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_html(self, path: Union[str, os.PathLike, None] = None) -> str:
        """The self-contained HTML report (no network); written to ``path`` too when given."""
        html = _rlflow.report_html(json.dumps(self))
        if path is not None:
            Path(path).write_text(html, encoding="utf-8")
        return html


class Result:
    """What ``optimise`` returns: the optimised model and the report.

    ``model`` is an ``onnx.ModelProto`` (its external data loaded); ``path`` is the file written when
    ``output`` was given, else None; ``report`` carries the fields of ``rlflow optimise --json``.
    """

    def __init__(self, model: onnx.ModelProto, report: Report, path: Optional[str]):
        self.model = model
        self.report = report
        self.path = path

    @property
    def speedup(self) -> float:
        """The measured speedup when the output was measured, else the predicted one (see ``report``)."""
        m = self.report.get("measured")
        if m:
            return float(m["speedup"])
        c = self.report.get("cost")
        return float(c["speedup"]) if c else 1.0

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the model (weights over 1.8 GB go to a ``.data`` file beside it)."""
        large = self.model.ByteSize() > (1800 << 20)
        onnx.save_model(self.model, os.fspath(path), save_as_external_data=large, all_tensors_to_one_file=True,
                        location=Path(path).name + ".data" if large else None)

    def __repr__(self) -> str:
        return f"Result(speedup={self.speedup:.3f}, path={self.path!r})"


def _flag_args(options: Mapping[str, Any]) -> list:
    """Keyword options -> command-line flags, one rule for all (see the module's doc)."""
    negatable = {"verify", "composites"}
    args = []
    for key, value in options.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False:
            if key in negatable:
                args.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, Mapping):
            for name, v in value.items():
                if key == "input_shape":
                    v = ",".join(str(int(d)) for d in v)
                    args += [flag, f"{name}:{v}"]
                else:
                    args += [flag, f"{name}={v}"]
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


def _log_args(verbose: int, quiet: bool) -> list:
    return (["-q"] if quiet else []) + ["-v"] * int(verbose)


class _Staged:
    """Model files rlflow reads: a path as it is, a ModelProto written once to a temporary folder
    (its weights to a .data file beside it when the proto is over protobuf's 2 GB)."""

    def __init__(self):
        self._dir: Optional[str] = None

    def path(self, model: ModelLike, name: str) -> str:
        if isinstance(model, onnx.ModelProto):
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="rlflow-")
            path = os.path.join(self._dir, name)
            if model.ByteSize() < _PROTO_LIMIT:
                # One copy between Python and C++: the serialised bytes, straight to the file.
                with open(path, "wb") as f:
                    f.write(model.SerializeToString())
            else:
                # Over protobuf's limit the proto cannot be serialised whole. onnx moves its weights
                # out of the proto into the .data file as it writes them; they are read back after, so
                # the caller's model is left as it was and never held twice.
                from onnx import external_data_helper

                tensors = list(external_data_helper._get_all_tensors(model))
                had_location = [t.HasField("data_location") for t in tensors]
                onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=name + ".data")
                onnx.load_external_data_for_model(model, self._dir)
                for t, had in zip(tensors, had_location):
                    if not had:
                        t.ClearField("data_location")  # as it was: loading back sets it to DEFAULT
            return path
        if not isinstance(model, (str, os.PathLike)):
            raise UsageError(f"a model is an onnx.ModelProto or a path, not {type(model).__name__}")
        path = os.fspath(model)
        if not isinstance(path, str):
            raise UsageError(f"a model path must be text, not {type(path).__name__}")
        return path

    def temp_dir(self) -> str:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="rlflow-")
        return self._dir

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def optimise(model: ModelLike, target: str = "ort", *, output: Union[str, os.PathLike, None] = None,
             progress: Union[bool, Callable[[int, int, float, float], None], None] = None,
             verbose: int = 0, quiet: bool = False, **options: Any) -> Result:
    """Optimises ``model`` (an ``onnx.ModelProto`` or a path; external data is read beside the path)
    for ``target`` (``targets()`` lists them: ort, h100, gpu).

    ``options`` are optimise's flags (``rlflow optimise --help``): search, budget, time_limit,
    deterministic, opset, input_shape, fix, disable_fusion, verify, atol, rtol, measure, seed, ...
    ``output``: also keep the written file there (``Result.path``). ``progress``: the command line's
    status line on stderr (default: when stderr is a terminal and not ``quiet``), False for none, or a
    function called with (graphs expanded, unique graphs, best predicted ms, seconds).
    """
    with _Staged() as staged:
        src = staged.path(model, "model.onnx")
        out = os.fspath(output) if output is not None else os.path.join(staged.temp_dir(), "optimised.onnx")
        args = [src, "-o", out, "--target", target] + _flag_args(options) + _log_args(verbose, quiet)
        # None or True: the command line's progress line, drawn by the library where it belongs (stderr a
        # terminal, not quiet); a function: called instead; False: nothing.
        callback = progress if callable(progress) else None
        code, text, message = _rlflow.optimise(args, callback, progress is not False and callback is None)
        if code != 0:
            _raise(code, message)
        report = Report(json.loads(text))
        if isinstance(model, onnx.ModelProto):
            report["model"] = "<onnx.ModelProto>"  # not the temporary file it was read from
        if output is None:
            report["output"] = None
        result_model = onnx.load(out, load_external_data=True)
        return Result(result_model, report, out if output is not None else None)


optimize = optimise


def _run(args: list) -> Report:
    code, text, usage = _rlflow.run_json(args)
    if usage:
        _raise(code, usage)
    doc = json.loads(text) if text.strip() else {}
    if code != 0:
        _raise(code, doc.get("error", f"rlflow {args[0]} failed with exit code {code}"))
    return Report(doc) if isinstance(doc, dict) else doc


def targets() -> list:
    """The targets ``optimise(target=...)`` takes: each one's runtime, device, cost model, opsets,
    fused ops, runtime fusions and whether it can be measured here (``rlflow targets --json``)."""
    return [Report(t) for t in _run(["targets"])["targets"]]


def _target(name: str) -> Report:
    for t in targets():
        if t["name"] == name:
            return t
    raise UsageError(f"no target named {name!r} (targets: {', '.join(t['name'] for t in targets())})")


def cost(model: ModelLike, target: str = "ort", *, verbose: int = 0, quiet: bool = False, **options: Any) -> Report:
    """The predicted per-op costs and total of ``model`` under the cost model ``target`` is judged by
    (``rlflow cost --json``; ``cost_model=...`` picks another). Every figure is predicted."""
    if "cost_model" not in options:
        options["cost_model"] = _target(target)["cost_model"]
    with _Staged() as staged:
        src = staged.path(model, "model.onnx")
        report = _run(["cost", src] + _flag_args(options) + _log_args(verbose, quiet))
    report["target"] = target
    return report


def bench(models: Sequence[ModelLike], target: str = "ort", *, verbose: int = 0, quiet: bool = False, **options: Any) -> Report:
    """Measures ``models`` end to end on ``target``, interleaved, the first as the baseline: medians,
    speedups and their confidence intervals (``rlflow bench --json``)."""
    if isinstance(models, (str, os.PathLike, onnx.ModelProto)):
        raise UsageError("bench takes a list of models, the first of them the baseline")
    with _Staged() as staged:
        paths = [staged.path(m, f"model{i}.onnx") for i, m in enumerate(models)]
        return _run(["bench"] + paths + ["--target", target] + _flag_args(options) + _log_args(verbose, quiet))


def compare(model: ModelLike, peers: Union[str, Sequence[str], None] = None, *, verbose: int = 0, quiet: bool = False,
            **options: Any) -> Report:
    """The peer tools installed in this Python (onnxslim, onnxsim, onnxoptimizer, ort-fusions,
    ort-transformers, ``script:PATH``) and rlflow each rewrite ``model``; every file is checked against
    it in onnxruntime at every binding of its symbolic dims and the right ones are timed interleaved at
    prefill and at a decode step (``rlflow compare --json``). ``report["tools"]`` holds each tool's
    status (ok, wrong, failed, crashed, timed out, not installed) and timings; ``keep=DIR`` keeps the
    files, ``report=PATH`` writes the HTML page."""
    with _Staged() as staged:
        args = ["compare", staged.path(model, "model.onnx")]
        if peers is not None:
            args += ["--peers", peers if isinstance(peers, str) else ",".join(peers)]
        return _run(args + _flag_args(options) + _log_args(verbose, quiet))


def version() -> str:
    """rlflow's version, its libtorch and the devices it sees."""
    return _rlflow.version()
