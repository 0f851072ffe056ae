#pragma once
// Shared by the suites of the opset-23 ops (RMSNorm, RotaryEmbedding, Attention): the executor that
// folds and runs, export with the onnx checker, re-import, the strict onnx checks, and the
// one-node-at-23 / chain-below export checks.
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "exec/common.h"
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

// At opset 23 the graph exports as the one node `onnx_op`, passes the strict checks, and re-imports
// as the same graph computing the same numbers. Returns the re-imported graph.
inline rlflow::ir::Graph expect_one_node_at_23(const rlflow::ir::Graph& g23, const std::string& onnx_op) {
  auto m23 = export_checked(g23);
  const auto p23 = parse(m23.model_bytes);
  EXPECT_EQ(op_types(p23), (std::vector<std::string>{onnx_op}));
  EXPECT_GE(p23.ir_version(), 10);
  expect_checker_passes(p23);
  rlflow::ir::Graph r23 = reimport(m23.model_bytes);
  EXPECT_TRUE(structurally_equal(g23, r23));
  rlflow::testing::expect_same_numbers(g23, r23, 1e-6, 1e-6);
  return r23;
}

// Below opset 23 the same op exports as a chain that passes the strict checks and, re-imported,
// computes what the graph and the opset-23 file (`r23`) compute. Returns the chain's op types and
// the re-imported graph.
inline std::pair<std::vector<std::string>, rlflow::ir::Graph> expect_chain_below_23(const rlflow::ir::Graph& g,
                                                                                   const rlflow::ir::Graph& r23) {
  auto m = export_checked(g);
  const auto p = parse(m.model_bytes);
  expect_checker_passes(p);
  rlflow::ir::Graph r = reimport(m.model_bytes);
  rlflow::testing::expect_same_numbers(g, r, 1e-5, 1e-5);
  rlflow::testing::expect_same_numbers(r, r23, 1e-5, 1e-5);
  return {op_types(p), std::move(r)};
}

}  // namespace rlflow_onnx_test
