#pragma once
// Shared by the search tests: a per-kind cost table and a few abstract rules whose landscape is
// exact, so a strategy's result is known by construction; semantics are not the point here.
#include <map>
#include <stdexcept>

#include "rlflow/ir/builder.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::search_test {

using namespace rlflow::ir;

class TableCost : public cost::CostModel {
 public:
  explicit TableCost(std::map<OpKind, double> t) : table_(std::move(t)) {}
  Expected<double> op_cost(const cost::OpSignature& sig) override {
    ++calls;
    auto it = table_.find(sig.kind);
    return it == table_.end() ? 1.0 : it->second;
  }
  std::string device_fingerprint() const override { return "table"; }
  std::string name() const override { return "table"; }
  int calls = 0;

 private:
  std::map<OpKind, double> table_;
};

inline rules::RuleLibrary abstract_rules() {
  // s2r: Sigmoid -> Relu; ss2e: Sigmoid(Sigmoid) -> Erf; s2t: Sigmoid -> Tanh; tt2r: Tanh(Tanh) -> Relu
  const char* text = R"({"format": "rlflow-rules", "version": 1, "rules": [
    {"name": "s2r", "source": [{"id": "s", "op": "Sigmoid", "inputs": ["x"]}],
     "target": [{"id": "r", "op": "Relu", "inputs": ["x"]}], "outputs": {"s": "r"}},
    {"name": "ss2e", "source": [{"id": "a", "op": "Sigmoid", "inputs": ["x"]}, {"id": "b", "op": "Sigmoid", "inputs": ["a"]}],
     "target": [{"id": "e", "op": "Erf", "inputs": ["x"]}], "outputs": {"b": "e"}},
    {"name": "s2t", "source": [{"id": "s", "op": "Sigmoid", "inputs": ["x"]}],
     "target": [{"id": "t", "op": "Tanh", "inputs": ["x"]}], "outputs": {"s": "t"}},
    {"name": "tt2r", "source": [{"id": "a", "op": "Tanh", "inputs": ["x"]}, {"id": "b", "op": "Tanh", "inputs": ["a"]}],
     "target": [{"id": "r", "op": "Relu", "inputs": ["x"]}], "outputs": {"b": "r"}}]})";
  auto lib = rules::parse_library(text, "test");
  if (!lib) throw std::runtime_error(lib.error().message);
  return std::move(*lib);
}

inline std::vector<const rules::Rule*> pick(const rules::RuleLibrary& lib, std::vector<std::string> names) {
  std::vector<const rules::Rule*> out;
  for (const auto& n : names) out.push_back(lib.find(n));
  return out;
}

inline Graph two_sigmoids() {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {8}});
  b.output(b.op(OpKind::kSigmoid, {b.op(OpKind::kSigmoid, {x})}), "y");
  return b.build();
}

}  // namespace rlflow::search_test
