// rlflow links a current onnx (scripts/setup/build_onnx), not Debian's 1.12: models saved by onnx >= 1.14
// (IR >= 9) and opsets above 17 import, export and pass the checker. The fixtures are written by
// scripts/corpus/make_test_models.py with the venv's onnx (1.19.1 since 2026-11-26; the fixtures date from 1.16).
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "rlflow/onnx/model_io.h"

using namespace rlflow;
namespace fs = std::filesystem;

namespace {

const fs::path kData = RLFLOW_TEST_DATA;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return -1;
}

// The strict check export runs, repeated here on the bytes export wrote.
void expect_checker_passes(onnx::ModelProto m, const std::string& what) {
  try {
    onnx::checker::check_model(m);
    onnx::ShapeInferenceOptions o{true, 1, false};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), o);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

// Imports `bytes`, exports with the checker on, and returns the exported model.
onnx::ModelProto round_trip(const std::string& bytes, const std::string& label) {
  auto g = onnxio::import_model(bytes, label, kData.string(), {});
  EXPECT_TRUE(g.ok()) << label << ": " << (g.ok() ? "" : g.error().message);
  if (!g.ok()) return {};
  onnxio::ExportOptions eo;
  eo.check = true;
  auto out = onnxio::export_model(*g, eo, "out.onnx");
  EXPECT_TRUE(out.ok()) << label << ": " << (out.ok() ? "" : out.error().message);
  if (!out.ok()) return {};
  return parse(out->model_bytes);
}

}  // namespace

TEST(CurrentOnnx, LinksItsOwnNamespaceAndProtoFile) {
  EXPECT_STREQ(onnx::LAST_RELEASE_VERSION, "1.19.0");  // onnx 1.19.1 reports its release line
  const auto* file = onnx::ModelProto::descriptor()->file();
  // Debian's libonnx (loaded with libtorch) registers onnx/onnx-ml.proto, package onnx.
  EXPECT_EQ(file->name(), "onnx/onnx_onnx_rlflow-ml.proto");
  EXPECT_EQ(file->package(), "onnx_rlflow");
  EXPECT_GE(onnx::Version::IR_VERSION, 11);
  EXPECT_GE(onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second, 23);
  EXPECT_NE(onnx::OpSchemaRegistry::Schema("Gelu", 23, ""), nullptr);
}

TEST(CurrentOnnx, Ir10ModelRoundTripsThroughTheChecker) {
  const std::string bytes = slurp(kData / "ir10_matmul.onnx");
  ASSERT_EQ(parse(bytes).ir_version(), 10);
  auto m = round_trip(bytes, "ir10_matmul.onnx");
  EXPECT_EQ(m.ir_version(), 10);
  EXPECT_EQ(default_opset(m), 13);
  expect_checker_passes(m, "ir10_matmul.onnx exported");
}

TEST(CurrentOnnx, Opset21GeluImportsAsGeluAndPassesTheChecker) {
  const std::string bytes = slurp(kData / "ir10_opset21.onnx");
  onnxio::ImportStats stats;
  auto g = onnxio::import_model(bytes, "ir10_opset21.onnx", kData.string(), {}, &stats);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(stats.opaque_nodes, 0);
  int gelu = 0;
  for (size_t i = 0; i < g->size(); ++i) gelu += g->node(static_cast<ir::NodeId>(i)).kind == ir::OpKind::kGelu;
  EXPECT_EQ(gelu, 1);
  auto m = round_trip(bytes, "ir10_opset21.onnx");
  EXPECT_EQ(m.ir_version(), 10);
  EXPECT_EQ(default_opset(m), 21);
  expect_checker_passes(m, "ir10_opset21.onnx exported");
}

// IR 11 at opset 23 (what onnx 1.18+ writes): the same graph, restamped.
TEST(CurrentOnnx, Ir11Opset23RoundTripsThroughTheChecker) {
  auto in = parse(slurp(kData / "ir10_opset21.onnx"));
  in.set_ir_version(11);
  in.mutable_opset_import(0)->set_version(23);
  expect_checker_passes(in, "restamped input");
  std::string bytes;
  ASSERT_TRUE(in.SerializeToString(&bytes));
  auto m = round_trip(bytes, "ir11_opset23");
  EXPECT_EQ(m.ir_version(), 11);
  EXPECT_EQ(default_opset(m), 23);
  expect_checker_passes(m, "ir11_opset23 exported");
}

// Old files keep their IR version (4-8) and still pass.
TEST(CurrentOnnx, OldIrVersionsStillRoundTrip) {
  for (const char* name : {"tiny_residual.onnx", "tiny_cnn.onnx", "tiny_layernorm17.onnx"}) {
    const std::string bytes = slurp(kData / name);
    const int64_t ir = parse(bytes).ir_version();
    ASSERT_LE(ir, 8) << name;
    auto m = round_trip(bytes, name);
    EXPECT_EQ(m.ir_version(), ir) << name;
    expect_checker_passes(m, name);
  }
}

// IR 3 (onnx 1.0-1.1): initializers are graph inputs too. Exported as IR 4, where they need not be.
TEST(CurrentOnnx, Ir3ModelIsExportedAsIr4) {
  auto in = parse(slurp(kData / "ir10_matmul.onnx"));
  in.set_ir_version(3);
  in.mutable_opset_import(0)->set_version(8);
  for (const auto& t : in.graph().initializer()) {
    auto* vi = in.mutable_graph()->add_input();
    vi->set_name(t.name());
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    for (auto d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  expect_checker_passes(in, "ir3_opset8 input");
  std::string bytes;
  ASSERT_TRUE(in.SerializeToString(&bytes));
  auto m = round_trip(bytes, "ir3_opset8");
  EXPECT_EQ(m.ir_version(), 4);
  EXPECT_EQ(default_opset(m), 8);
  EXPECT_EQ(m.graph().input_size(), 1);
  expect_checker_passes(m, "ir3_opset8 exported");
}
