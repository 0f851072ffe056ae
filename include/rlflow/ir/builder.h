#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::ir {

// Builds graphs in code (tests, rules, the importer). Every op is shape-inferred as it is added.
class GraphBuilder {
 public:
  GraphBuilder() = default;
  explicit GraphBuilder(ModelMeta meta) { g_.meta() = std::move(meta); }

  ValueRef input(const std::string& name, TensorType type);
  ValueRef weight(const std::string& name, TensorPtr value);
  // Adds an op with inferred output types.
  Expected<std::vector<ValueRef>> try_op(OpKind kind, std::vector<ValueRef> inputs, OpParams params = {},
                                         std::string name = {});
  // Adds an op whose output types are given (opaque ops).
  std::vector<ValueRef> op_with_types(OpKind kind, std::vector<ValueRef> inputs, OpParams params,
                                      std::vector<TensorType> outputs, std::string name = {});

  // Convenience for code whose structure is known to be valid; throws std::invalid_argument.
  ValueRef op(OpKind kind, std::vector<ValueRef> inputs, OpParams params = {}, std::string name = {});
  std::vector<ValueRef> ops(OpKind kind, std::vector<ValueRef> inputs, OpParams params = {});
  ValueRef conv(ValueRef x, ValueRef w, std::vector<int64_t> strides, std::vector<int64_t> pads,
                Activation act = Activation::kNone, int64_t group = 1);
  ValueRef matmul(ValueRef a, ValueRef b) { return op(OpKind::kMatMul, {a, b}); }
  ValueRef add(ValueRef a, ValueRef b) { return op(OpKind::kAdd, {a, b}); }
  ValueRef mul(ValueRef a, ValueRef b) { return op(OpKind::kMul, {a, b}); }
  ValueRef relu(ValueRef a) { return op(OpKind::kRelu, {a}); }

  void output(ValueRef v, const std::string& name) { g_.add_output(v, name); }
  Node& mutable_node(NodeId id) { return g_.mutable_node(id); }
  const Graph& graph() const { return g_; }
  const TensorType& type(ValueRef v) const { return g_.type(v); }
  Graph build() && { return std::move(g_); }
  Graph build() const& { return g_; }

 private:
  Graph g_;
};

// A float32 tensor with values drawn deterministically from the seed (uniform in [-1, 1)).
TensorPtr random_tensor(Shape shape, uint64_t seed, DType dtype = DType::kFloat32);

}  // namespace rlflow::ir
