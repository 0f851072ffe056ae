// The rule generator: integer interpreter, enumeration, pairing, conversion, pruning.
#include <gtest/gtest.h>

#include <limits>

#include "rlflow/ir/builder.h"
#include "rlflow/rules/generator.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rules/match.h"
#include "rlflow/rules/verify.h"

using namespace rlflow;
using namespace rlflow::rules::gen;
using ir::OpKind;

namespace {

IntTensor t(ir::Shape s, std::vector<int64_t> v) { return IntTensor{std::move(s), std::move(v)}; }

IntTensor run1(OpKind k, const ir::OpParams& p, std::vector<const IntTensor*> in) {
  auto out = eval_int(k, p, in);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  return out.ok() ? out->front() : IntTensor{};
}

const IntTensor kGrid = t({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});

VarSpec var(std::string name, ir::Shape shape, bool constant, int symmetry = -1, std::vector<bool> fixed = {}) {
  VarSpec v;
  v.name = std::move(name);
  v.fixed = fixed.empty() ? std::vector<bool>(shape.size(), false) : fixed;
  v.shape = std::move(shape);
  v.constant = constant;
  v.symmetry = symmetry;
  return v;
}

// Two activations, Relu and Add only: small enough to count by hand.
World relu_add_world() {
  World w;
  w.name = "tiny";
  w.vars = {var("x", {2, 3}, false, 0), var("y", {2, 3}, false, 0)};
  w.ops.relu = w.ops.add = true;
  return w;
}

// A small convolution world: fast at depth 2.
World small_conv_world() {
  World w;
  w.name = "conv";
  w.vars = {var("x", {2, 4, 5, 6}, false, 0), var("y", {2, 4, 5, 6}, false, 0),
            var("w1", {4, 4, 3, 3}, true, 1, {false, false, true, true}), var("w2", {4, 4, 3, 3}, true, 1, {false, false, true, true}),
            var("w3", {4, 4, 1, 1}, true, -1, {false, false, true, true})};
  w.ops.conv_acts = {ir::Activation::kNone, ir::Activation::kRelu};
  w.ops.relu = w.ops.add = w.ops.enlarge = true;
  w.ops.concat_axes = {{4, {0, 1}}};
  return w;
}

World small_matmul_world() {
  World w;
  w.name = "matmul";
  w.vars = {var("x", {2, 5, 4}, false, 0), var("w1", {4, 4}, true, 1), var("w2", {4, 4}, true, 1)};
  w.ops.matmul = w.ops.relu = true;
  w.ops.concat_axes = {{3, {1, 2}}, {2, {0, 1}}};
  return w;
}

GeneratorResult generate_small(int depth, std::vector<World> worlds) {
  GeneratorOptions o;
  o.depth = depth;
  o.worlds = std::move(worlds);
  return generate(o);
}

const rules::Rule* find_rule(const std::vector<rules::Rule>& rs, const std::vector<OpKind>& source, const std::vector<OpKind>& target) {
  for (const auto& r : rs) {
    if (r.source.nodes.size() != source.size() || r.target.nodes.size() != target.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < source.size(); ++i) ok = ok && r.source.nodes[i].kind == source[i];
    for (size_t i = 0; i < target.size(); ++i) ok = ok && r.target.nodes[i].kind == target[i];
    if (ok) return &r;
  }
  return nullptr;
}

}  // namespace

// ---- integer interpreter, on hand-computed cases

TEST(GeneratorInterp, SameConvolutionSumsTheWindow) {
  const IntTensor ones = t({1, 1, 3, 3}, std::vector<int64_t>(9, 1));
  auto y = run1(OpKind::kConv, ir::ConvParams{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, ir::Activation::kNone}, {&kGrid, &ones});
  EXPECT_EQ(y.shape, (ir::Shape{1, 1, 3, 3}));
  EXPECT_EQ(y.data, (std::vector<int64_t>{12, 21, 16, 27, 45, 33, 24, 39, 28}));
  // Fused relu, and a bias.
  const IntTensor neg = t({1, 1, 1, 1}, {-1});
  const IntTensor bias = t({1}, {3});
  auto r = run1(OpKind::kConv, ir::ConvParams{{1, 1}, {0, 0, 0, 0}, {1, 1}, 1, ir::Activation::kRelu}, {&kGrid, &neg, &bias});
  EXPECT_EQ(r.data, (std::vector<int64_t>{2, 1, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(GeneratorInterp, MatMulBroadcastsBatches) {
  const IntTensor a = t({2, 2}, {1, 2, 3, 4}), b = t({2, 2}, {5, 6, 7, 8});
  EXPECT_EQ(run1(OpKind::kMatMul, {}, {&a, &b}).data, (std::vector<int64_t>{19, 22, 43, 50}));
  const IntTensor batch = t({2, 1, 2}, {1, 2, 3, 4});
  auto y = run1(OpKind::kMatMul, {}, {&batch, &b});
  EXPECT_EQ(y.shape, (ir::Shape{2, 1, 2}));
  EXPECT_EQ(y.data, (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(GeneratorInterp, PoolsMaxAndScaledAverage) {
  const ir::PoolParams same{{3, 3}, {1, 1}, {1, 1, 1, 1}, false, false};
  EXPECT_EQ(run1(OpKind::kMaxPool, same, {&kGrid}).data, (std::vector<int64_t>{5, 6, 6, 8, 9, 9, 8, 9, 9}));
  // 36 x the real average: corner 12/4 = 3 -> 108, edge 21/6 = 3.5 -> 126, centre 45/9 = 5 -> 180.
  EXPECT_EQ(avg_pool_scale({3, 3}), 36);
  auto avg = run1(OpKind::kAveragePool, same, {&kGrid});
  EXPECT_EQ(avg.data, (std::vector<int64_t>{108, 126, 144, 162, 180, 198, 216, 234, 252}));
  ir::PoolParams incl = same;
  incl.count_include_pad = true;  // 36/9 = 4 x the window sum
  EXPECT_EQ(run1(OpKind::kAveragePool, incl, {&kGrid}).data[0], 48);
}

TEST(GeneratorInterp, ConcatSplitTransposeEnlargeConstants) {
  const IntTensor a = t({2, 1}, {1, 2}), b = t({2, 2}, {3, 4, 5, 6});
  auto c = run1(OpKind::kConcat, ir::AxisParams{1}, {&a, &b});
  EXPECT_EQ(c.shape, (ir::Shape{2, 3}));
  EXPECT_EQ(c.data, (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  auto parts = eval_int(OpKind::kSplit, ir::SplitParams{1, {1, 2}}, {&c});
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].data, a.data);
  EXPECT_EQ((*parts)[1].data, b.data);
  auto c0 = run1(OpKind::kConcat, ir::AxisParams{0}, {&b, &b});
  EXPECT_EQ(c0.data, (std::vector<int64_t>{3, 4, 5, 6, 3, 4, 5, 6}));
  EXPECT_EQ(run1(OpKind::kTranspose, ir::TransposeParams{{1, 0}}, {&b}).data, (std::vector<int64_t>{3, 5, 4, 6}));
  const IntTensor k = t({1, 1, 1, 1}, {7});
  auto e = run1(OpKind::kEnlarge, ir::EnlargeParams{{3, 3}}, {&k});
  EXPECT_EQ(e.data, (std::vector<int64_t>{0, 0, 0, 0, 7, 0, 0, 0, 0}));
  // An identity kernel makes a 'same' convolution the identity.
  auto id = run1(OpKind::kConstant, ir::ConstantParams{ir::ConstantFill::kIdentityConv, {1, 1, 3, 3}}, {});
  EXPECT_EQ(run1(OpKind::kConv, ir::ConvParams{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, ir::Activation::kNone}, {&kGrid, &id}).data, kGrid.data);
}

TEST(GeneratorInterp, WrapsAroundAndRejectsWhatIsNotExact) {
  const IntTensor big = t({1}, {std::numeric_limits<int64_t>::max()}), one = t({1}, {1});
  EXPECT_EQ(run1(OpKind::kAdd, {}, {&big, &one}).data[0], std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(eval_int(OpKind::kScalarMul, ir::ScalarParams{0.5}, {&one}).ok());
  EXPECT_FALSE(eval_int(OpKind::kSigmoid, {}, {&one}).ok());
}

// ---- enumeration

TEST(GeneratorEnum, CountsOnATinyOpSet) {
  // Depth 1: relu(x), relu(y), add(x, y) (add(x, x) reads one tensor twice).
  // Depth 2 adds ten: {rx, ry} {rx, x+y} {rx, x+rx} {rx, y+rx} {ry, x+y} {ry, x+ry} {ry, y+ry}
  // {x+y, relu(x+y)} {x+y, x+(x+y)} {x+y, y+(x+y)}; relu(relu(x)) repeats a value and is skipped.
  const World w = relu_add_world();
  EnumOptions o;
  o.depth = 1;
  auto e1 = enumerate(w, o);
  EXPECT_EQ(e1.enumerated, 3u);
  EXPECT_EQ(e1.kept, 2u);        // relu(y) alone is relu(x) renamed
  EXPECT_EQ(e1.identities, 2u);  // {x}, {x, y}
  o.depth = 2;
  auto e2 = enumerate(w, o);
  EXPECT_EQ(e2.enumerated, 13u);
  EXPECT_EQ(e2.redundant, 2u);  // relu(relu(x)), relu(relu(y))
  EXPECT_EQ(e2.size(), e2.kept + e2.identities);
}

TEST(GeneratorEnum, EqualGraphsShareAFingerprint) {
  const World w = small_matmul_world();
  EnumOptions o;
  o.depth = 2;
  auto e = enumerate(w, o);
  // matmul(matmul(x, w1), w2) and matmul(x, matmul(w1, w2)) are enumerated and paired.
  auto pairs = candidate_pairs(e);
  bool found = false;
  for (const auto& [a, b] : pairs) {
    const auto ga = e.graph(a), gb = e.graph(b);
    found = found || (describe(w, ga, ga.outputs) == "matmul(matmul(x,w1),w2)" && describe(w, gb, gb.outputs) == "matmul(x,matmul(w1,w2))") ||
            (describe(w, gb, gb.outputs) == "matmul(matmul(x,w1),w2)" && describe(w, ga, ga.outputs) == "matmul(x,matmul(w1,w2))");
    EXPECT_EQ(e.fingerprint(a), e.fingerprint(b));
  }
  EXPECT_TRUE(found);
}

// ---- known identities at depth 2

TEST(Generator, FindsConvReluFusionAndEnlargeAtDepthTwo) {
  auto res = generate_small(2, {small_conv_world()});
  const auto* fuse = find_rule(res.rules, {OpKind::kConv, OpKind::kRelu}, {OpKind::kConv});
  ASSERT_NE(fuse, nullptr) << "relu(conv(x, w)) -> conv_relu(x, w)";
  EXPECT_EQ(fuse->source.nodes[0].params.at("act"), rules::Expr::Ints({0}));
  EXPECT_EQ(fuse->target.nodes[0].params.at("act"), rules::Expr::Ints({1}));
  // Parameters are general (variables), kernels only equal, and five configurations are checked.
  EXPECT_EQ(fuse->source.nodes[0].params.at("strides"), rules::Expr::Var("$cs"));
  EXPECT_GE(fuse->instances.size(), 5u);
  // conv(x, w3) with a 1x1 kernel equals conv(x, enlarge(w3)) with a 3x3 'same' one: literal.
  const auto* enl = find_rule(res.rules, {OpKind::kEnlarge, OpKind::kConv}, {OpKind::kConv});
  ASSERT_NE(enl, nullptr);
  bool pins_kernel = false;
  for (const auto& c : enl->conditions)
    pins_kernel = pins_kernel || (c.lhs.str() == "dim(w3, 2)" && c.rhs == rules::Expr::Ints({1}));
  EXPECT_TRUE(pins_kernel);
}

TEST(Generator, MergedParallelConvRuleWorksOnAGraph) {
  auto res = generate_small(3, {small_conv_world()});
  // concat1(conv(x, w1), conv(x, w2)) -> conv(x, concat0(w1, w2)): TASO's merge of parallel convs.
  const rules::Rule* merge = nullptr;
  for (const auto& r : res.rules) {
    if (r.source.nodes.size() != 3 || r.target.nodes.size() != 2 || r.source.nodes[2].kind != OpKind::kConcat) continue;
    if (r.source.nodes[0].kind != OpKind::kConv || r.source.nodes[1].kind != OpKind::kConv) continue;
    if (r.source.nodes[0].params.at("act") != rules::Expr::Ints({0}) || r.source.nodes[2].params.at("axis") != rules::Expr::Ints({1})) continue;
    merge = &r;
  }
  ASSERT_NE(merge, nullptr);
  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {1, 3, 8, 8}});
  auto c1 = b.conv(x, b.weight("a", ir::random_tensor({5, 3, 3, 3}, 1)), {2, 2}, {1, 1, 1, 1});
  auto c2 = b.conv(x, b.weight("b", ir::random_tensor({2, 3, 3, 3}, 2)), {2, 2}, {1, 1, 1, 1});
  b.output(b.relu(b.op(OpKind::kConcat, {c1, c2}, ir::AxisParams{1})), "y");
  const auto g = b.build();
  auto ms = rules::find_matches(g, *merge);
  ASSERT_EQ(ms.size(), 1u) << "general parameters (stride 2) and the symmetric pair matched once";
  auto g2 = rules::apply(g, *merge, ms[0]);
  ASSERT_TRUE(g2.ok()) << g2.error().message;
  int convs = 0;
  for (const auto& n : g2->nodes()) convs += n.kind == OpKind::kConv;
  EXPECT_EQ(convs, 1);
}

TEST(Generator, FindsMatMulAssociativityInTheCheaperDirection) {
  auto res = generate_small(2, {small_matmul_world()});
  // Up to renaming w1 <-> w2, whichever the generator met first.
  bool found = false;
  for (const auto& r : res.rules) {
    found = found || r.description == "matmul(matmul(x,w1),w2)  =>  matmul(x,matmul(w1,w2))" ||
            r.description == "matmul(matmul(x,w2),w1)  =>  matmul(x,matmul(w2,w1))";
    EXPECT_NE(r.description, "matmul(x,matmul(w1,w2))  =>  matmul(matmul(x,w1),w2)");
    EXPECT_NE(r.description, "matmul(x,matmul(w2,w1))  =>  matmul(matmul(x,w2),w1)");
  }
  EXPECT_TRUE(found);
}

// ---- pruning

TEST(GeneratorPrune, RenamedDuplicatesShareACanonicalKey) {
  const World w = conv_world();  // x=0 y=1 w1=2 w2=3
  auto conv = [](int a, int k) { return GNode{OpKind::kConv, ir::ConvParams{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1, ir::Activation::kNone}, {a, k}}; };
  const int nv = static_cast<int>(w.vars.size());
  // add(conv(x, w1), conv(y, w1)) -> ... and the same with x, y and w1, w2 swapped.
  auto pair = [&](int act1, int act2, int k) {
    Directed d;
    d.source.nodes = {conv(act1, k), conv(act2, k), {OpKind::kAdd, {}, {nv, nv + 1}}};
    d.source.outputs = {nv + 2};
    d.target.nodes = {{OpKind::kAdd, {}, {act1, act2}}, conv(nv, k)};
    d.target.outputs = {nv + 1};
    d.outputs = {{nv + 2, nv + 1}};
    return d;
  };
  EXPECT_EQ(canonical_key(w, pair(0, 1, 2)), canonical_key(w, pair(1, 0, 3)));
  EXPECT_NE(canonical_key(w, pair(0, 1, 2)), canonical_key(w, pair(0, 1, 4)));  // w3 is another kind of kernel
  // x and y play the same part: the two convs form a symmetric pair.
  EXPECT_EQ(source_symmetries(w, pair(0, 1, 2)), (std::vector<std::vector<int>>{{0, 1}}));
}

TEST(GeneratorPrune, CommonSubgraphsAndContextsAreTrivial) {
  const World w = small_matmul_world();  // x=0 w1=1 w2=2
  const int nv = 3;
  GGraph a, b;
  a.nodes = {{OpKind::kMatMul, {}, {0, 1}}, {OpKind::kRelu, {}, {nv}}};
  a.outputs = {nv + 1};
  b.nodes = {{OpKind::kMatMul, {}, {0, 1}}, {OpKind::kMatMul, {}, {nv, 2}}};
  b.outputs = {nv + 1};
  EXPECT_TRUE(share_common_subgraph(w, a, b));  // matmul(x, w1) on both sides
  GGraph c;
  c.nodes = {{OpKind::kMatMul, {}, {1, 2}}, {OpKind::kMatMul, {}, {0, nv}}};
  c.outputs = {nv + 1};
  EXPECT_FALSE(share_common_subgraph(w, b, c));
  // relu(matmul(matmul(x, w1), w2)) vs relu(matmul(x, matmul(w1, w2))): the same op on equal values.
  GGraph d = b, e = c;
  d.nodes.push_back({OpKind::kRelu, {}, {nv + 1}});
  d.outputs = {nv + 2};
  e.nodes.push_back({OpKind::kRelu, {}, {nv + 1}});
  e.outputs = {nv + 2};
  EXPECT_TRUE(share_common_context(w, d, e, 1));
  EXPECT_FALSE(share_common_context(w, b, c, 1));
}

TEST(GeneratorPrune, RulesDerivedByOthersAreRecognised) {
  auto res = generate_small(2, {small_matmul_world()});
  ASSERT_FALSE(res.rules.empty());
  RuleBase base;
  EXPECT_FALSE(base.derives(res.rules[0], 2));
  base.add(std::make_shared<rules::Rule>(res.rules[0]));
  EXPECT_TRUE(base.derives(res.rules[0], 1));
}

// ---- every generated rule is well-formed and verified

TEST(Generator, EveryGeneratedRuleValidatesAndVerifies) {
  auto res = generate_small(2, {small_conv_world(), small_matmul_world()});
  ASSERT_GE(res.rules.size(), 10u);
  std::set<std::string> names;
  for (const auto& r : res.rules) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_EQ(r.provenance, "generated");
    EXPECT_EQ(r.status, rules::VerifyStatus::kNumeric);
    EXPECT_TRUE(rules::validate_rule(r).ok()) << r.name;
    EXPECT_GE(r.instances.size(), 3u);
    std::set<std::map<std::string, ir::Shape>> shapes;
    for (const auto& i : r.instances) shapes.insert(i.shapes);
    EXPECT_EQ(shapes.size(), r.instances.size()) << r.name << ": instances must differ in shape";
    auto rc = rules::verify_numerically(r);
    EXPECT_TRUE(rc.ok) << r.name << " (" << r.description << "): " << rc.message;
  }
  // Totals are in pipeline order and shrink.
  ASSERT_GE(res.info.totals.size(), 5u);
  EXPECT_EQ(res.info.totals.front().first, "enumerated graphs");
  EXPECT_EQ(res.info.totals.back().first, "shipped");
  EXPECT_EQ(res.info.totals.back().second, static_cast<int64_t>(res.rules.size()));
}

TEST(Generator, MergingKeepsHandWrittenRulesAndRoundTripsTheTotals) {
  rules::RuleLibrary lib;
  rules::Rule hand;
  hand.name = "hand";
  hand.source.nodes = {{"r", OpKind::kRelu, {"x"}, {}, {}}};
  hand.target.nodes = {{"t", OpKind::kRelu, {"x"}, {}, {}}};
  hand.outputs = {{"r", "t"}};
  rules::Rule old = hand;
  old.name = "old_generated";
  old.provenance = "generated";
  lib.rules = {hand, old};
  auto res = generate_small(1, {small_matmul_world()});
  rules::Rule fresh = hand;
  fresh.name = "fresh_generated";
  fresh.provenance = "generated";
  res.info.command = "test";
  merge_generated(&lib, {fresh}, res.info);
  ASSERT_EQ(lib.rules.size(), 2u);
  EXPECT_EQ(lib.rules[0].name, "hand");
  EXPECT_EQ(lib.rules[1].name, "fresh_generated");
  auto again = rules::parse_library(rules::dump_library(lib), "test");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->generator.command, "test");
  EXPECT_EQ(again->generator.totals, res.info.totals);
}

