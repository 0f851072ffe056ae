#pragma once
// Searches made of searches. Each part is an Optimizer; the combined search shares one set of
// limits among its parts (each gets what the parts before it left of the budget and the time; the
// memory cap, which bounds one search's stored states, applies to each part alone) and reports
// every part as a Phase (Report::phases; a combined part contributes its own phases).
#include <memory>
#include <vector>

#include "rlflow/search/optimizer.h"

namespace rlflow::search {

// `first`, then `second` from first's best graph. The steps are first's then second's, so replay()
// on the input reproduces the best graph. The stop reason is first's unless `second` stopped at a
// limit, or did not run because first left no budget or time (its phase then says ran = false).
class Then : public Optimizer {
 public:
  Then(std::unique_ptr<Optimizer> first, std::unique_ptr<Optimizer> second);
  std::string name() const override;
  Expected<Result> run(const ir::Graph& g, const Limits& limits) override;

 private:
  std::unique_ptr<Optimizer> first_, second_;
};

// Every member from the input graph, in order, while the limits leave room; the cheapest result
// wins, a tie going to the earlier member (Phase::returned says which). The stop reason is the
// first member's unless a later one stopped at a limit or found none left.
class Portfolio : public Optimizer {
 public:
  explicit Portfolio(std::vector<std::unique_ptr<Optimizer>> members);
  std::string name() const override;
  Expected<Result> run(const ir::Graph& g, const Limits& limits) override;

 private:
  std::vector<std::unique_ptr<Optimizer>> members_;
};

}  // namespace rlflow::search
