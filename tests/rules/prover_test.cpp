// The Z3 prover: shipped rules it must prove, false rules it must not, the timeout, the axiom table.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "rlflow/rules/library_io.h"
#include "rlflow/rules/prover.h"

using namespace rlflow;

namespace {

const rules::RuleLibrary& shipped() {
  static rules::RuleLibrary lib = [] {
    auto l = rules::load_library(RLFLOW_SOURCE_DIR "/configs/rules/default.json");
    if (!l) throw std::runtime_error(l.error().message);
    return std::move(*l);
  }();
  return lib;
}

const rules::Rule& shipped_rule(const std::string& name) {
  auto* r = shipped().find(name);
  if (!r) throw std::runtime_error("no rule " + name);
  return *r;
}

// One rule from a JSON rule object (instances are irrelevant to proofs but the loader wants them).
rules::Rule parse_rule(const std::string& rule_json) {
  auto lib = rules::parse_library(R"({"format": "rlflow-rules", "version": 1, "rules": [)" + rule_json + "]}", "test");
  if (!lib) throw std::runtime_error(lib.error().message);
  return lib->rules.at(0);
}

rules::ProofOptions fast() {
  rules::ProofOptions o;
  o.timeout_s = 10;
  return o;
}

std::string explain(const rules::ProofResult& p) {
  std::ostringstream os;
  os << p.rule << ": " << rules::outcome_name(p.outcome) << " in " << p.seconds << "s: " << p.message;
  for (const auto& n : p.notes) os << "\n  note: " << n;
  return os.str();
}

}  // namespace

TEST(Prover, AxiomTableIsWellFormed) {
  const auto& ax = rules::prover_axioms();
  EXPECT_GE(ax.size(), 44u);
  std::set<std::string> names;
  for (const auto& a : ax) {
    EXPECT_TRUE(names.insert(a.name).second) << "duplicate axiom " << a.name;
    EXPECT_FALSE(a.why.empty()) << a.name;
    EXPECT_FALSE(a.group.empty()) << a.name;
  }
}

TEST(Prover, EveryAxiomIsDocumented) {
  std::ifstream in(RLFLOW_SOURCE_DIR "/configs/rules/AXIOMS.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const auto& a : rules::prover_axioms()) EXPECT_NE(doc.find("`" + a.name + "`"), std::string::npos) << a.name << " is not in AXIOMS.md";
}

TEST(Prover, ProvesShippedRules) {
  for (const char* name : {"conv_relu_fuse", "relu_relu_fuse", "transpose_transpose_fuse", "merge_parallel_matmul", "merge_parallel_conv"}) {
    auto p = rules::prove_rule(shipped_rule(name), fast());
    EXPECT_TRUE(p.proved()) << explain(p);
  }
}

TEST(Prover, DoesNotProveFalseRules) {
  // sigmoid is not tanh
  auto r = shipped_rule("conv_sigmoid_fuse");
  r.name = "conv_sigmoid_as_tanh";
  r.target.nodes[0].params["act"] = rules::Expr::Ints({3});
  auto p = rules::prove_rule(r, fast());
  EXPECT_FALSE(p.proved()) << explain(p);
  EXPECT_NE(p.outcome, rules::ProofOutcome::kError) << explain(p);
}

// The proof in a child process gives the in-process result (outcome and notes), and it is stopped
// at the timeout plus the grace even where Z3 itself overruns its timeout: this generated rule
// (a constant kernel through two transposes) kept Z3 busy 50-60 s past a 3 s timeout in process.
TEST(Prover, IsolatedProofsMatchAndStopAtTheirTimeout) {
  for (const char* name : {"conv_relu_fuse", "transpose_transpose_fuse"}) {
    auto in = rules::prove_rule(shipped_rule(name), fast());
    auto out = rules::prove_rule_isolated(shipped_rule(name), fast());
    EXPECT_EQ(out.outcome, in.outcome) << explain(out);
    EXPECT_EQ(out.notes, in.notes);
    EXPECT_EQ(out.rule, name);
  }
  auto r = shipped_rule("conv_sigmoid_fuse");
  r.target.nodes[0].params["act"] = rules::Expr::Ints({3});
  rules::ProofOptions short_timeout;
  short_timeout.timeout_s = 3;
  auto false_rule = rules::prove_rule_isolated(r, short_timeout);
  EXPECT_FALSE(false_rule.proved()) << explain(false_rule);
  EXPECT_NE(false_rule.outcome, rules::ProofOutcome::kError) << explain(false_rule);
  if (const auto* slow = shipped().find("gen_transpose_transpose__const_conv_68903f")) {
    rules::ProofOptions o;
    o.timeout_s = 1;
    const auto t0 = std::chrono::steady_clock::now();
    auto p = rules::prove_rule_isolated(*slow, o, 1.0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 2.5) << explain(p);
    if (!p.proved()) EXPECT_EQ(p.outcome, rules::ProofOutcome::kTimeout) << explain(p);
  }
}

TEST(Axioms, TheEmbeddedAxiomsAreTheShippedFile) {
  // The build embeds configs/rules/axioms.smt2; a stale build (or a copy that drifted) shows here.
  std::ifstream in(RLFLOW_SOURCE_DIR "/configs/rules/axioms.smt2");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const auto file = rules::parse_axiom_file(text.str());
  const auto& embedded = rules::prover_axioms();
  ASSERT_EQ(file.axioms.size(), embedded.size());
  for (size_t i = 0; i < embedded.size(); ++i) {
    EXPECT_EQ(file.axioms[i].name, embedded[i].name);
    EXPECT_EQ(file.axioms[i].smt, embedded[i].smt) << embedded[i].name;
    EXPECT_EQ(file.axioms[i].why, embedded[i].why) << embedded[i].name;
    EXPECT_EQ(file.axioms[i].group, embedded[i].group) << embedded[i].name;
  }
  EXPECT_NE(file.preamble.find("(define-fun rank"), std::string::npos);
}

TEST(Axioms, AMalformedAxiomFileNamesTheLine) {
  const std::string good = ";; preamble\n(define-fun two () Int 2)\n\n;; axiom: a\n;; group: g\n;; why: because\n;;   it is so\n(assert true)\n";
  const auto f = rules::parse_axiom_file(good);
  ASSERT_EQ(f.axioms.size(), 1u);
  EXPECT_EQ(f.axioms[0].why, "because it is so");
  EXPECT_EQ(f.axioms[0].smt, "(assert true)\n");
  auto error_of = [](const std::string& text) {
    try {
      rules::parse_axiom_file(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(good + ";; axiom: a\n;; group: g\n;; why: again\n(assert true)\n").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of(good + ";; axiom: b\n;; group: g\n(assert true)\n").find("needs a group, a why"), std::string::npos);
  EXPECT_NE(error_of("(assert true)\n").find("line 1"), std::string::npos);
}

TEST(Prover, ElementwiseGoalsAreDecidedOverTheReals) {
  // relu(b * (x * b)) = b * (b * relu(x)) holds because b * b >= 0: the axioms' E-matching timed
  // out on it; lifted to real arithmetic it is proved at once, and says how.
  auto square = rules::prove_rule(shipped_rule("gen_relu_mul_mul__mul_mul_relu_231ab2"), fast());
  EXPECT_TRUE(square.proved()) << explain(square);
  EXPECT_NE(square.message.find("elementwise"), std::string::npos) << explain(square);

  // relu(x) + s * relu(x) = relu(x + s * x) holds only for s >= -1. The generator shipped it for
  // any s: its three instances drew s = 3, -0.5 and 1.75. The lifted goal has a counterexample,
  // so the rule is disproved and its status is refuted whatever its instances say.
  const std::string scale_add = R"({"name": "relu_scale_add_any_s",
    "source": [{"id": "s0", "op": "Relu", "inputs": ["x"]}, {"id": "s1", "op": "ScalarMul", "inputs": ["s0"], "params": {"value": "$s"}},
               {"id": "s2", "op": "Add", "inputs": ["s0", "s1"]}],
    "target": [{"id": "t0", "op": "ScalarMul", "inputs": ["x"], "params": {"value": "$s"}}, {"id": "t1", "op": "Add", "inputs": ["x", "t0"]},
               {"id": "t2", "op": "Relu", "inputs": ["t1"]}],
    "outputs": {"s2": "t2"},
    "instances": [{"shapes": {"x": [3]}, "params": {"$s": 3.0}}, {"shapes": {"x": [2, 2]}, "params": {"$s": -0.5}},
                  {"shapes": {"x": [5]}, "params": {"$s": 1.75}}]})";
  auto false_rule = rules::prove_rule(parse_rule(scale_add), fast());
  EXPECT_EQ(false_rule.outcome, rules::ProofOutcome::kDisproved) << explain(false_rule);
  EXPECT_NE(false_rule.message.find("$s = "), std::string::npos) << explain(false_rule);
  EXPECT_EQ(rules::combined_status(true, &false_rule), rules::VerifyStatus::kRefuted);
  // The same through the isolated prover (the outcome crosses the pipe).
  EXPECT_EQ(rules::prove_rule_isolated(parse_rule(scale_add), fast()).outcome, rules::ProofOutcome::kDisproved);

  // A model that gives Sigmoid some interpretation is no counterexample: sigmoid(x) * 2 =
  // sigmoid(x + x) is false, but the lifted check may only say "not proved" for it.
  auto sig = rules::prove_rule(parse_rule(R"({"name": "sigmoid_double",
    "source": [{"id": "s0", "op": "Sigmoid", "inputs": ["x"]}, {"id": "s1", "op": "Add", "inputs": ["s0", "s0"]}],
    "target": [{"id": "t0", "op": "Add", "inputs": ["x", "x"]}, {"id": "t1", "op": "Sigmoid", "inputs": ["t0"]}],
    "outputs": {"s1": "t1"}, "instances": [{"shapes": {"x": [3]}}, {"shapes": {"x": [2, 2]}}, {"shapes": {"x": [5]}}]})"),
                             [] { rules::ProofOptions o; o.timeout_s = 2; return o; }());
  EXPECT_FALSE(sig.proved()) << explain(sig);
  EXPECT_NE(sig.outcome, rules::ProofOutcome::kDisproved) << explain(sig);
}
