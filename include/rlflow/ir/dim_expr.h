#pragma once
// A symbolic dimension as exporters write it in a dim_param: a name ("batch", "s0") or an integer
// expression over names ("past_sequence_length + sequence_length", "2*s0", "s1 - 1",
// "floor(s0/2)"). Import binds each name to a size and evaluates the expression, so the inputs of a
// KV-cache decoder agree with each other (the mask spans past + sequence) at every binding.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow::ir {

struct DimExprBuilder;

class DimExpr {
 public:
  enum class Kind : uint8_t { kConst, kSymbol, kAdd, kSub, kMul, kFloorDiv, kCeilDiv, kMod, kMax, kMin };

  // Parses a dim_param. A string that is not an expression of names, integers, + - * / // %,
  // parentheses and floor/ceil/max/min is an error (the caller then treats it as one opaque name).
  static Expected<DimExpr> parse(const std::string& text);
  static DimExpr constant(int64_t v);
  static DimExpr symbol(std::string name);

  Kind kind() const { return kind_; }
  bool is_symbol() const { return kind_ == Kind::kSymbol; }
  const std::string& name() const { return name_; }
  // Every name the expression reads.
  std::set<std::string> symbols() const;
  // The size at a binding; an error names a symbol the binding lacks, or a division by zero.
  Expected<int64_t> eval(const std::map<std::string, int64_t>& binding) const;
  std::string str() const;

 private:
  friend struct DimExprBuilder;
  Kind kind_ = Kind::kConst;
  int64_t value_ = 0;
  std::string name_;
  std::vector<std::shared_ptr<const DimExpr>> args_;
};

// What a symbol stands for, from its name: the smallest size it may take and the role it plays in
// the bindings verification runs at.
enum class SymbolRole : uint8_t { kBatch, kPast, kOther };
SymbolRole symbol_role(const std::string& name);
int64_t symbol_min(const std::string& name);

// Sizes for every symbol of a model, named for reports ("odd primes: batch=3 sequence=37").
struct Binding {
  std::string label;
  std::map<std::string, int64_t> sizes;
  std::string str() const;
};

// The bindings a dynamic model is verified at besides its representative one, chosen so that no
// product or sum of sizes coincides with the representative's by accident: every symbol at its
// smallest, distinct odd primes (batch 3, a past length 17, others 37, 29, 23, ...), and where the
// model has a past length, a decode step (batch 1, every other length 1, past 29). rlflow does not
// run empty tensors, so a past length is 1 at its smallest. Bindings equal to the representative
// or to an earlier one are left out. `minimum` raises a symbol's smallest size where the model needs
// more (a conv stack over raw audio); its prime is then the first odd prime from 3x that on, so the
// stack's output length differs between the bindings.
std::vector<Binding> verification_bindings(const std::map<std::string, int64_t>& representative,
                                           const std::map<std::string, int64_t>& minimum = {});

// The short binding a model is measured at beside its representative one (optimise's gate,
// `rlflow compare`): among `bindings` (from verification_bindings), a KV-cache decoder's decode step,
// else, for a model with a symbolic sequence (any symbol but a batch one), its smallest sizes; -1
// when it has neither.
int short_binding(const std::vector<Binding>& bindings, const std::map<std::string, int64_t>& representative);

}  // namespace rlflow::ir
