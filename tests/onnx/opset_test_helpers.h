#pragma once
// Shared by the suites of the opset-23 ops (RMSNorm, RotaryEmbedding): the executor that folds and
// runs, export with the onnx checker, re-import, and the strict onnx checks.
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/ir/graph.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow_onnx_test {

inline const rlflow::exec::Executor& executor() {
  static const rlflow::exec::Executor ex;
  return ex;
}

inline rlflow::onnxio::ImportOptions import_options() {
  rlflow::onnxio::ImportOptions o;
  o.evaluator = &executor();
  return o;
}

inline rlflow::onnxio::ExportedModel export_checked(const rlflow::ir::Graph& g) {
  rlflow::onnxio::ExportOptions o;
  o.evaluator = &executor();
  o.check = true;
  auto r = rlflow::onnxio::export_model(g, o, "model.onnx");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : rlflow::onnxio::ExportedModel{};
}

inline onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

inline std::vector<std::string> op_types(const onnx::ModelProto& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

inline rlflow::ir::Graph reimport(const std::string& bytes) {
  auto r = rlflow::onnxio::import_model(bytes, "re-import", ".", import_options());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : rlflow::ir::Graph{};
}

inline size_t count_kind(const rlflow::ir::Graph& g, rlflow::ir::OpKind k) {
  return static_cast<size_t>(std::count_if(g.nodes().begin(), g.nodes().end(), [k](const rlflow::ir::Node& n) { return n.kind == k; }));
}

// The strict check: onnx.checker and strict shape inference, with the linked onnx 1.19.
inline void expect_checker_passes(onnx::ModelProto m) {
  try {
    onnx::checker::check_model(m);
    onnx::ShapeInferenceOptions o{true, 1, false};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), o);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
}

}  // namespace rlflow_onnx_test
