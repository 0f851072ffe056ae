#include <sstream>

#include "rlflow/cost/cost_model.h"
#include "rlflow/util/hash.h"

namespace rlflow::cost {

OpSignature OpSignature::of(const ir::Graph& g, ir::NodeId id, const std::vector<bool>& constant) {
  const auto& n = g.node(id);
  OpSignature s;
  s.kind = n.kind;
  s.params = n.params;
  s.outputs = n.outputs;
  s.inputs.reserve(n.inputs.size());
  s.input_is_constant.reserve(n.inputs.size());
  for (const auto& in : n.inputs) {
    s.inputs.push_back(g.type(in));
    const auto k = static_cast<size_t>(in.node);
    s.input_is_constant.push_back(k < constant.size() && constant[k]);
  }
  return s;
}

OpSignature OpSignature::of(const ir::Graph& g, ir::NodeId id) {
  // Constness of a node depends only on earlier nodes, so a pass over the prefix suffices.
  std::vector<bool> c(static_cast<size_t>(id) + 1, false);
  for (size_t i = 0; i <= static_cast<size_t>(id); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kOpaque) continue;
    bool all = true;
    for (const auto& in : n.inputs) all = all && c[static_cast<size_t>(in.node)];
    c[i] = all;
  }
  return of(g, id, c);
}

namespace {

// One definition of the signature hash, over accessors, so that hash_of (straight from the graph)
// and hash() (of a built signature) cannot drift apart.
template <class InputType, class InputConstant>
uint64_t signature_hash(ir::OpKind kind, const ir::OpParams& params, size_t n_inputs, InputType input_type, size_t n_constant,
                        InputConstant input_constant, const std::vector<ir::TensorType>& outputs) {
  // The salt names the signature format: bump it when the meaning of a field changes, so stale
  // cache entries stop matching instead of being misread.
  Hasher h;
  h.add(std::string_view("rlflow.cost.signature.v1"));
  h.add(static_cast<uint64_t>(kind));
  ir::hash_params(h, params);
  auto type = [&h](const ir::TensorType& t) { h.add(static_cast<uint64_t>(t.dtype)).add(t.shape); };
  h.add(n_inputs);
  for (size_t i = 0; i < n_inputs; ++i) type(input_type(i));
  h.add(outputs.size());
  for (const auto& t : outputs) type(t);
  h.add(n_constant);
  for (size_t i = 0; i < n_constant; ++i) h.add(static_cast<uint64_t>(input_constant(i)));
  return h.digest();
}

}  // namespace

uint64_t OpSignature::hash() const {
  return signature_hash(
      kind, params, inputs.size(), [&](size_t i) -> const ir::TensorType& { return inputs[i]; }, input_is_constant.size(),
      [&](size_t i) { return static_cast<bool>(input_is_constant[i]); }, outputs);
}

uint64_t OpSignature::hash_of(const ir::Graph& g, ir::NodeId id, const std::vector<bool>& constant) {
  const auto& n = g.node(id);
  return signature_hash(
      n.kind, n.params, n.inputs.size(), [&](size_t i) -> const ir::TensorType& { return g.type(n.inputs[i]); }, n.inputs.size(),
      [&](size_t i) {
        const auto k = static_cast<size_t>(n.inputs[i].node);
        return k < constant.size() && constant[k];
      },
      n.outputs);
}

std::string OpSignature::str() const {
  std::ostringstream os;
  os << ir::op_name(kind);
  const auto p = ir::params_str(params);
  if (!p.empty()) os << "{" << p << "}";
  os << "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "") << inputs[i].str();
    if (i < input_is_constant.size() && input_is_constant[i]) os << " const";
  }
  os << ") -> ";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << outputs[i].str();
  return os.str();
}

}  // namespace rlflow::cost
