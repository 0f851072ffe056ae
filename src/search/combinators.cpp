#include "rlflow/search/combinators.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

namespace rlflow::search {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Lower beyond rounding. Absolute, as the rl strategy's polish and fallback compared before they
// became combinators, so that the same graphs win.
bool cheaper(double a, double b) { return a < b - 1e-12; }

bool at_limit(StopReason s) { return s == StopReason::kBudget || s == StopReason::kTimeLimit || s == StopReason::kMemoryLimit; }

// What the parts so far left of the limits, or the limit that left nothing.
struct Left {
  Limits limits;
  std::optional<StopReason> none;
};
Left left_of(const Limits& limits, int64_t budget_used, double elapsed_s) {
  Left l{limits, std::nullopt};
  l.limits.budget = limits.budget - budget_used;
  if (limits.time_limit_s > 0) l.limits.time_limit_s = limits.time_limit_s - elapsed_s;
  if (l.limits.budget <= 0) l.none = StopReason::kBudget;
  else if (limits.time_limit_s > 0 && l.limits.time_limit_s <= 0) l.none = StopReason::kTimeLimit;
  return l;
}

// Counters that are totals add up over the parts; peaks take the largest, as the parts run one
// after another. The parts do not share their sets of seen graphs, so the largest unique_graphs
// is what can be claimed for the whole (a lower bound).
void accumulate(Report& into, const Report& r) {
  into.expanded += r.expanded;
  into.generated += r.generated;
  into.unique_graphs = std::max(into.unique_graphs, r.unique_graphs);
  into.pruned += r.pruned;
  into.rejected += r.rejected;
  for (size_t i = 0; i < into.rejections.size(); ++i) into.rejections[i] += r.rejections[i];
  into.peak_states = std::max(into.peak_states, r.peak_states);
  into.peak_state_bytes = std::max(into.peak_state_bytes, r.peak_state_bytes);
  into.seconds_match += r.seconds_match;
  into.seconds_apply += r.seconds_apply;
  into.seconds_cost += r.seconds_cost;
  into.agent_actions += r.agent_actions;
  into.budget_used += r.budget_used;
}

// A part's phases, numbered from `offset` in the combined list: a combined part's own, else one.
// Phases that started from the part's input start from `from` instead.
std::vector<Phase> phases_of(const Optimizer& part, const Result& r, double seconds, int offset, int from) {
  std::vector<Phase> ps = r.report.phases;
  if (ps.empty()) ps.push_back({part.name(), -1, true, true, r.initial_cost, r.best_cost, static_cast<int64_t>(r.steps.size()), seconds, r.stop});
  for (auto& p : ps) p.from = p.from < 0 ? from : p.from + offset;
  return ps;
}

Phase not_run(const Optimizer& part, int from, StopReason why) {
  Phase p;
  p.name = part.name();
  p.from = from;
  p.stop = why;
  return p;
}

void disown(std::vector<Phase>& ps, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) ps[i].returned = false;
}

// Forwards a part's progress as the combined search's: the parts before it added in, and the best
// cost the combination holds so far.
struct Forward {
  Optimizer& part;
  Forward(Optimizer& p, const Progress& outer, const Report& before, Clock::time_point t0, double best_before) : part(p) {
    if (!outer) return;
    part.set_progress([&outer, &before, t0, best_before](const Report& r, double best) {
      Report all = before;
      accumulate(all, r);
      all.seconds_total = since(t0);
      outer(all, std::min(best, best_before));
    });
  }
  ~Forward() { part.set_progress({}); }  // the lambda refers to the caller's frame
};

std::string joined(const std::string& kind, const std::vector<const Optimizer*>& parts) {
  std::string s = kind + "(";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i]->name();
  return s + ")";
}

}  // namespace

Then::Then(std::unique_ptr<Optimizer> first, std::unique_ptr<Optimizer> second) : first_(std::move(first)), second_(std::move(second)) {}

std::string Then::name() const { return joined("then", {first_.get(), second_.get()}); }

Expected<Result> Then::run(const ir::Graph& g, const Limits& limits) {
  const auto t0 = Clock::now();
  Result out;
  {
    const Report none;
    Forward fw(*first_, progress_, none, t0, std::numeric_limits<double>::infinity());
    auto ta = Clock::now();
    auto a = first_->run(g, limits);
    if (!a) return a.error();
    out = std::move(*a);
    out.report.phases = phases_of(*first_, out, since(ta), 0, -1);
  }
  auto& phases = out.report.phases;
  int start = -1;  // the phase whose graph `second` starts from: the one first returned
  for (size_t i = 0; i < phases.size(); ++i)
    if (phases[i].returned) start = static_cast<int>(i);
  const auto left = left_of(limits, out.report.budget_used, since(t0));
  if (left.none) {
    phases.push_back(not_run(*second_, start, *left.none));
    out.stop = *left.none;
  } else {
    Report before = out.report;
    before.phases.clear();
    Forward fw(*second_, progress_, before, t0, out.best_cost);
    auto tb = Clock::now();
    auto b = second_->run(out.best, left.limits);
    if (!b) return b.error();
    accumulate(out.report, b->report);
    auto ps = phases_of(*second_, *b, since(tb), static_cast<int>(phases.size()), start);
    disown(phases, 0, phases.size());
    phases.insert(phases.end(), ps.begin(), ps.end());
    // `second` started from first's best, so its best is never dearer; an equal one is first's graph.
    if (cheaper(b->best_cost, out.best_cost)) {
      out.best = std::move(b->best);
      out.best_cost = b->best_cost;
      out.steps.insert(out.steps.end(), b->steps.begin(), b->steps.end());
    }
    if (at_limit(b->stop)) out.stop = b->stop;
  }
  out.report.seconds_total = since(t0);
  return out;
}

Portfolio::Portfolio(std::vector<std::unique_ptr<Optimizer>> members) : members_(std::move(members)) {}

std::string Portfolio::name() const {
  std::vector<const Optimizer*> parts;
  for (const auto& m : members_) parts.push_back(m.get());
  return joined("portfolio", parts);
}

Expected<Result> Portfolio::run(const ir::Graph& g, const Limits& limits) {
  if (members_.empty()) return Error::internal("a portfolio of no searches");
  const auto t0 = Clock::now();
  Result out;
  std::vector<Phase> phases;
  size_t won_begin = 0, won_end = 0;  // the returning member's phases
  for (size_t k = 0; k < members_.size(); ++k) {
    auto& member = *members_[k];
    Limits lim = limits;
    if (k > 0) {
      const auto left = left_of(limits, out.report.budget_used, since(t0));
      if (left.none) {
        phases.push_back(not_run(member, -1, *left.none));
        out.stop = *left.none;
        continue;
      }
      lim = left.limits;
    }
    Expected<Result> r = Error::internal("unreached");
    const auto tm = Clock::now();
    {
      Forward fw(member, progress_, out.report, t0, k == 0 ? std::numeric_limits<double>::infinity() : out.best_cost);
      r = member.run(g, lim);
    }
    if (!r) return r.error();
    auto ps = phases_of(member, *r, since(tm), static_cast<int>(phases.size()), -1);
    const size_t begin = phases.size();
    phases.insert(phases.end(), ps.begin(), ps.end());
    accumulate(out.report, r->report);
    if (k == 0) {
      out.best = std::move(r->best);
      out.initial_cost = r->initial_cost;
      out.best_cost = r->best_cost;
      out.steps = std::move(r->steps);
      out.stop = r->stop;
      won_begin = begin, won_end = phases.size();
    } else {
      if (cheaper(r->best_cost, out.best_cost)) {
        disown(phases, won_begin, won_end);
        won_begin = begin, won_end = phases.size();
        out.best = std::move(r->best);
        out.best_cost = r->best_cost;
        out.steps = std::move(r->steps);
      } else {
        disown(phases, begin, phases.size());
      }
      if (at_limit(r->stop)) out.stop = r->stop;
    }
  }
  out.report.phases = std::move(phases);
  out.report.seconds_total = since(t0);
  return out;
}

}  // namespace rlflow::search
