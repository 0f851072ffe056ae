#include "engine.h"

#include <algorithm>

namespace rlflow::search::detail {

namespace {

// Rough bytes a graph occupies beyond its shared weights: what holding one more state's graph
// costs against Limits::memory_bytes.
int64_t approx_graph_bytes(const ir::Graph& g) {
  // Heap blocks carry ~16 bytes of allocator overhead each; parameters hold a few small vectors.
  constexpr int64_t kBlock = 16, kParams = 160;
  int64_t bytes = static_cast<int64_t>(sizeof(ir::Graph));
  for (const auto& n : g.nodes()) {
    bytes += static_cast<int64_t>(sizeof(ir::Node)) + kParams;
    bytes += static_cast<int64_t>(n.inputs.size() * sizeof(ir::ValueRef)) + kBlock;
    bytes += static_cast<int64_t>(n.outputs.size() * sizeof(ir::TensorType)) + kBlock;
    for (const auto& t : n.outputs) bytes += static_cast<int64_t>(t.shape.size() * 8) + kBlock;
    if (n.name.size() > 15) bytes += static_cast<int64_t>(n.name.size()) + kBlock;
    for (const auto& s : n.output_names) bytes += static_cast<int64_t>(sizeof(std::string) + (s.size() > 15 ? s.size() + kBlock : 0));
  }
  return bytes;
}

}  // namespace

Engine::Engine(const std::vector<const rules::Rule*>& rules, cost::CostModel& model, const Limits& limits, const Progress& progress)
    : rules_(rules), coster_(model), limits_(limits), progress_(progress), t0_(Clock::now()) {}

bool Engine::out_of_time() const { return limits_.time_limit_s > 0 && since(t0_) > limits_.time_limit_s; }

Expected<double> Engine::cost(const ir::Graph& g) {
  auto tc = Clock::now();
  auto c = coster_.cost(g);
  report_.seconds_cost += since(tc);
  return c;
}

Expected<std::shared_ptr<const ir::Graph>> Engine::materialize(int s) {
  if (states_[static_cast<size_t>(s)].graph) return states_[static_cast<size_t>(s)].graph;
  std::vector<int> chain;
  int a = s;
  while (!states_[static_cast<size_t>(a)].graph) {
    chain.push_back(a);
    a = states_[static_cast<size_t>(a)].parent;
  }
  auto g = states_[static_cast<size_t>(a)].graph;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const auto& st = states_[static_cast<size_t>(*it)];
    auto next = rules::apply(*g, *rules_[static_cast<size_t>(st.rule)], st.match);
    if (!next) return next.error().with_context("replaying a search state");
    g = std::make_shared<const ir::Graph>(std::move(*next));
  }
  return g;
}

int Engine::add_state(State st) {
  delta_bytes_ += static_cast<int64_t>(sizeof(State) + st.match.nodes.size() * sizeof(ir::NodeId) + st.match.rule.capacity());
  seen_.insert(st.hash);
  states_.push_back(std::move(st));
  report_.unique_graphs = static_cast<int64_t>(states_.size());
  note_memory();
  return static_cast<int>(states_.size()) - 1;
}

void Engine::hold(int s, std::shared_ptr<const ir::Graph> g) {
  if (states_[static_cast<size_t>(s)].graph) return;
  held_bytes_ += approx_graph_bytes(*g);
  states_[static_cast<size_t>(s)].graph = std::move(g);
  held_order_.push_back(s);
  note_memory();
  fit_memory();
}

bool Engine::fit_memory() {
  while (over_memory() && !held_order_.empty()) {
    const int old = held_order_.front();
    held_order_.pop_front();
    release(old);
  }
  return !over_memory();
}

void Engine::release(int s) {
  auto& g = states_[static_cast<size_t>(s)].graph;
  if (s == 0 || !g) return;  // the root stays: every replay starts there
  held_bytes_ -= approx_graph_bytes(*g);
  g.reset();
}

Expected<Result> Engine::finish(int best, StopReason stop) {
  Result r;
  auto g = materialize(best);
  if (!g) return g.error().with_context("rebuilding the best graph");
  r.best = **g;
  r.initial_cost = states_[0].cost;
  r.best_cost = states_[static_cast<size_t>(best)].cost;
  for (int s = best; s > 0; s = states_[static_cast<size_t>(s)].parent) r.steps.push_back(states_[static_cast<size_t>(s)].match);
  std::reverse(r.steps.begin(), r.steps.end());
  r.stop = stop;
  report_.seconds_total = since(t0_);
  r.report = report_;
  if (progress_) progress_(report_, r.best_cost);  // the last word: what the search ended with
  return r;
}

void Engine::tick(double best_cost) {
  if (progress_ && since(last_tick_) > 0.2) {
    last_tick_ = Clock::now();
    report_.seconds_total = since(t0_);
    progress_(report_, best_cost);
  }
}

}  // namespace rlflow::search::detail
