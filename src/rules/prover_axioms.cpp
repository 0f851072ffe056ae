// The prover's vocabulary (sorts and function symbols), and the loading of its axioms from
// configs/rules/axioms.smt2 (embedded in the binary by the build).
//
// Soundness argument (configs/rules/AXIOMS.md has the long form). Tensors are values with a shape;
// every axiom is an identity that holds, in real arithmetic, for all well-formed instances that
// satisfy its guard. The solver instantiates an axiom only where its pattern matches a term that
// already exists, and the guards are written so that the terms an instance creates are
// well-formed whenever the matched terms are (the rule's own source and target are well-formed:
// the matcher found the source in a valid graph and the applier type-checks the target). Shape
// axioms define shape(t) of every operator's output as a total function of its inputs' shapes.
// Integer lists (strides, pads, perms, shapes, split sizes) are the datatype L, so list literals
// compare by value.
#include <stdexcept>
#include <string>
#include <vector>

#include "prover_internal.h"
#include "rlflow/rules/prover.h"

namespace rlflow::rules::prover {

namespace {

struct FnSpec {
  const char* name;
  const char* domain;  // one letter per argument: T tensor, L list, I int, R real
  char range;
};

// Every uninterpreted function. Tensor operators mirror ir::OpKind (Conv without bias and
// activation; BiasAdd, ChMul and Act express the rest of ONNX Conv and BatchNorm).
const FnSpec kFunctions[] = {
    {"Conv", "TTLLLI", 'T'},      // conv(x, w, strides, pads, dilations, group)
    {"BiasAdd", "TT", 'T'},       // y + b[c] on axis 1 (b has shape [C])
    {"ChMul", "TT", 'T'},         // y * k[c] on axis 1 (k has shape [C])
    {"Act", "IT", 'T'},           // Conv's fused activation code applied to a tensor
    {"Relu", "T", 'T'},
    {"Sigmoid", "T", 'T'},
    {"Tanh", "T", 'T'},
    {"Erf", "T", 'T'},
    {"Sqrt", "T", 'T'},
    {"GAP", "T", 'T'},            // GlobalAveragePool
    {"Clip", "TRR", 'T'},
    {"SMul", "TR", 'T'},          // ScalarMul
    {"SVal", "T", 'R'},           // the value of a rank-0 tensor
    {"Cast", "TI", 'T'},
    {"Add", "TT", 'T'},
    {"Sub", "TT", 'T'},
    {"Mul", "TT", 'T'},
    {"Div", "TT", 'T'},
    {"Pow", "TT", 'T'},
    {"MatMul", "TT", 'T'},
    {"Concat", "TTI", 'T'},       // two inputs; n-ary Concat nests to the left
    {"Split", "TILI", 'T'},       // split(x, axis, sizes, k): output k
    {"Transpose", "TL", 'T'},
    {"Reshape", "TL", 'T'},
    {"Flatten", "TI", 'T'},
    {"Enlarge", "TL", 'T'},
    {"Const", "ILIR", 'T'},       // Constant(fill, shape, dtype, value)
    {"BatchNorm", "TTTTTR", 'T'}, // (x, scale, bias, mean, var, epsilon)
    {"Softmax", "TI", 'T'},
    {"LayerNorm", "TTIR", 'T'},
    {"LayerNorm3", "TTTIR", 'T'},
    {"RMSNorm", "TTIR", 'T'},      // (x, scale, axis, epsilon)
    {"Attention", "TTTIRII", 'T'},   // (q, k, v, is_causal, scale, q_num_heads, kv_num_heads)
    {"Attention4", "TTTTIRII", 'T'}, // the same with an attn_mask after v
    {"ReduceMean", "TLI", 'T'},
    {"MaxPool", "TLLLII", 'T'},   // (x, kernel, strides, pads, ceil_mode, count_include_pad)
    {"AvgPool", "TLLLII", 'T'},
    {"Pad", "TLIR", 'T'},
    {"Slice", "TLLLL", 'T'},
    {"Gather", "TTI", 'T'},
    {"Squeeze", "TL", 'T'},
    {"Unsqueeze", "TL", 'T'},
    // shapes and lists
    {"shape", "T", 'L'},
    {"len", "L", 'I'},
    {"nth", "LI", 'I'},
    {"permute", "LL", 'L'},       // permute(v, p)[i] = v[p[i]]
    {"iota", "I", 'L'},
    {"ones", "I", 'L'},
    {"zeros", "I", 'L'},
    {"lsum", "L", 'I'},
    {"lset", "LII", 'L'},         // the list with element i replaced
    {"lappend", "LL", 'L'},
    {"lindex", "LI", 'I'},        // position of a value in a list
    {"bshape", "LL", 'L'},        // numpy broadcast of two shapes
    {"convout", "IIIIII", 'I'},   // output extent of a sliding window
};

}  // namespace

// configs/rules/axioms.smt2, embedded by the build (prover_axioms_data.cpp is generated from it).
extern const char kAxiomsText[];

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

}  // namespace rlflow::rules::prover

namespace rlflow::rules {

AxiomFile parse_axiom_file(const std::string& text) {
  AxiomFile f;
  enum class Section { kHeader, kPreamble, kAxiom } at = Section::kHeader;
  bool in_why = false;
  int line_no = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("axioms.smt2 line " + std::to_string(line_no) + ": " + why);
  };
  auto finish = [&] {
    if (at != Section::kAxiom) return;
    auto& a = f.axioms.back();
    if (a.group.empty() || a.why.empty() || a.smt.empty()) fail("axiom '" + a.name + "' needs a group, a why and SMT-LIB text");
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    if (prover::starts_with(line, ";;")) {
      const std::string c = line.substr(2);
      const std::string t = prover::trim(c);
      if (t == "preamble") {
        if (at != Section::kHeader) fail("the preamble comes first");
        at = Section::kPreamble;
        in_why = false;
      } else if (prover::starts_with(t, "axiom:")) {
        finish();
        at = Section::kAxiom;
        AxiomInfo a;
        a.name = prover::trim(t.substr(6));
        if (a.name.empty()) fail("an axiom without a name");
        for (const auto& o : f.axioms)
          if (o.name == a.name) fail("axiom '" + a.name + "' is defined twice");
        f.axioms.push_back(std::move(a));
        in_why = false;
      } else if (at == Section::kAxiom && prover::starts_with(t, "group:")) {
        f.axioms.back().group = prover::trim(t.substr(6));
        in_why = false;
      } else if (at == Section::kAxiom && prover::starts_with(t, "why:")) {
        f.axioms.back().why = prover::trim(t.substr(4));
        in_why = true;
      } else if (in_why && prover::starts_with(c, "   ") && !t.empty()) {
        f.axioms.back().why += " " + t;  // a continuation line of the why
      } else {
        in_why = false;  // a comment
      }
      continue;
    }
    in_why = false;
    if (prover::trim(line).empty()) continue;
    if (at == Section::kHeader) fail("SMT-LIB text before the preamble");
    std::string& smt = at == Section::kPreamble ? f.preamble : f.axioms.back().smt;
    smt += line + "\n";
  }
  finish();
  return f;
}

}  // namespace rlflow::rules

namespace rlflow::rules::prover {

const AxiomFile& axiom_file() {
  static const AxiomFile f = parse_axiom_file(kAxiomsText);
  return f;
}

const std::vector<AxiomInfo>& axiom_table_impl() { return axiom_file().axioms; }

Signature::Signature(z3::context& c) : ctx_(c), T_(c.uninterpreted_sort("T")), L_(c) {
  Z3_func_decl nil, is_nil, cons, is_cons, head, tail;
  L_ = z3::sort(c, Z3_mk_list_sort(c, Z3_mk_string_symbol(c, "L"), c.int_sort(), &nil, &is_nil, &cons, &is_cons, &head, &tail));
  c.check_error();
  for (auto d : {nil, is_nil, cons, is_cons, head, tail}) keep_.emplace_back(c, d);
  nil_ = nil;
  cons_ = cons;
  for (const auto& f : kFunctions) {
    z3::sort_vector dom(c);
    auto sort_of = [&](char k) -> z3::sort {
      switch (k) {
        case 'T': return T_;
        case 'L': return L_;
        case 'I': return c.int_sort();
        default: return c.real_sort();
      }
    };
    for (const char* p = f.domain; *p; ++p) dom.push_back(sort_of(*p));
    fns_.emplace(f.name, c.function(f.name, dom, sort_of(f.range)));
  }
}

z3::func_decl Signature::fn(const std::string& name) const {
  auto it = fns_.find(name);
  if (it == fns_.end()) throw z3::exception(("prover: unknown function " + name).c_str());
  return it->second;
}

z3::expr Signature::apply(const std::string& name, const std::vector<z3::expr>& args) const {
  z3::expr_vector v(ctx_);
  for (const auto& a : args) v.push_back(a);
  return fn(name)(v);
}

z3::expr Signature::nil() const { return z3::expr(ctx_, Z3_mk_app(ctx_, nil_, 0, nullptr)); }

z3::expr Signature::cons(const z3::expr& head, const z3::expr& tail) const {
  Z3_ast args[2] = {head, tail};
  z3::expr e(ctx_, Z3_mk_app(ctx_, cons_, 2, args));
  ctx_.check_error();
  return e;
}

z3::expr Signature::list(const std::vector<z3::expr>& elems) const {
  z3::expr l = nil();
  for (size_t i = elems.size(); i-- > 0;) l = cons(elems[i], l);
  return l;
}

z3::expr_vector Signature::parse(const std::string& smt) const {
  std::vector<Z3_symbol> sort_names = {Z3_mk_string_symbol(ctx_, "T"), Z3_mk_string_symbol(ctx_, "L")};
  std::vector<Z3_sort> sorts = {T_, L_};
  std::vector<Z3_symbol> names;
  std::vector<Z3_func_decl> decls;
  for (const auto& [n, d] : fns_) {
    names.push_back(Z3_mk_string_symbol(ctx_, n.c_str()));
    decls.push_back(d);
  }
  const std::string text = axiom_file().preamble + smt;
  Z3_ast_vector v = Z3_parse_smtlib2_string(ctx_, text.c_str(), static_cast<unsigned>(sorts.size()), sort_names.data(), sorts.data(),
                                            static_cast<unsigned>(decls.size()), names.data(), decls.data());
  if (Z3_get_error_code(ctx_) != Z3_OK || v == nullptr)
    throw z3::exception((std::string("prover: cannot parse axiom: ") + Z3_get_error_msg(ctx_, Z3_get_error_code(ctx_)) + ": " + smt).c_str());
  return z3::expr_vector(ctx_, v);
}

z3::expr_vector axioms(const Signature& sig) {
  z3::expr_vector all(sig.ctx());
  for (const auto& a : axiom_table_impl()) {
    auto parsed = sig.parse(a.smt);
    for (unsigned i = 0; i < parsed.size(); ++i) all.push_back(parsed[i]);
  }
  return all;
}

}  // namespace rlflow::rules::prover

namespace rlflow::rules {

const std::vector<AxiomInfo>& prover_axioms() { return prover::axiom_table_impl(); }

}  // namespace rlflow::rules
