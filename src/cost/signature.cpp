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

uint64_t OpSignature::hash() const {
  // The salt names the signature format: bump it when the meaning of a field changes, so stale
  // cache entries stop matching instead of being misread.
  Hasher h;
  h.add(std::string_view("rlflow.cost.signature.v1"));
  h.add(static_cast<uint64_t>(kind));
  ir::hash_params(h, params);
  auto types = [&h](const std::vector<ir::TensorType>& ts) {
    h.add(ts.size());
    for (const auto& t : ts) h.add(static_cast<uint64_t>(t.dtype)).add(t.shape);
  };
  types(inputs);
  types(outputs);
  h.add(input_is_constant.size());
  for (bool b : input_is_constant) h.add(static_cast<uint64_t>(b));
  return h.digest();
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
