// The generator's pipeline: enumerate, pair, direct, deduplicate, convert, verify, prune.
#include "rlflow/rules/generator.h"

#include <chrono>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_set>

#include "rlflow/rules/match.h"
#include "rlflow/rules/verify.h"
#include "rlflow/util/hash.h"

namespace rlflow::rules::gen {

using ir::OpKind;

namespace {

std::string short_kind(OpKind k) {
  switch (k) {
    case OpKind::kConv: return "conv";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kAdd: return "add";
    case OpKind::kMul: return "mul";
    case OpKind::kRelu: return "relu";
    case OpKind::kScalarMul: return "scale";
    case OpKind::kMaxPool: return "maxpool";
    case OpKind::kAveragePool: return "avgpool";
    case OpKind::kConcat: return "concat";
    case OpKind::kSplit: return "split";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kEnlarge: return "enlarge";
    case OpKind::kConstant: return "const";
    case OpKind::kBatchNorm: return "bn";
    default:  // ops outside the generator's set keep their IR name
      break;
  }
  return std::string(ir::op_name(k));
}

std::string rule_name(const Directed& d, const std::string& key, std::set<std::string>* taken) {
  std::string base = "gen";
  for (const auto& n : d.source.nodes) base += "_" + short_kind(n.kind);
  base += "__";
  if (d.target.nodes.empty()) base += "id";
  for (size_t i = 0; i < d.target.nodes.size(); ++i) base += (i ? "_" : "") + short_kind(d.target.nodes[i].kind);
  const uint64_t h = Hasher(0x6e).add(key).digest();
  for (int len = 6; len <= 16; ++len) {
    std::ostringstream os;
    os << std::hex << h;
    std::string hex = os.str();
    hex.insert(0, 16 - hex.size(), '0');
    std::string name = base + "_" + hex.substr(0, static_cast<size_t>(len));
    if (taken->insert(name).second) return name;
  }
  std::string name = base + "_" + std::to_string(taken->size());
  taken->insert(name);
  return name;
}

bool has_any(const Directed& d, std::initializer_list<OpKind> kinds) {
  for (const GGraph* g : {&d.source, &d.target})
    for (const auto& n : g->nodes)
      for (auto k : kinds)
        if (n.kind == k) return true;
  return false;
}

}  // namespace

GeneratorResult generate(const GeneratorOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto worlds = o.worlds.empty() ? default_worlds() : o.worlds;
  GeneratorResult res;
  int64_t enumerated = 0, fingerprinted = 0, distinct_fps = 0, pairs_total = 0, no_common = 0, directed = 0, unique = 0,
          shaped = 0, verified = 0, shipped = 0, groups_total = 0, no_context = 0, redundant = 0;
  std::map<std::string, int64_t> dropped;
  std::set<std::string> names;
  std::vector<Rule> candidates;  // verified, before pruning by derivation
  std::map<std::string, double> phase;
  auto progress = [&](const std::string& stage, size_t done, size_t total) {
    if (o.progress) o.progress(stage, done, total);
  };

  for (const auto& w : worlds) {
    EnumOptions eo;
    eo.depth = o.depth;
    eo.seed = o.seed;
    eo.progress = [&](size_t n) { progress("enumerating " + w.name, n, 0); };
    auto te = clock::now();
    Enumeration e = enumerate(w, eo);
    phase["enumerating and fingerprinting"] += std::chrono::duration<double>(clock::now() - te).count();
    te = clock::now();
    enumerated += static_cast<int64_t>(e.enumerated);
    redundant += static_cast<int64_t>(e.redundant);
    fingerprinted += static_cast<int64_t>(e.size());
    {
      std::unordered_set<uint64_t> fps;
      for (size_t i = 0; i < e.size(); ++i) fps.insert(e.fingerprint(i));
      distinct_fps += static_cast<int64_t>(fps.size());
    }
    size_t groups = 0;
    const auto pairs = candidate_pairs(e, o.max_group, &groups);
    groups_total += static_cast<int64_t>(groups);
    pairs_total += static_cast<int64_t>(pairs.size());
    std::unordered_set<std::string> keys;
    for (size_t pi = 0; pi < pairs.size(); ++pi) {
      if ((pi & 63) == 0) progress("checking " + w.name + " pairs", pi, pairs.size());
      const GGraph a = e.graph(pairs[pi].first), b = e.graph(pairs[pi].second);
      if (share_common_subgraph(w, a, b)) continue;
      ++no_common;
      if (share_common_context(w, a, b, o.seed)) continue;
      ++no_context;
      auto map = match_outputs(w, a, b, o.seed);
      if (!map) {
        ++dropped["outputs do not correspond"];
        continue;
      }
      for (auto& d : directions(w, a, b, *map)) {
        ++directed;
        const std::string key = canonical_key(w, d);
        if (!keys.insert(key).second) continue;
        ++unique;
        // Most general first: parameters and scalars as variables; fall back to literals when
        // the executor disagrees (an identity that needs 'same' padding, a positive scale...).
        std::optional<Rule> rule;
        std::string why;
        bool converted = false;
        const bool has_params = has_any(d, {OpKind::kConv, OpKind::kMaxPool, OpKind::kAveragePool});
        const bool has_scalar = has_any(d, {OpKind::kScalarMul});
        for (int variant = 0; variant < 4 && !rule; ++variant) {
          ConvertOptions co;
          co.seed = o.seed + unique;
          co.general_params = !(variant & 2);
          co.general_scalars = !(variant & 1);
          if ((!has_params && !co.general_params) || (!has_scalar && !co.general_scalars)) continue;
          auto cand = to_rule(w, d, co);
          if (!cand) {
            if (why.empty()) why = cand.error().message;
            continue;
          }
          converted = true;
          for (const auto& grp : source_symmetries(w, d)) {
            std::vector<std::string> g;
            for (int n : grp) g.push_back("s" + std::to_string(n));
            cand->symmetric.push_back(g);
          }
          if (verify_numerically(*cand).ok) rule = std::move(*cand);
        }
        if (!converted) {
          ++dropped[why];
          continue;
        }
        ++shaped;
        if (!rule) {
          ++dropped["numeric verification failed"];
          continue;
        }
        ++verified;
        rule->status = VerifyStatus::kNumeric;
        std::vector<int> src_outs, tgt_outs;
        for (const auto& [s, t] : d.outputs) {
          src_outs.push_back(s);
          tgt_outs.push_back(t);
        }
        rule->name = rule_name(d, key, &names);
        rule->description = describe(w, d.source, src_outs) + "  =>  " + describe(w, d.target, tgt_outs);
        const bool general = rule->instances.front().ints.count("$cs") || rule->instances.front().ints.count("$pk");
        rule->condition_note = "generated in the " + w.name + " world at depth " + std::to_string(o.depth) +
                               (general ? ": any conv/pool strides and pads (checked on five configurations), kernels of one size"
                                        : ": only for the sizes the conditions pin (kernel sizes, 'same' stride-1 conv and pool)");
        candidates.push_back(std::move(*rule));
      }
    }
    progress("checking " + w.name + " pairs", pairs.size(), pairs.size());
    phase["pairing, converting and verifying"] += std::chrono::duration<double>(clock::now() - te).count();
  }
  const auto tp = clock::now();
  // Pruning by derivation, smallest rules first: a rule that one hand-written rule gives is a
  // duplicate; one that at most derivation_steps accepted rules give is a composition.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Rule& a, const Rule& b) {
    const size_t sa = a.source.nodes.size() + a.target.nodes.size(), sb = b.source.nodes.size() + b.target.nodes.size();
    if (sa != sb) return sa < sb;
    return a.source.nodes.size() < b.source.nodes.size();
  });
  RuleBase library, accepted;
  for (const Rule* r : o.existing) {
    library.add(std::make_shared<Rule>(*r));
    accepted.add(std::make_shared<Rule>(*r));
  }
  int64_t not_in_library = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if ((i & 15) == 0) progress("pruning derivable rules", i, candidates.size());
    auto& r = candidates[i];
    if (library.derives(r, 1)) {
      ++dropped["duplicate of a library rule"];
      continue;
    }
    ++not_in_library;
    if (accepted.derives(r, o.derivation_steps)) {
      ++dropped["derivable from smaller rules"];
      continue;
    }
    ++shipped;
    accepted.add(std::make_shared<Rule>(r));
    res.rules.push_back(std::move(r));
  }
  progress("pruning derivable rules", candidates.size(), candidates.size());
  phase["pruning derivable rules"] = std::chrono::duration<double>(clock::now() - tp).count();
  for (const auto& [k, v] : phase) res.seconds.push_back({k, v});

  res.info.depth = o.depth;
  res.info.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  res.info.totals = {{"enumerated graphs", enumerated},
                     {"skipped as redundant", redundant},
                     {"fingerprinted graphs", fingerprinted},
                     {"distinct fingerprints", distinct_fps},
                     {"fingerprint groups", groups_total},
                     {"candidate pairs", pairs_total},
                     {"without a common subgraph", no_common},
                     {"without a common context", no_context},
                     {"directed candidates", directed},
                     {"distinct up to renaming", unique},
                     {"shape-generalised", shaped},
                     {"numerically verified", verified},
                     {"not already in the library", not_in_library},
                     {"not derivable from others", shipped},
                     {"shipped", shipped}};
  for (const auto& [why, n] : dropped) res.dropped.push_back({why, n});
  return res;
}

namespace {

// Runtime ops of a pattern (ops reading an activation) and whether every op does.
std::pair<int, bool> runtime_of(const Rule& r, const Pattern& p) {
  std::set<std::string> constant;
  for (const auto& [v, spec] : r.vars)
    if (spec.constant) constant.insert(v);
  int runtime = 0;
  bool all = true;
  for (const auto& n : p.nodes) {
    bool c = true;
    for (const auto& in : n.inputs) c = c && constant.count(in.substr(0, in.find(':')));
    if (c) {
      constant.insert(n.id);
      all = false;
    } else {
      ++runtime;
    }
  }
  return {runtime, all};
}

}  // namespace

bool simplifies(const Rule& r) {
  const auto [src, src_all_runtime] = runtime_of(r, r.source);
  const auto [tgt, unused] = runtime_of(r, r.target);
  for (const auto& n : r.target.nodes)
    if (n.kind == OpKind::kConstant) return false;
  return src_all_runtime && tgt < src;
}

size_t mark_default_set(std::vector<Rule>* rules, const std::vector<ir::Graph>& graphs) {
  size_t n = 0;
  MatchOptions one;
  one.max_matches = 1;
  for (auto& r : *rules) {
    r.in_default_set = simplifies(r);
    for (size_t g = 0; g < graphs.size() && !r.in_default_set; ++g) r.in_default_set = !find_matches(graphs[g], r, one).empty();
    n += r.in_default_set;
  }
  return n;
}

void merge_generated(RuleLibrary* lib, std::vector<Rule> rules, const GeneratorInfo& info) {
  std::vector<Rule> kept;
  for (auto& r : lib->rules)
    if (r.provenance != "generated") kept.push_back(std::move(r));
  for (auto& r : rules) kept.push_back(std::move(r));
  lib->rules = std::move(kept);
  lib->generator = info;
  lib->reindex();
}

}  // namespace rlflow::rules::gen
