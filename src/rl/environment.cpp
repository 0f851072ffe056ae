#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "rlflow/cost/memo.h"
#include "rlflow/rl/environment.h"
#include "rlflow/rules/match.h"

namespace rlflow::rl {

namespace {

class LockedCostModel : public cost::ForwardingCostModel {
 public:
  using ForwardingCostModel::ForwardingCostModel;
  Expected<double> op_cost(const cost::OpSignature& sig) override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner().op_cost(sig);
  }

 private:
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<cost::CostModel> locked_cost_model(cost::CostModel& inner) { return std::make_unique<LockedCostModel>(inner); }

struct GraphEnv::Impl {
  ir::Graph initial, current, best;
  std::vector<const rules::Rule*> rules;
  cost::MemoCost coster;
  EnvConfig cfg;
  double cost0 = 0, cost = 0, best_cost = 0;
  int t = 0;
  bool started = false;
  std::vector<rules::Match> steps, best_steps;
  Observation obs;
  double step_seconds = 0;
  int64_t step_count = 0;
  std::unordered_set<uint64_t> seen;  // with cfg.count_distinct_graphs: hashes of every graph visited
  // The index of `current` that observe() matched on; step() applies the chosen match with it.
  std::optional<rules::GraphIndex> index;

  void saw_current() {
    if (cfg.count_distinct_graphs) seen.insert(current.hash());
  }

  Impl(ir::Graph g, std::vector<const rules::Rule*> r, cost::CostModel& m, EnvConfig c)
      : initial(std::move(g)), rules(std::move(r)), coster(m), cfg(std::move(c)) {}

  // Costs the current graph and finds every rule's matches once: they serve both the masks and
  // the step that follows.
  Status observe() {
    index.reset();  // `current` changed: the old index is stale until rebuilt below
    std::vector<double> per_node;
    auto c = coster.node_costs(current, per_node);
    if (!c) return c.error();
    cost = *c;
    const size_t N = rules.size();
    Observation o;
    o.xfer_mask.assign(N + 1, 0);
    o.locations.resize(N);
    o.location_valid.resize(N);
    index.emplace(current);
    rules::MatchOptions mo;
    mo.max_matches = cfg.max_locations;
    for (size_t x = 0; x < N; ++x) {
      o.locations[x] = rules::find_matches(*index, *rules[x], mo);
      o.location_valid[x].assign(o.locations[x].size(), 1);
      o.xfer_mask[x] = o.locations[x].empty() ? 0 : 1;
    }
    o.xfer_mask[N] = 1;
    o.graph = std::make_shared<GraphFeatures>(
        featurize(current, per_node, cost, cost0, cfg.max_steps > 0 ? static_cast<double>(t) / cfg.max_steps : 0.0));
    obs = std::move(o);
    return {};
  }

  bool only_noop() const {
    for (size_t x = 0; x + 1 < obs.xfer_mask.size(); ++x)
      if (obs.xfer_mask[x]) return false;
    return true;
  }
};

GraphEnv::GraphEnv(ir::Graph g, std::vector<const rules::Rule*> rules, cost::CostModel& model, EnvConfig cfg)
    : impl_(std::make_unique<Impl>(std::move(g), std::move(rules), model, std::move(cfg))) {}
GraphEnv::~GraphEnv() = default;

int GraphEnv::num_xfers() const { return static_cast<int>(impl_->rules.size()); }
size_t GraphEnv::max_locations() const { return impl_->cfg.max_locations; }
const ir::Graph& GraphEnv::graph() const { return impl_->current; }
const ir::Graph& GraphEnv::best_graph() const { return impl_->best; }
double GraphEnv::best_cost() const { return impl_->best_cost; }
double GraphEnv::initial_cost() const { return impl_->cost0; }
const std::vector<rules::Match>& GraphEnv::steps() const { return impl_->steps; }
const std::vector<rules::Match>& GraphEnv::best_steps() const { return impl_->best_steps; }
double GraphEnv::total_step_seconds() const { return impl_->step_seconds; }
int64_t GraphEnv::total_steps() const { return impl_->step_count; }
int64_t GraphEnv::distinct_graphs() const { return static_cast<int64_t>(impl_->seen.size()); }
void GraphEnv::count_graph(const ir::Graph& g) {
  if (impl_->cfg.count_distinct_graphs) impl_->seen.insert(g.hash());
}

Expected<Observation> GraphEnv::reset() {
  auto& s = *impl_;
  s.current = s.initial;
  s.t = 0;
  s.steps.clear();
  s.best_steps.clear();
  auto c = s.coster.cost(s.current);
  if (!c) return c.error();
  s.cost0 = *c;
  if (auto st = s.observe(); !st.ok()) return st.error();
  s.best = s.current;
  s.best_cost = s.cost;
  s.started = true;
  s.saw_current();
  return s.obs;
}

Expected<Observation> GraphEnv::reset_to(const ir::Graph& g, double cost0, std::vector<rules::Match> steps) {
  auto& s = *impl_;
  s.current = g;
  s.cost0 = cost0;
  s.t = static_cast<int>(steps.size());
  s.steps = std::move(steps);
  if (auto st = s.observe(); !st.ok()) return st.error();
  s.best = s.current;
  s.best_cost = s.cost;
  s.best_steps = s.steps;
  s.started = true;
  s.saw_current();
  return s.obs;
}

Expected<Step> GraphEnv::step(const Action& a) {
  auto& s = *impl_;
  if (!s.started) return Error::internal("GraphEnv::step before reset");
  if (!s.obs.valid(a.xfer, a.location))
    return Error::internal("invalid action (xfer " + std::to_string(a.xfer) + ", location " + std::to_string(a.location) +
                           "): masked out");
  const auto t0 = std::chrono::steady_clock::now();
  const int N = num_xfers();
  Step out;
  const double prev = s.cost;
  bool done = false;
  if (a.xfer == N) {
    done = true;
  } else {
    const auto& m = s.obs.locations[static_cast<size_t>(a.xfer)][static_cast<size_t>(a.location)];
    rules::Rejection why = rules::Rejection::kNone;
    if (!s.index) return Error::internal("step after a failed observation");
    auto next = rules::apply(*s.index, *s.rules[static_cast<size_t>(a.xfer)], m, &why);
    ++s.t;
    if (!next) {
      // A match the matcher accepted but apply() refused (a cycle, a shape conflict): the state
      // stays, and that location is masked from now on.
      out.info.rejected = true;
      out.info.rejection = why;
      auto& v = s.obs.location_valid[static_cast<size_t>(a.xfer)];
      v[static_cast<size_t>(a.location)] = 0;
      bool any = false;
      for (auto b : v) any = any || b;
      s.obs.xfer_mask[static_cast<size_t>(a.xfer)] = any ? 1 : 0;
    } else {
      s.current = std::move(*next);
      s.saw_current();
      s.steps.push_back(m);
      out.info.rule = m.rule;
      if (auto st = s.observe(); !st.ok()) return st.error();
      if (s.cost < s.best_cost - 1e-12) {
        s.best_cost = s.cost;
        s.best = s.current;
        s.best_steps = s.steps;
      }
    }
    done = s.t >= s.cfg.max_steps || s.only_noop();
  }
  const double c0 = s.cost0 > 0 ? s.cost0 : 1.0;
  if (s.cfg.reward == "final") out.reward = done ? s.cfg.reward_scale * (s.cost0 - s.cost) / c0 : 0.0;
  else out.reward = s.cfg.reward_scale * (prev - s.cost) / c0;
  out.done = done;
  out.observation = s.obs;
  out.info.cost = s.cost;
  out.info.initial_cost = s.cost0;
  out.info.best_cost = s.best_cost;
  out.info.improvement = (s.cost0 - s.cost) / c0;
  out.info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.step_seconds += out.info.seconds;
  ++s.step_count;
  if (done) s.started = false;
  return out;
}

}  // namespace rlflow::rl
