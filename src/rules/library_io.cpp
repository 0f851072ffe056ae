#include "rlflow/rules/library_io.h"
#include "rlflow/util/file_io.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rlflow::rules {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "rlflow-rules";

const char* kActs[] = {"none", "relu", "sigmoid", "tanh"};

Expected<Expr> parse_expr(const json& j, const std::string& field, bool top) {
  if (j.is_number_integer()) return Expr::Ints({j.get<int64_t>()});
  if (j.is_number_float()) return Expr::Real(j.get<double>());
  if (j.is_boolean()) return Expr::Ints({j.get<bool>() ? 1 : 0});
  if (j.is_string()) {
    auto s = j.get<std::string>();
    if (top && field == "act")
      for (int k = 0; k < 4; ++k)
        if (s == kActs[k]) return Expr::Ints({k});
    if (s == "inf") return Expr::Real(std::numeric_limits<double>::infinity());
    if (s == "-inf") return Expr::Real(-std::numeric_limits<double>::infinity());
    return Expr::Var(s);
  }
  if (j.is_array()) {
    bool all_int = std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_number_integer(); });
    if (all_int) return Expr::Ints(j.get<std::vector<int64_t>>());
    std::vector<Expr> parts;
    for (const auto& x : j) {
      auto e = parse_expr(x, field, false);
      if (!e) return e.error();
      parts.push_back(std::move(*e));
    }
    return Expr::Call("list", std::move(parts));
  }
  if (j.is_object() && j.size() == 1) {
    // The object's one member, through an iterator that outlives the bindings (items().begin()
    // would be a temporary, and its key() a dangling reference).
    const auto member = j.begin();
    const std::string& fn = member.key();
    const auto& args = member.value();
    std::vector<Expr> a;
    if (args.is_array()) {
      for (const auto& x : args) {
        auto e = parse_expr(x, field, false);
        if (!e) return e.error();
        a.push_back(std::move(*e));
      }
    } else {
      auto e = parse_expr(args, field, false);
      if (!e) return e.error();
      a.push_back(std::move(*e));
    }
    return Expr::Call(fn, std::move(a));
  }
  return Error::bad_input("field '" + field + "': cannot read expression " + j.dump());
}

json dump_expr(const Expr& e, const std::string& field, bool top) {
  switch (e.kind) {
    case Expr::Kind::kInts:
      if (top && field == "act" && e.ints.size() == 1 && e.ints[0] >= 0 && e.ints[0] < 4) return kActs[e.ints[0]];
      if (e.ints.size() == 1 && !(field == "strides" || field == "pads" || field == "dilations" || field == "kernel" ||
                                  field == "perm" || field == "shape" || field == "axes" || field == "sizes" ||
                                  field == "starts" || field == "ends" || field == "steps"))
        return e.ints[0];
      return e.ints;
    case Expr::Kind::kReal:
      if (std::isinf(e.real)) return e.real > 0 ? "inf" : "-inf";
      return e.real;
    case Expr::Kind::kVar: return e.name;
    case Expr::Kind::kCall: {
      json args = json::array();
      for (const auto& a : e.args) args.push_back(dump_expr(a, field, false));
      if (e.name == "list") return args;
      return json{{e.name, args}};
    }
  }
  return nullptr;
}

Expected<Pattern> parse_pattern(const json& j, bool target) {
  if (!j.is_array()) return Error::bad_input((target ? std::string("target") : std::string("source")) + " must be an array of nodes");
  Pattern p;
  for (const auto& jn : j) {
    PatternNode n;
    n.id = jn.value("id", "");
    auto op = ir::op_from_name(jn.value("op", ""));
    if (n.id.empty() || !op) return Error::bad_input("pattern node needs an id and a known op: " + jn.dump());
    n.kind = *op;
    if (jn.contains("inputs")) n.inputs = jn.at("inputs").get<std::vector<std::string>>();
    n.like = jn.value("like", "");
    if (jn.contains("params"))
      for (const auto& [k, v] : jn.at("params").items()) {
        auto e = parse_expr(v, k, true);
        if (!e) return e.error().with_context("node '" + n.id + "'");
        n.params[k] = std::move(*e);
      }
    p.nodes.push_back(std::move(n));
  }
  return p;
}

json dump_pattern(const Pattern& p) {
  json arr = json::array();
  for (const auto& n : p.nodes) {
    json jn{{"id", n.id}, {"op", ir::op_name(n.kind)}, {"inputs", n.inputs}};
    if (!n.like.empty()) jn["like"] = n.like;
    if (!n.params.empty()) {
      json params = json::object();
      for (const auto& [k, e] : n.params) params[k] = dump_expr(e, k, true);
      jn["params"] = params;
    }
    arr.push_back(jn);
  }
  return arr;
}

Expected<Rule> parse_rule(const json& j) {
  Rule r;
  r.name = j.value("name", "");
  auto ctx = [&](const Error& e) { return Error::bad_input("rule '" + r.name + "': " + e.message); };
  r.provenance = j.value("provenance", "hand-written");
  r.description = j.value("description", "");
  r.in_default_set = j.value("default", true);
  r.condition_note = j.value("condition_note", "");
  auto status = status_from_name(j.value("status", "unverified"));
  if (!status) return Error::bad_input("rule '" + r.name + "': unknown status '" + j.value("status", "") + "'");
  r.status = *status;
  if (j.contains("proof")) {
    const auto& jp = j.at("proof");
    if (!jp.is_object()) return Error::bad_input("rule '" + r.name + "': \"proof\" is {\"outcome\": ..., \"reason\": ...}");
    r.proof_outcome = jp.value("outcome", "");
    r.proof_reason = jp.value("reason", "");
  }
  auto src = parse_pattern(j.value("source", json::array()), false);
  if (!src) return ctx(src.error());
  r.source = std::move(*src);
  auto tgt = parse_pattern(j.value("target", json::array()), true);
  if (!tgt) return ctx(tgt.error());
  r.target = std::move(*tgt);
  if (j.contains("outputs"))
    for (const auto& [s, t] : j.at("outputs").items()) r.outputs.emplace_back(s, t.get<std::string>());
  if (j.contains("vars"))
    for (const auto& [v, spec] : j.at("vars").items()) {
      r.vars[v].constant = spec.value("constant", false);
      r.vars[v].positive = spec.value("positive", false);
    }
  if (j.contains("conditions"))
    for (const auto& jc : j.at("conditions")) {
      if (!jc.is_object() || jc.size() != 1) return Error::bad_input("rule '" + r.name + "': a condition is {\"eq\": [a, b]}");
      const auto member = jc.begin();  // as in parse_expr
      const std::string& cmp = member.key();
      const auto& args = member.value();
      if (!args.is_array() || args.size() != 2) return Error::bad_input("rule '" + r.name + "': a condition compares two expressions");
      auto l = parse_expr(args[0], cmp, false), rr = parse_expr(args[1], cmp, false);
      if (!l) return ctx(l.error());
      if (!rr) return ctx(rr.error());
      r.conditions.push_back({cmp, *l, *rr});
    }
  if (j.contains("symmetric")) r.symmetric = j.at("symmetric").get<std::vector<std::vector<std::string>>>();
  if (j.contains("instances"))
    for (const auto& ji : j.at("instances")) {
      Instance inst;
      if (ji.contains("shapes")) inst.shapes = ji.at("shapes").get<std::map<std::string, ir::Shape>>();
      if (ji.contains("params"))
        for (const auto& [k, v] : ji.at("params").items()) {
          if (v.is_number_float()) inst.reals[k] = v.get<double>();
          else if (v.is_number_integer()) inst.ints[k] = {v.get<int64_t>()};
          else inst.ints[k] = v.get<std::vector<int64_t>>();
        }
      if (ji.contains("node_params"))
        for (const auto& [node, fields] : ji.at("node_params").items())
          for (const auto& [k, v] : fields.items()) {
            auto e = parse_expr(v, k, true);
            if (!e) return ctx(e.error());
            inst.node_params[node][k] = std::move(*e);
          }
      r.instances.push_back(std::move(inst));
    }
  auto st = validate_rule(r);
  if (!st.ok()) return st.error();
  return r;
}

json dump_rule(const Rule& r) {
  json j{{"name", r.name}, {"provenance", r.provenance}, {"status", status_name(r.status)}, {"default", r.in_default_set}};
  if (!r.description.empty()) j["description"] = r.description;
  if (!r.proof_outcome.empty()) {
    j["proof"] = {{"outcome", r.proof_outcome}};
    if (!r.proof_reason.empty()) j["proof"]["reason"] = r.proof_reason;
  }
  if (!r.vars.empty()) {
    json v = json::object();
    for (const auto& [k, spec] : r.vars) {
      v[k] = {{"constant", spec.constant}};
      if (spec.positive) v[k]["positive"] = true;
    }
    j["vars"] = v;
  }
  j["source"] = dump_pattern(r.source);
  j["target"] = dump_pattern(r.target);
  json outs = json::object();
  for (const auto& [s, t] : r.outputs) outs[s] = t;
  j["outputs"] = outs;
  if (!r.conditions.empty()) {
    json cs = json::array();
    for (const auto& c : r.conditions) cs.push_back({{c.cmp, {dump_expr(c.lhs, c.cmp, false), dump_expr(c.rhs, c.cmp, false)}}});
    j["conditions"] = cs;
  }
  if (!r.condition_note.empty()) j["condition_note"] = r.condition_note;
  if (!r.symmetric.empty()) j["symmetric"] = r.symmetric;
  json insts = json::array();
  for (const auto& inst : r.instances) {
    json ji{{"shapes", inst.shapes}};
    json params = json::object();
    for (const auto& [k, v] : inst.ints) params[k] = v;
    for (const auto& [k, v] : inst.reals) params[k] = v;
    if (!params.empty()) ji["params"] = params;
    if (!inst.node_params.empty()) {
      json np = json::object();
      for (const auto& [node, fields] : inst.node_params)
        for (const auto& [k, e] : fields) np[node][k] = dump_expr(e, k, true);
      ji["node_params"] = np;
    }
    insts.push_back(ji);
  }
  j["instances"] = insts;
  return j;
}

}  // namespace

Expected<RuleLibrary> parse_library(const std::string& text, const std::string& label) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Error::bad_input(label + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    return Error::bad_input(label + ": not an rlflow rule file (missing \"format\": \"" + kFormat + "\")");
  RuleLibrary lib;
  lib.version = j.value("version", 0);
  if (lib.version != 1) return Error::bad_input(label + ": unsupported rule file version " + std::to_string(lib.version));
  std::set<std::string> names;
  try {
    for (const auto& jr : j.value("rules", json::array())) {
      auto r = parse_rule(jr);
      if (!r) return r.error().with_context(label);
      if (!names.insert(r->name).second) return Error::bad_input(label + ": rule '" + r->name + "' is defined twice");
      lib.rules.push_back(std::move(*r));
    }
  } catch (const json::exception& e) {
    return Error::bad_input(label + ": malformed rule (" + std::string(e.what()) + ")");
  }
  if (j.contains("generator") && j.at("generator").is_object()) {
    const auto& jg = j.at("generator");
    lib.generator.depth = jg.value("depth", 0);
    lib.generator.seconds = jg.value("seconds", 0.0);
    lib.generator.command = jg.value("command", "");
    for (const auto& t : jg.value("totals", json::array()))
      lib.generator.totals.push_back({t.value("stage", ""), t.value("count", int64_t{0})});
  }
  lib.reindex();
  return lib;
}

Expected<RuleLibrary> load_library(const std::string& path) {
  RLFLOW_TRY_STATUS(check_input_file(path, uint64_t{256} << 20));
  std::ifstream f(path);
  if (!f) return Error::bad_input(path + ": cannot open the rule file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_library(ss.str(), path);
}

// One rule per line: the file stays readable and greppable, diffs show whole rules, and two
// thousand rules take 2.5 MB instead of 5.7 MB pretty-printed.
std::string dump_library(const RuleLibrary& lib) {
  json head{{"format", kFormat}, {"version", lib.version}};
  if (!lib.generator.empty()) {
    json totals = json::array();
    for (const auto& [stage, n] : lib.generator.totals) totals.push_back({{"stage", stage}, {"count", n}});
    head["generator"] = {{"depth", lib.generator.depth}, {"seconds", lib.generator.seconds}, {"command", lib.generator.command},
                         {"totals", totals}};
  }
  std::string out = head.dump();
  out.pop_back();  // reopen the object to append the rules
  out += ",\n\"rules\": [\n";
  for (size_t i = 0; i < lib.rules.size(); ++i) out += dump_rule(lib.rules[i]).dump() + (i + 1 < lib.rules.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

Status save_library(const RuleLibrary& lib, const std::string& path) { return write_file_atomic(path, dump_library(lib)); }

std::string default_library_path() { return find_shipped("configs/rules/default.json", "RLFLOW_RULES"); }

}  // namespace rlflow::rules
