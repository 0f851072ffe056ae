#include "rlflow/ir/dim_expr.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace rlflow::ir {

namespace {

// Recursive descent over: expr := term (('+'|'-') term)*; term := unary (('*'|'/'|'//'|'%') unary)*;
// unary := '-' unary | atom; atom := int | name | name '(' expr (',' expr)* ')' | '(' expr ')'.
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Expected<DimExpr> whole() {
    auto e = expr();
    if (!e) return e;
    skip();
    if (pos_ != s_.size()) return fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return e;
  }

 private:
  Error fail(const std::string& why) const { return Error::bad_input("dim '" + s_ + "': " + why); }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const char* tok) {
    skip();
    const std::string t(tok);
    if (s_.compare(pos_, t.size(), t) != 0) return false;
    pos_ += t.size();
    return true;
  }
  Expected<DimExpr> expr();
  Expected<DimExpr> term();
  Expected<DimExpr> unary();
  Expected<DimExpr> atom();

  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

// Builds the node for an operator; kept here so the parser can reach DimExpr's private fields.
struct DimExprBuilder {
  static DimExpr node(DimExpr::Kind k, std::vector<DimExpr> args) {
    DimExpr e;
    e.kind_ = k;
    for (auto& a : args) e.args_.push_back(std::make_shared<const DimExpr>(std::move(a)));
    return e;
  }
  static DimExpr as_ceil(const DimExpr& floor_div) {
    DimExpr e = floor_div;
    e.kind_ = DimExpr::Kind::kCeilDiv;
    return e;
  }
};

namespace {

Expected<DimExpr> Parser::expr() {
  if (++depth_ > 64) return fail("nested too deeply");
  auto lhs = term();
  if (!lhs) return lhs;
  for (;;) {
    DimExpr::Kind k;
    if (eat("+")) k = DimExpr::Kind::kAdd;
    else if (eat("-")) k = DimExpr::Kind::kSub;
    else break;
    auto rhs = term();
    if (!rhs) return rhs;
    lhs = DimExprBuilder::node(k, {std::move(*lhs), std::move(*rhs)});
  }
  --depth_;
  return lhs;
}

Expected<DimExpr> Parser::term() {
  auto lhs = unary();
  if (!lhs) return lhs;
  for (;;) {
    DimExpr::Kind k;
    if (eat("//")) k = DimExpr::Kind::kFloorDiv;
    else if (eat("/")) k = DimExpr::Kind::kFloorDiv;  // sizes are integers: an exact quotient or its floor
    else if (eat("*")) k = DimExpr::Kind::kMul;
    else if (eat("%")) k = DimExpr::Kind::kMod;
    else break;
    auto rhs = unary();
    if (!rhs) return rhs;
    lhs = DimExprBuilder::node(k, {std::move(*lhs), std::move(*rhs)});
  }
  return lhs;
}

Expected<DimExpr> Parser::unary() {
  if (eat("-")) {
    if (++depth_ > 64) return fail("nested too deeply");
    auto a = unary();
    --depth_;
    if (!a) return a;
    return DimExprBuilder::node(DimExpr::Kind::kSub, {DimExpr::constant(0), std::move(*a)});
  }
  return atom();
}

Expected<DimExpr> Parser::atom() {
  skip();
  if (pos_ >= s_.size()) return fail("ends early");
  const char c = s_[pos_];
  if (c == '(') {
    ++pos_;
    auto e = expr();
    if (!e) return e;
    if (!eat(")")) return fail("missing ')'");
    return e;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const int d = s_[pos_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return fail("number too large");
      v = v * 10 + d;
    }
    return DimExpr::constant(v);
  }
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.')) ++pos_;
    std::string name = s_.substr(start, pos_ - start);
    skip();
    if (pos_ < s_.size() && s_[pos_] == '(') {
      std::string fn = name;
      std::transform(fn.begin(), fn.end(), fn.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      ++pos_;
      std::vector<DimExpr> args;
      do {
        auto a = expr();
        if (!a) return a;
        args.push_back(std::move(*a));
      } while (eat(","));
      if (!eat(")")) return fail("missing ')' after the arguments of " + name);
      // floor/ceil of a quotient: the quotient rounded that way; of anything else: itself.
      if ((fn == "floor" || fn == "ceiling" || fn == "ceil") && args.size() == 1) {
        if (fn != "floor" && args[0].kind() == DimExpr::Kind::kFloorDiv) return DimExprBuilder::as_ceil(args[0]);
        return args[0];
      }
      if ((fn == "max" || fn == "min") && args.size() >= 2) {
        DimExpr acc = std::move(args[0]);
        for (size_t k = 1; k < args.size(); ++k)
          acc = DimExprBuilder::node(fn == "max" ? DimExpr::Kind::kMax : DimExpr::Kind::kMin, {std::move(acc), std::move(args[k])});
        return acc;
      }
      return fail("unknown function " + name);
    }
    return DimExpr::symbol(std::move(name));
  }
  return fail("unexpected '" + std::string(1, c) + "'");
}

}  // namespace

Expected<DimExpr> DimExpr::parse(const std::string& text) {
  Parser p(text);
  return p.whole();
}

DimExpr DimExpr::constant(int64_t v) {
  DimExpr e;
  e.kind_ = Kind::kConst;
  e.value_ = v;
  return e;
}

DimExpr DimExpr::symbol(std::string name) {
  DimExpr e;
  e.kind_ = Kind::kSymbol;
  e.name_ = std::move(name);
  return e;
}

std::set<std::string> DimExpr::symbols() const {
  std::set<std::string> out;
  if (kind_ == Kind::kSymbol) out.insert(name_);
  for (const auto& a : args_) {
    auto s = a->symbols();
    out.insert(s.begin(), s.end());
  }
  return out;
}

Expected<int64_t> DimExpr::eval(const std::map<std::string, int64_t>& binding) const {
  switch (kind_) {
    case Kind::kConst: return value_;
    case Kind::kSymbol: {
      auto it = binding.find(name_);
      if (it == binding.end()) return Error::bad_input("no size for dimension '" + name_ + "'");
      return it->second;
    }
    default: break;
  }
  auto a = args_[0]->eval(binding);
  if (!a) return a;
  auto b = args_[1]->eval(binding);
  if (!b) return b;
  const int64_t x = *a, y = *b;
  switch (kind_) {
    case Kind::kAdd: return x + y;
    case Kind::kSub: return x - y;
    case Kind::kMul: return x * y;
    case Kind::kFloorDiv:
    case Kind::kCeilDiv:
    case Kind::kMod: {
      if (y == 0) return Error::bad_input("dim '" + str() + "': division by zero");
      if (y == -1 && x == std::numeric_limits<int64_t>::min()) return Error::bad_input("dim '" + str() + "': overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // floor
      if (kind_ == Kind::kMod) return r;
      return kind_ == Kind::kCeilDiv && r != 0 ? q + 1 : q;
    }
    case Kind::kMax: return std::max(x, y);
    case Kind::kMin: return std::min(x, y);
    default: return Error::internal("dim expression kind");
  }
}

std::string DimExpr::str() const {
  switch (kind_) {
    case Kind::kConst: return std::to_string(value_);
    case Kind::kSymbol: return name_;
    case Kind::kMax: return "max(" + args_[0]->str() + ", " + args_[1]->str() + ")";
    case Kind::kMin: return "min(" + args_[0]->str() + ", " + args_[1]->str() + ")";
    case Kind::kCeilDiv: return "ceil(" + args_[0]->str() + " / " + args_[1]->str() + ")";
    default: break;
  }
  const char* op = kind_ == Kind::kAdd ? " + " : kind_ == Kind::kSub ? " - " : kind_ == Kind::kMul ? "*" : kind_ == Kind::kMod ? " % " : " // ";
  return "(" + args_[0]->str() + op + args_[1]->str() + ")";
}

SymbolRole symbol_role(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (n.find("past") != std::string::npos || n.find("cache") != std::string::npos) return SymbolRole::kPast;
  if (n.find("batch") != std::string::npos) return SymbolRole::kBatch;
  return SymbolRole::kOther;
}

int64_t symbol_min(const std::string& name) { return symbol_role(name) == SymbolRole::kPast ? 0 : 1; }

std::string Binding::str() const {
  std::string s = label + ":";
  for (const auto& [name, size] : sizes) s += " " + name + "=" + std::to_string(size);
  return s;
}

namespace {
int64_t odd_prime_at_least(int64_t x) {
  for (int64_t p = std::max<int64_t>(3, x | 1);; p += 2) {
    bool prime = true;
    for (int64_t d = 3; d * d <= p && prime; d += 2) prime = p % d != 0;
    if (prime) return p;
  }
}
}  // namespace

std::vector<Binding> verification_bindings(const std::map<std::string, int64_t>& representative,
                                           const std::map<std::string, int64_t>& minimum) {
  std::vector<Binding> out;
  if (representative.empty()) return out;
  Binding smallest{"smallest", {}}, primes{"odd primes", {}}, decode{"decode step", {}};
  static constexpr int64_t kOthers[] = {37, 29, 23, 31, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97};
  size_t next = 0;
  bool has_past = false;
  for (const auto& [name, size] : representative) {
    const auto role = symbol_role(name);
    has_past = has_past || role == SymbolRole::kPast;
    auto m = minimum.find(name);
    const int64_t least = std::max<int64_t>({1, symbol_min(name), m == minimum.end() ? 1 : m->second});
    smallest.sizes[name] = least;
    int64_t p = role == SymbolRole::kBatch ? 3 : role == SymbolRole::kPast ? 17 : kOthers[next++ % std::size(kOthers)];
    // A symbol with a minimum feeds a stack of strided windows, whose output length is a staircase of
    // it: at the minimum it is 1, so the prime goes to 3x the minimum, where it is several.
    if (m != minimum.end() && m->second > 1) p = odd_prime_at_least(3 * least);
    if (p == size) p = odd_prime_at_least(p + 2);  // never the representative size itself
    primes.sizes[name] = p;
    decode.sizes[name] = role == SymbolRole::kPast ? 29 : least;
  }
  for (auto* b : {&smallest, &primes, &decode}) {
    if (b == &decode && !has_past) continue;
    if (b->sizes == representative) continue;
    if (std::any_of(out.begin(), out.end(), [&](const Binding& o) { return o.sizes == b->sizes; })) continue;
    out.push_back(*b);
  }
  return out;
}

int short_binding(const std::vector<Binding>& bindings, const std::map<std::string, int64_t>& representative) {
  for (size_t k = 0; k < bindings.size(); ++k)
    if (bindings[k].label == "decode step") return static_cast<int>(k);
  bool sequence = false;
  for (const auto& [name, size] : representative) sequence = sequence || symbol_role(name) != SymbolRole::kBatch;
  for (size_t k = 0; k < bindings.size() && sequence; ++k)
    if (bindings[k].label == "smallest") return static_cast<int>(k);
  return -1;
}

}  // namespace rlflow::ir
