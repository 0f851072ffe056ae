#include "rlflow/rules/verify.h"

#include <cmath>
#include <set>

#include "rlflow/exec/compare.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"

namespace rlflow::rules {

namespace {

// A constant variable's values, from a uniform draw u in (-1, 1): |u| + 0.5 for a positive one,
// else 3u, in (-3, 3). Drawn from (-1, 1) they would miss a rule that only holds while 1 + b > 0
// (relu(x) + b relu(x) = relu(x + b x) passed that way, and is false at b = -2).
ir::TensorPtr constant_values(ir::Shape shape, uint64_t seed, bool positive) {
  auto t = ir::random_tensor(shape, seed);
  std::vector<float> v(t->data<float>().begin(), t->data<float>().end());
  for (auto& x : v) x = positive ? std::fabs(x) + 0.5f : 3.0f * x;
  return ir::Tensor::from_vector(ir::DType::kFloat32, std::move(shape), v);
}

}  // namespace

Expected<ir::Graph> instantiate_source(const Rule& r, const Instance& inst, uint64_t seed) {
  auto bad = [&](const std::string& why) { return Error::bad_input("rule '" + r.name + "' instance: " + why); };
  ir::ModelMeta meta;
  meta.opsets = {{"", 17}};
  ir::GraphBuilder gb(meta);
  Bindings b;
  b.ints = inst.ints;
  b.reals = inst.reals;
  std::map<std::string, ir::ValueRef> produced;
  uint64_t wseed = seed * 1000;
  auto value_of = [&](const std::string& ref) -> Expected<ir::ValueRef> {
    auto colon = ref.find(':');
    std::string id = colon == std::string::npos ? ref : ref.substr(0, colon);
    int k = colon == std::string::npos ? 0 : std::stoi(ref.substr(colon + 1));
    if (r.source.index_of(id) >= 0) {
      auto it = produced.find(id);
      if (it == produced.end()) return bad("node '" + id + "' used before it is built");
      return ir::ValueRef{it->second.node, k};
    }
    auto it = b.tensors.find(id);
    if (it != b.tensors.end()) return it->second;
    auto shape = inst.shapes.find(id);
    if (shape == inst.shapes.end()) return bad("no shape for variable '" + id + "'");
    auto spec = r.vars.count(id) ? r.vars.at(id) : TensorVar{};
    ir::ValueRef v;
    if (spec.constant)
      v = gb.weight(id, constant_values(shape->second, ++wseed, spec.positive));
    else
      v = gb.input(id, {ir::DType::kFloat32, shape->second});
    b.tensors[id] = v;
    return v;
  };
  for (const auto& pn : r.source.nodes) {
    std::vector<ir::ValueRef> ins;
    for (const auto& in : pn.inputs) {
      auto v = value_of(in);
      if (!v) return v.error();
      ins.push_back(*v);
    }
    const int64_t nsp = ins.empty() ? 0 : gb.type(ins[0]).rank() - 2;
    Fields f = default_fields(pn.kind, nsp);
    auto set_field = [&](const std::string& field, const Expr& e) -> Status {
      if (is_real_field(pn.kind, field)) {
        auto v = eval_real(e, b, gb.graph());
        if (!v) return bad(v.error().message);
        f.reals[field] = *v;
      } else {
        auto v = eval_ints(e, b, gb.graph());
        if (!v) return bad(v.error().message);
        f.ints[field] = *v;
      }
      return {};
    };
    // A parameter may read the size of a variable no earlier node has bound (a Constant's shape).
    for (const auto& [field, e] : pn.params) {
      std::vector<std::string> vars;
      e.collect_vars(&vars);
      for (const auto& v : vars)
        if (!v.empty() && v[0] != '$' && !b.tensors.count(v) && inst.shapes.count(v)) {
          auto bound = value_of(v);
          if (!bound) return bound.error();
        }
    }
    for (const auto& [field, e] : pn.params) RLFLOW_TRY_STATUS(set_field(field, e));
    if (auto it = inst.node_params.find(pn.id); it != inst.node_params.end())
      for (const auto& [field, e] : it->second) RLFLOW_TRY_STATUS(set_field(field, e));
    auto params = params_from_fields(pn.kind, f);
    if (!params) return bad(params.error().message);
    auto out = gb.try_op(pn.kind, ins, *params, pn.id);
    if (!out) return bad("node '" + pn.id + "': " + out.error().message);
    produced[pn.id] = out->front();
  }
  for (const auto& [s, t] : r.outputs) {
    auto v = value_of(s);
    if (!v) return v.error();
    gb.output(*v, s);
  }
  return std::move(gb).build();
}

RuleCheck verify_numerically(const Rule& r, int trials, double rtol) {
  RuleCheck rc;
  rc.rule = r.name;
  rc.ok = true;
  exec::Executor ex(ir::DType::kFloat64);
  for (size_t i = 0; i < r.instances.size(); ++i) {
    InstanceResult ir_;
    auto g = instantiate_source(r, r.instances[i], i + 1);
    if (!g) {
      ir_.message = g.error().message;
    } else {
      auto matches = find_matches(*g, r);
      if (matches.empty()) {
        ir_.message = "the rule does not match its own instance";
      } else {
        auto g2 = apply(*g, r, matches.front());
        if (!g2) {
          ir_.message = g2.error().message;
        } else {
          ir_.ok = true;
          for (int t = 0; t < trials && ir_.ok; ++t) {
            auto inputs = exec::random_inputs(*g, 7919 * (i + 1) + static_cast<uint64_t>(t));
            auto a = ex.run(*g, inputs);
            auto c = ex.run(*g2, inputs);
            if (!a || !c) {
              ir_.ok = false;
              ir_.message = !a ? a.error().message : c.error().message;
              break;
            }
            for (size_t k = 0; k < a->size(); ++k) {
              double scale = 1.0;
              for (double x : (*a)[k]->as_double()) scale = std::max(scale, std::fabs(x));
              auto d = exec::diff_tensors(*(*c)[k], *(*a)[k], rtol * scale, 0.0);
              ir_.max_abs_diff = std::max(ir_.max_abs_diff, d.max_abs_diff);
              if (!d.ok) {
                ir_.ok = false;
                ir_.message = "output '" + g->outputs()[k].name + "' differs by " + std::to_string(d.max_abs_diff);
              }
            }
          }
        }
      }
    }
    rc.ok = rc.ok && ir_.ok;
    rc.instances.push_back(std::move(ir_));
  }
  if (r.instances.size() < 3) {
    rc.ok = false;
    rc.message = "needs at least 3 instances, has " + std::to_string(r.instances.size());
  } else if (!rc.ok) {
    for (size_t i = 0; i < rc.instances.size(); ++i)
      if (!rc.instances[i].ok) {
        rc.message = "instance " + std::to_string(i) + ": " + rc.instances[i].message;
        break;
      }
  }
  return rc;
}

}  // namespace rlflow::rules
