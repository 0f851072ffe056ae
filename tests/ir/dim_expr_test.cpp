// Symbolic dims as exporters write them, and the bindings verification runs at.
#include <gtest/gtest.h>

#include "rlflow/ir/dim_expr.h"

namespace {

using rlflow::ir::DimExpr;

int64_t eval(const std::string& text, const std::map<std::string, int64_t>& b) {
  auto e = DimExpr::parse(text);
  EXPECT_TRUE(e) << text << ": " << e.error().message;
  auto v = e->eval(b);
  EXPECT_TRUE(v) << text << ": " << v.error().message;
  return v ? *v : -1;
}

TEST(DimExpr, ExportersDimStringsEvaluateAtABinding) {
  const std::map<std::string, int64_t> b{{"past_sequence_length", 17}, {"sequence_length", 37}, {"s0", 5}, {"s1", 4}};
  EXPECT_EQ(eval("past_sequence_length + sequence_length", b), 54);
  EXPECT_EQ(eval("2*s0", b), 10);
  EXPECT_EQ(eval("s0 - 1", b), 4);
  EXPECT_EQ(eval("(s0 + s1) * 3 - 2", b), 25);
  EXPECT_EQ(eval("s0 // 2", b), 2);
  EXPECT_EQ(eval("floor(s0/2)", b), 2);
  EXPECT_EQ(eval("ceil(s0/2)", b), 3);
  EXPECT_EQ(eval("Max(s0, s1)", b), 5);
  EXPECT_EQ(eval("-s1 + 10", b), 6);
  EXPECT_EQ(eval("sequence_length", b), 37);
}

TEST(DimExpr, NamesAreCollectedAndAMissingNameIsAnError) {
  auto e = DimExpr::parse("past_sequence_length + sequence_length");
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->is_symbol());
  EXPECT_EQ(e->symbols(), (std::set<std::string>{"past_sequence_length", "sequence_length"}));
  EXPECT_FALSE(e->eval({{"sequence_length", 3}}));
  auto one = DimExpr::parse("batch");
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->is_symbol());
  EXPECT_FALSE(DimExpr::parse("s0 / 0")->eval({{"s0", 3}}));
}

TEST(DimExpr, StringsThatAreNotExpressionsAreRefused) {
  for (const char* bad : {"batch size", "a +", "(s0", "s0 ^ 2", "unknown_fn(s0)", ""}) EXPECT_FALSE(DimExpr::parse(bad)) << bad;
}

TEST(DimExpr, BindingsCannotCoincideWithTheRepresentativeOne) {
  const std::map<std::string, int64_t> rep{{"batch_size", 1}, {"sequence_length", 128}, {"past_sequence_length", 128}};
  auto bs = rlflow::ir::verification_bindings(rep);
  ASSERT_EQ(bs.size(), 3u);
  EXPECT_EQ(bs[0].label, "smallest");
  EXPECT_EQ(bs[0].sizes, (std::map<std::string, int64_t>{{"batch_size", 1}, {"sequence_length", 1}, {"past_sequence_length", 1}}));
  EXPECT_EQ(bs[1].label, "odd primes");
  EXPECT_EQ(bs[1].sizes, (std::map<std::string, int64_t>{{"batch_size", 3}, {"sequence_length", 37}, {"past_sequence_length", 17}}));
  EXPECT_EQ(bs[2].label, "decode step");
  EXPECT_EQ(bs[2].sizes.at("sequence_length"), 1);
  EXPECT_EQ(bs[2].sizes.at("past_sequence_length"), 29);
  // No two bindings have the same batch x sequence, and none equals the representative one.
  for (const auto& b : bs) EXPECT_NE(b.sizes.at("batch_size") * b.sizes.at("sequence_length"), 128);
  // A batch-only model: the smallest binding is the representative one and is left out.
  auto batch = rlflow::ir::verification_bindings({{"N", 1}});
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].sizes.at("N"), 37);
  EXPECT_TRUE(rlflow::ir::verification_bindings({}).empty());
}

}  // namespace
