#include "rlflow/ir/builder.h"

#include <random>

namespace rlflow::ir {

ValueRef GraphBuilder::input(const std::string& name, TensorType type) {
  Node n;
  n.kind = OpKind::kInput;
  n.name = name;
  n.outputs = {std::move(type)};
  return {g_.add(std::move(n)), 0};
}

ValueRef GraphBuilder::weight(const std::string& name, TensorPtr value) {
  Node n;
  n.kind = OpKind::kWeight;
  n.name = name;
  n.outputs = {value->type()};
  n.value = std::move(value);
  return {g_.add(std::move(n)), 0};
}

Expected<std::vector<ValueRef>> GraphBuilder::try_op(OpKind kind, std::vector<ValueRef> inputs, OpParams params,
                                                     std::string name) {
  std::vector<TensorType> in_types;
  for (const auto& v : inputs) {
    if (v.node < 0 || static_cast<size_t>(v.node) >= g_.size() ||
        v.index >= static_cast<int32_t>(g_.node(v.node).outputs.size()))
      return Error::internal("builder: input refers to a missing value");
    in_types.push_back(g_.type(v));
  }
  auto types = infer_types(kind, params, in_types);
  if (!types) return types.error();
  return op_with_types(kind, std::move(inputs), std::move(params), std::move(*types), std::move(name));
}

std::vector<ValueRef> GraphBuilder::op_with_types(OpKind kind, std::vector<ValueRef> inputs, OpParams params,
                                                  std::vector<TensorType> outputs, std::string name) {
  Node n;
  n.kind = kind;
  n.params = std::move(params);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.name = std::move(name);
  const size_t nout = n.outputs.size();
  NodeId id = g_.add(std::move(n));
  std::vector<ValueRef> refs;
  for (size_t i = 0; i < nout; ++i) refs.push_back({id, static_cast<int32_t>(i)});
  return refs;
}

std::vector<ValueRef> GraphBuilder::ops(OpKind kind, std::vector<ValueRef> inputs, OpParams params) {
  auto r = try_op(kind, std::move(inputs), std::move(params));
  if (!r) throw std::invalid_argument(r.error().message);
  return std::move(r).value();
}

ValueRef GraphBuilder::op(OpKind kind, std::vector<ValueRef> inputs, OpParams params, std::string name) {
  auto r = try_op(kind, std::move(inputs), std::move(params), std::move(name));
  if (!r) throw std::invalid_argument(r.error().message);
  return r->front();
}

ValueRef GraphBuilder::conv(ValueRef x, ValueRef w, std::vector<int64_t> strides, std::vector<int64_t> pads,
                            Activation act, int64_t group) {
  ConvParams p;
  p.strides = std::move(strides);
  p.pads = std::move(pads);
  p.dilations.assign(p.strides.size(), 1);
  p.group = group;
  p.act = act;
  return op(OpKind::kConv, {x, w}, p);
}

TensorPtr random_tensor(Shape shape, uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const auto n = static_cast<size_t>(numel(shape));
  if (dtype != DType::kFloat32) {
    std::vector<double> v(n);
    for (auto& x : v) x = dist(rng);
    return Tensor::from_doubles(dtype, std::move(shape), v);
  }
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return Tensor::from_vector(DType::kFloat32, std::move(shape), v);
}

}  // namespace rlflow::ir
