"""The Python package against onnxruntime and against the command line (scripts/test runs these with
pytest after `pip install .`). RLFLOW_BIN names the command-line binary built from the same tree."""
import hashlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rlflow

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
BIN = os.environ.get("RLFLOW_BIN", str(ROOT / "build" / "rlflow"))


def run_ort(model, feeds):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_end_to_end_torch_export_optimise_onnxruntime(tmp_path):
    """The README's example: torch.onnx.export, rlflow.optimise, onnxruntime on the result."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(32)
            self.fc1 = torch.nn.Linear(32, 64)
            self.fc2 = torch.nn.Linear(64, 32)

        def forward(self, x):
            h = self.norm(x)
            h = self.fc2(torch.nn.functional.gelu(self.fc1(h)))
            return torch.relu(h + x)

    path = tmp_path / "block.onnx"
    x = torch.randn(2, 7, 32)
    torch.onnx.export(Block().eval(), (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})

    result = rlflow.optimise(str(path), target="ort", deterministic=True, progress=False)

    assert isinstance(result.model, onnx.ModelProto)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report["verification"]["ok"] is True
    assert result.report["after"]["op_counts"] != result.report["before"]["op_counts"]  # the chains were fused
    # Equal outputs in onnxruntime at sizes other than those the model was exported and optimised at.
    rng = np.random.default_rng(0)
    for shape in [(1, 1, 32), (3, 11, 32), (2, 7, 32)]:
        feed = {"x": rng.standard_normal(shape, dtype=np.float32)}
        want = run_ort(onnx.load(str(path)), feed)[0]
        got = run_ort(result.model, feed)[0]
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_same_bytes_as_the_command_line(tmp_path):
    """With --deterministic the package writes the file the CLI writes, byte for byte, and its report
    has the same fields."""
    model = DATA / "tiny_attention.onnx"
    cli_out, py_out = tmp_path / "cli.onnx", tmp_path / "py.onnx"
    proc = subprocess.run([BIN, "optimise", str(model), "-o", str(cli_out), "--deterministic", "--json", "-q"],
                          capture_output=True, text=True, check=True)
    cli_report = json.loads(proc.stdout)
    result = rlflow.optimise(str(model), deterministic=True, output=py_out, quiet=True)
    assert result.path == str(py_out)
    assert sha256(py_out) == sha256(cli_out)
    assert set(result.report) == set(cli_report)
    assert result.report["cost"]["after_ms"] == cli_report["cost"]["after_ms"]
    assert result.report["steps"] == cli_report["steps"]


def test_model_proto_in_and_out():
    proto = onnx.load(str(DATA / "tiny_cnn.onnx"))
    before = proto.SerializeToString()
    result = rlflow.optimise(proto, target="h100", deterministic=True, quiet=True)
    assert proto.SerializeToString() == before  # the caller's model is left as it was
    assert result.path is None and result.report["output"] is None
    assert result.report["model"] == "<onnx.ModelProto>"
    assert result.report["target"] == "h100"
    assert result.report["cost"]["predicted"] is True and result.report["cost"]["model"] == "recorded"
    feed = {proto.graph.input[0].name: np.random.default_rng(1).standard_normal((1, 3, 16, 16), dtype=np.float32)}
    np.testing.assert_allclose(run_ort(result.model, feed)[0], run_ort(proto, feed)[0], atol=1e-4, rtol=1e-4)


def test_typed_errors(tmp_path):
    model = str(DATA / "tiny_cnn.onnx")
    with pytest.raises(rlflow.UsageError) as e:
        rlflow.optimise(model, no_such_flag=3)
    assert e.value.exit_code == 2 and "no-such-flag" in str(e.value)
    with pytest.raises(rlflow.UsageError):
        rlflow.optimise(model, budget=0)
    with pytest.raises(rlflow.UsageError):
        rlflow.optimise(model, target="tpu")
    assert issubclass(rlflow.UsageError, ValueError)
    with pytest.raises(rlflow.UnsupportedModel) as e:
        rlflow.optimise(str(DATA / "malformed" / "garbage.onnx"), quiet=True)
    assert e.value.exit_code == 3
    with pytest.raises(rlflow.UnsupportedModel):
        rlflow.optimise(str(tmp_path / "missing.onnx"), quiet=True)
    with pytest.raises(rlflow.UsageError):
        rlflow.optimise(42)
    for cls in (rlflow.UsageError, rlflow.UnsupportedModel, rlflow.VerificationFailed, rlflow.InternalError):
        assert issubclass(cls, rlflow.RlflowError)
    # Nothing was left behind by the failures.
    assert list(tmp_path.iterdir()) == []


def test_progress_callback_sees_the_search():
    calls = []
    rlflow.optimise(str(DATA / "tiny_residual.onnx"), target="h100", deterministic=True, quiet=True,
                    progress=lambda expanded, unique, best, seconds: calls.append((expanded, unique, best, seconds)))
    assert calls, "the search never reported progress"
    assert all(best > 0 and expanded >= 0 for expanded, _, best, _ in calls)


def test_targets_cost_bench(tmp_path):
    names = [t["name"] for t in rlflow.targets()]
    assert {"ort", "h100", "gpu"} <= set(names)
    model = str(DATA / "tiny_cnn.onnx")
    c = rlflow.cost(model, target="h100")
    cli = json.loads(subprocess.run([BIN, "cost", model, "--cost-model", "recorded", "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    assert c["total_ms"] == pytest.approx(cli["total_ms"])
    assert c["target"] == "h100"
    opt = rlflow.optimise(model, target="ort", output=tmp_path / "opt.onnx", measure="off", quiet=True)
    b = rlflow.bench([model, opt.path], target="ort", rounds=10, warmup=1, threads="1", quiet=True)
    files = b["runs"][0]["files"]
    assert [Path(f["file"]).name for f in files] == ["tiny_cnn.onnx", "opt.onnx"]
    assert all(len(f["ms"]) == 10 and f["median_ms"] > 0 for f in files)
    assert files[1]["speedup_ci"][0] <= files[1]["speedup"] <= files[1]["speedup_ci"][1]
    with pytest.raises(rlflow.UsageError):
        rlflow.bench(model)


def test_compare_marks_a_wrong_peer_wrong(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import sys, onnx\nfrom onnx import numpy_helper\nm = onnx.load(sys.argv[1])\n"
                     "t = next(t for t in m.graph.initializer if numpy_helper.to_array(t).size > 1)\n"
                     "t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 2, t.name))\nonnx.save(m, sys.argv[2])\n")
    r = rlflow.compare(str(DATA / "tiny_cnn.onnx"), peers=["onnxslim", f"script:{wrong}"], rounds=10, max_seconds=5, quiet=True)
    tools = {t["name"]: t for t in r["tools"]}
    assert list(tools) == ["onnxslim", f"script:{wrong}", "rlflow"]
    assert tools[f"script:{wrong}"]["status"] == "wrong" and not tools[f"script:{wrong}"]["timings"]
    assert tools["onnxslim"]["status"] in ("ok", "not installed")
    assert tools["rlflow"]["status"] == "ok" and len(tools["rlflow"]["timings"]) == 1
    with pytest.raises(rlflow.UsageError):
        rlflow.compare(str(DATA / "tiny_cnn.onnx"), peers="nosuchtool")


def test_report_to_html(tmp_path):
    result = rlflow.optimise(str(DATA / "tiny_attention.onnx"), target="h100", deterministic=True, quiet=True)
    html = result.report.to_html(tmp_path / "report.html")
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == html
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "predicted" in html.lower() and "recorded" in html
    for op in result.report["before"]["op_counts"]:
        assert op in html
    assert "http://" not in html and "https://" not in html


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    """The README's Python quick start, as it is written there, on a model exported by torch."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    example = next(b for b in blocks if "rlflow.optimise(" in b)
    assert len(example.strip().splitlines()) == 3
    shutil.copy(DATA / "tiny_layernorm17.onnx", tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    assert float(printed[0]) > 0 and printed[1] == "True"
    written = onnx.load(str(tmp_path / "model.opt.onnx"))
    onnx.checker.check_model(written, full_check=True)
    feed = {"x": np.random.default_rng(2).standard_normal((1, 4, 32), dtype=np.float32)}
    original = onnx.load(str(tmp_path / "model.onnx"))
    np.testing.assert_allclose(run_ort(written, feed)[0], run_ort(original, feed)[0], atol=1e-4, rtol=1e-4)


def test_a_proto_over_the_limit_goes_through_external_data(monkeypatch):
    """A ModelProto over protobuf's limit (here: the limit lowered to 1 KB) is staged with its weights in
    a .data file and read back into the caller's proto: the result is right and the proto unchanged."""
    proto = onnx.load(str(DATA / "tiny_cnn.onnx"))
    before = proto.SerializeToString()
    assert proto.ByteSize() > 1024
    monkeypatch.setattr(rlflow, "_PROTO_LIMIT", 1024)
    saved = []
    real_save = onnx.save_model

    def spy(model, path, *args, **kwargs):
        saved.append(kwargs.get("save_as_external_data", False))
        real_save(model, path, *args, **kwargs)
        assert os.path.exists(str(path) + ".data") and os.path.getsize(path) < len(before)

    monkeypatch.setattr(onnx, "save_model", spy)
    result = rlflow.optimise(proto, target="h100", deterministic=True, quiet=True)
    assert saved == [True]
    assert proto.SerializeToString() == before
    feed = {proto.graph.input[0].name: np.random.default_rng(3).standard_normal((1, 3, 16, 16), dtype=np.float32)}
    np.testing.assert_allclose(run_ort(result.model, feed)[0], run_ort(proto, feed)[0], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("flags", [{"deterministic": True}, {"target": "h100"}, {}])
def test_an_integer_linear_layer_stays_what_onnxruntime_runs(dtype, flags):
    # MatMul + bias in int32/int64 once became a Gemm, which onnxruntime has no kernel for: exit 0
    # and a file it cannot load (--measure off, --target h100), or exit 3 under the default gate.
    from onnx import helper, numpy_helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    w = numpy_helper.from_array((np.arange(24, dtype=dtype).reshape(4, 6) % 5), "w")
    b = numpy_helper.from_array(np.arange(6, dtype=dtype), "b")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                              "int_linear", [helper.make_tensor_value_info("x", elem, ["n", 4])],
                              [helper.make_tensor_value_info("y", elem, ["n", 6])], [w, b])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = rlflow.optimise(proto, quiet=True, **flags)
    assert "Gemm" not in [n.op_type for n in result.model.graph.node]
    x = (np.arange(12, dtype=dtype).reshape(3, 4) % 7) - 3
    np.testing.assert_array_equal(run_ort(result.model, {"x": x})[0], run_ort(proto, {"x": x})[0])


def test_a_qdq_model_stays_quantized():
    # quantize_static's QDQ MobileNetV2 (scripts/corpus/make_quantized_models.py): every
    # DequantizeLinear is kept (a weight's used to be folded into float32, a 2.8x larger file) and
    # onnxruntime's int8 kernels give the input's outputs exactly.
    path = DATA / "quantized" / "qdq_mobilenet_s8.onnx"
    proto = onnx.load(str(path))
    result = rlflow.optimise(str(path), target="h100", quiet=True)
    count = lambda m, op: sum(n.op_type == op for n in m.graph.node)  # noqa: E731
    assert count(result.model, "DequantizeLinear") == count(proto, "DequantizeLinear") > 50
    assert result.model.ByteSize() <= proto.ByteSize()
    x = np.random.default_rng(3).standard_normal((3, 3, 32, 32), dtype=np.float32)
    np.testing.assert_array_equal(run_ort(result.model, {"pixels": x})[0], run_ort(proto, {"pixels": x})[0])
