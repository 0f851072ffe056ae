// The rl module: featurisation, masks, GAE, the PPO loss, config, checkpoints, the learning test
// and resume equality. Analytic cost model and fixed seeds throughout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "rl/common.h"
#include "rl/checkpoint.h"
#include "rl/distributed.h"
#include "rl/imitation.h"
#include "rl/ppo.h"
#include "rlflow/rl/agent.h"
#include "rlflow/cost/memo.h"
#include "rlflow/rl/environment.h"
#include "rlflow/search/optimizer.h"

using namespace rlflow;
using namespace rlflow::ir;
namespace fs = std::filesystem;
using namespace rltest;

namespace {

double search_cost(const std::string& strategy, const Graph& g, const std::vector<const rules::Rule*>& rules, cost::CostModel& m) {
  auto opt = search::make_optimizer(strategy, rules, m);
  if (!opt) throw std::runtime_error(opt.error().message);
  auto r = (*opt)->run(g, {});
  if (!r) throw std::runtime_error(r.error().message);
  return r->best_cost;
}

rl::PpoConfig small_config() {
  rl::PpoConfig c;
  c.env.max_steps = 10;
  c.hidden = 32;
  c.episodes_per_update = 8;
  c.minibatch = 32;
  c.checkpoint_every = 1;
  return c;
}

}  // namespace

TEST(RlFeatures, LayoutMatchesTheGraph) {
  auto g = fire_modules(1);
  std::vector<double> cost(g.size(), 0.0);
  cost[g.size() - 1] = 0.5;
  auto f = rl::featurize(g, cost, 2.0, 4.0, 0.25);
  const int nd = rl::node_feature_dim();
  ASSERT_EQ(f.num_nodes, static_cast<int>(g.size()));
  ASSERT_EQ(f.nodes.size(), g.size() * static_cast<size_t>(nd));
  int edges = 0;
  for (const auto& n : g.nodes()) edges += static_cast<int>(n.inputs.size());
  ASSERT_EQ(f.num_edges, edges);
  ASSERT_EQ(f.edges.size(), static_cast<size_t>(edges * rl::edge_feature_dim()));
  const int vocab = rl::op_vocab_size();
  for (size_t i = 0; i < g.size(); ++i) {
    // exactly one op kind is hot, the node's own
    int hot = 0;
    for (int k = 0; k < vocab; ++k) hot += f.nodes[i * nd + k] == 1.f;
    EXPECT_EQ(hot, 1);
    EXPECT_EQ(f.nodes[i * nd + rl::op_feature_slot(g.node(static_cast<NodeId>(i)).kind)], 1.f);
  }
  for (int e = 0; e < f.num_edges; ++e) EXPECT_LT(f.src[e], f.dst[e]);  // topological order
  // The concat's cost share is 0.5 / 4 * 10; graph output flag set; global features.
  const float* last = &f.nodes[(g.size() - 1) * nd + vocab];
  EXPECT_FLOAT_EQ(last[18], 0.5f / 4.f * 10.f);
  EXPECT_EQ(last[21], 1.f);
  ASSERT_EQ(f.global.size(), static_cast<size_t>(rl::global_feature_dim()));
  EXPECT_FLOAT_EQ(f.global[0], 0.5f);
  EXPECT_FLOAT_EQ(f.global[2], 0.25f);
  for (float v : f.nodes) EXPECT_TRUE(std::isfinite(v));
}

// Every op has a slot of its own name, and the slots of the vocabulary before it was recorded keep
// the places they had (the enum order of that time), so old agents read them as they were trained.
TEST(RlFeatures, OpVocabularyIsStable) {
  EXPECT_GE(rl::op_vocab_size(), rl::kLegacyOpVocab);
  EXPECT_EQ(rl::op_vocab_name(rl::kOpaqueSlot), "Opaque");
  EXPECT_EQ(rl::op_vocab_name(0), "Input");
  EXPECT_EQ(rl::op_vocab_name(rl::kLegacyOpVocab - 2), "HardSwish");
  EXPECT_EQ(rl::op_vocab_name(rl::op_vocab_size()), "");
  std::vector<int> seen(static_cast<size_t>(rl::op_vocab_size()), 0);
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    const int slot = rl::op_feature_slot(kind);
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, rl::op_vocab_size());
    EXPECT_EQ(rl::op_vocab_name(slot), op_name(kind));
    EXPECT_EQ(++seen[static_cast<size_t>(slot)], 1) << op_name(kind);
  }
  EXPECT_EQ(rl::node_feature_dim(), rl::node_feature_dim(rl::op_vocab_size()));
  EXPECT_EQ(rl::node_feature_dim() - rl::node_feature_dim(rl::kLegacyOpVocab), rl::op_vocab_size() - rl::kLegacyOpVocab);
}

// The shipped agent was saved before checkpoints recorded their op vocabulary: it reads as the
// legacy vocabulary, loads into a network of that size, and runs on today's features.
TEST(RlFeatures, ShippedAgentLoadsWithItsOwnVocabulary) {
  const std::string path = std::string(RLFLOW_SOURCE_DIR) + "/configs/agents/zoo-h100.pt";
  auto info = rl::read_agent_info(path);
  ASSERT_TRUE(info) << info.error().message;
  ASSERT_EQ(info->kind, "policy");
  EXPECT_EQ(info->op_vocab, rl::kLegacyOpVocab);
  rl::nets::PolicyNet net(static_cast<int>(info->rules.size()), info->config.hidden, info->config.gnn_rounds, info->op_vocab);
  ASSERT_TRUE(rl::checkpoint::load(path, net, nullptr).ok());
  auto g = fire_modules(1);
  auto f = rl::featurize(g, std::vector<double>(g.size(), 0.01), 1.0, 1.0, 0.0);
  torch::NoGradGuard no_grad;
  auto enc = net->encode(rl::nets::make_batch({&f}));
  EXPECT_EQ(enc.nodes.size(0), static_cast<int64_t>(g.size()));
  EXPECT_TRUE(torch::isfinite(enc.global).all().item<bool>());
  // A checkpoint from a build with more op kinds than this one is refused by name.
  EXPECT_FALSE(rl::checkpoint::op_vocab(nlohmann::json{{"op_vocab", rl::op_vocab_size() + 1}}, "future.pt"));
}

// An op added after a network was trained (RMSNorm, after the legacy vocabulary) reaches it in its
// Opaque slot, the rest of the node's features unchanged; the network runs, and a checkpoint saved
// from it records its own vocabulary, so it loads again at that size.
TEST(RlFeatures, AnOldVocabularyNetworkSeesNewOpsAsOpaque) {
  ASSERT_GT(rl::op_vocab_size(), rl::kLegacyOpVocab);
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 4, 16}});
  auto n = b.op(OpKind::kRMSNorm, {x, b.weight("scale", random_tensor({16}, 3))}, NormParams{2, 1e-6});
  b.output(b.op(OpKind::kRelu, {n}), "y");
  const Graph g = std::move(b).build();
  auto f = rl::featurize(g, std::vector<double>(g.size(), 0.01), 1.0, 1.0, 0.0);
  const int nd = rl::node_feature_dim(), vocab = rl::op_vocab_size();
  auto batch = rl::nets::make_batch({&f});
  auto old = rl::nets::fit_node_features(batch.x, rl::kLegacyOpVocab);
  ASSERT_EQ(old.size(1), rl::node_feature_dim(rl::kLegacyOpVocab));
  for (size_t i = 0; i < g.size(); ++i) {
    const auto kind = g.node(static_cast<NodeId>(i)).kind;
    const auto row = old[static_cast<int64_t>(i)];
    const int slot = kind == OpKind::kRMSNorm ? rl::kOpaqueSlot : rl::op_feature_slot(kind);
    EXPECT_EQ(row.slice(0, 0, rl::kLegacyOpVocab).sum().item<float>(), 1.f) << op_name(kind);
    EXPECT_EQ(row[slot].item<float>(), 1.f) << op_name(kind);
    for (int k = 0; k < nd - vocab; ++k)
      EXPECT_EQ(row[rl::kLegacyOpVocab + k].item<float>(), f.nodes[i * static_cast<size_t>(nd) + static_cast<size_t>(vocab + k)]);
  }
  EXPECT_TRUE(torch::equal(rl::nets::fit_node_features(batch.x, vocab), batch.x));

  auto dir = temp_dir("vocab");
  const std::string path = (dir / "old.pt").string();
  torch::manual_seed(3);
  rl::nets::PolicyNet net(4, 16, 2, rl::kLegacyOpVocab);
  torch::NoGradGuard no_grad;
  auto enc = net->encode(batch);
  EXPECT_TRUE(torch::isfinite(enc.global).all().item<bool>());
  ASSERT_TRUE(rl::checkpoint::save(path, net, nullptr, {{"config", rl::to_yaml(small_config())}}).ok());
  auto meta = rl::checkpoint::read_meta(path);
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->value("op_vocab", 0), rl::kLegacyOpVocab);
  rl::nets::PolicyNet back(4, 16, 2, *rl::checkpoint::op_vocab(*meta, path));
  ASSERT_TRUE(rl::checkpoint::load(path, back, nullptr).ok());
  EXPECT_TRUE(torch::allclose(back->encode(batch).global, enc.global));
  // A new network records today's vocabulary.
  rl::nets::PolicyNet fresh(4, 16, 2);
  ASSERT_TRUE(rl::checkpoint::save(path, fresh, nullptr, {}).ok());
  EXPECT_EQ(rl::checkpoint::read_meta(path)->value("op_vocab", 0), vocab);
  fs::remove_all(dir);
}


TEST(RlEnvironment, MasksComeFromTheMatcher) {
  auto g = fire_modules(2);
  auto rules = fire_rules();
  auto m = analytic();
  rl::GraphEnv env(g, rules, *m);
  auto obs = env.reset();
  ASSERT_TRUE(obs) << obs.error().message;
  ASSERT_EQ(obs->xfer_mask.size(), rules.size() + 1);
  EXPECT_EQ(obs->xfer_mask.back(), 1);  // NO-OP
  for (size_t x = 0; x < rules.size(); ++x) {
    auto matches = rules::find_matches(g, *rules[x]);
    EXPECT_EQ(obs->xfer_mask[x], matches.empty() ? 0 : 1) << rules[x]->name;
    EXPECT_EQ(obs->locations[x], matches);
    auto lm = obs->location_mask(static_cast<int>(x), 200);
    ASSERT_EQ(lm.size(), 200u);
    for (size_t l = 0; l < 200; ++l) EXPECT_EQ(lm[l], l < matches.size() ? 1 : 0);
  }
  EXPECT_EQ(obs->xfer_mask[0], 1);  // two 1x1 convs to enlarge
  EXPECT_EQ(obs->locations[0].size(), 2u);
  EXPECT_EQ(obs->xfer_mask[1], 0);  // nothing to merge before enlarging
  // A masked action is refused, not applied.
  auto bad = env.step({1, 0});
  EXPECT_FALSE(bad);
  auto out_of_range = env.step({0, 5});
  EXPECT_FALSE(out_of_range);
  // Enlarging raises the cost: a negative dense reward of 100 x delta / cost0.
  auto s = env.step({0, 0});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->done);
  EXPECT_LT(s->reward, 0);
  EXPECT_NEAR(s->reward, 100 * (s->info.initial_cost - s->info.cost) / s->info.initial_cost, 1e-9);
  EXPECT_EQ(s->observation.xfer_mask[1], 1);  // now the two 3x3 convs merge
  // NO-OP ends the episode and reports the final improvement.
  auto end = env.step({static_cast<int>(rules.size()), 0});
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->done);
  EXPECT_DOUBLE_EQ(end->reward, 0.0);
  EXPECT_NEAR(end->info.improvement, (end->info.initial_cost - end->info.cost) / end->info.initial_cost, 1e-12);
}

TEST(RlEnvironment, StepLimitEndsTheEpisodeAndFinalRewardIsTheImprovement) {
  auto g = fire_modules(1);
  auto m = analytic();
  rl::EnvConfig cfg;
  cfg.max_steps = 3;
  cfg.reward = "final";
  rl::GraphEnv env(g, fire_rules(), *m, cfg);
  ASSERT_TRUE(env.reset());
  auto a = env.step({0, 0});  // enlarge
  auto b = env.step({1, 0});  // merge
  auto c = env.step({2, 0});  // split + concat -> identity
  ASSERT_TRUE(a && b && c);
  EXPECT_DOUBLE_EQ(a->reward, 0.0);
  EXPECT_DOUBLE_EQ(b->reward, 0.0);
  EXPECT_TRUE(c->done);
  EXPECT_GT(c->info.improvement, 0.0);
  EXPECT_NEAR(c->reward, 100 * c->info.improvement, 1e-9);
  EXPECT_EQ(env.best_steps().size(), 3u);
  EXPECT_NEAR(env.best_cost(), c->info.cost, 1e-12);
}

TEST(RlPolicy, NeverSamplesAMaskedAction) {
  auto g = fire_modules(2);
  auto rules = fire_rules();
  auto m = analytic();
  torch::manual_seed(3);
  rl::nets::PolicyNet net(static_cast<int>(rules.size()), 16, 3);
  std::mt19937_64 rng(5);
  rl::EnvConfig cfg;
  cfg.max_steps = 8;
  rl::GraphEnv env(g, rules, *m, cfg);
  int steps = 0, noops = 0;
  for (int ep = 0; ep < 40; ++ep) {
    auto obs = env.reset();
    ASSERT_TRUE(obs);
    rl::Observation cur = *obs;
    for (;;) {
      auto c = rl::ppo::act(net, {&cur}, cfg.max_locations, false, rng)[0];
      ASSERT_TRUE(cur.valid(c.action.xfer, c.action.location)) << c.action.xfer << "," << c.action.location;
      EXPECT_TRUE(std::isfinite(c.logp));
      EXPECT_LE(c.logp, 0.f);
      noops += c.action.xfer == static_cast<int>(rules.size());
      auto s = env.step(c.action);
      ASSERT_TRUE(s) << s.error().message;
      ++steps;
      if (s->done) break;
      cur = s->observation;
    }
  }
  EXPECT_GT(steps, 40);
  EXPECT_GT(noops, 0);
}

TEST(RlPolicy, MaskedDistributionsHaveZeroMassAndFiniteEntropy) {
  auto logits = torch::tensor({{1.0f, 2.0f, 3.0f, 4.0f}});
  auto mask = torch::tensor({{true, false, true, false}});
  auto lp = rl::nets::masked_log_softmax(logits, mask);
  auto p = lp.exp();
  EXPECT_EQ(p[0][1].item<float>(), 0.f);
  EXPECT_EQ(p[0][3].item<float>(), 0.f);
  EXPECT_NEAR(p[0][0].item<float>() + p[0][2].item<float>(), 1.0, 1e-6);
  const double p0 = 1 / (1 + std::exp(2.0)), p2 = 1 - p0;
  EXPECT_NEAR(rl::nets::masked_entropy(lp, mask).item<float>(), -(p0 * std::log(p0) + p2 * std::log(p2)), 1e-5);
  // One valid entry: entropy exactly 0, never NaN.
  auto one = torch::tensor({{false, false, true, false}});
  EXPECT_EQ(rl::nets::masked_entropy(rl::nets::masked_log_softmax(logits, one), one).item<float>(), 0.f);
}

TEST(RlPpo, GaeMatchesAHandComputation) {
  // Two episodes: [r=1, 0, 2] then [1]; gamma 0.9, lambda 0.8.
  std::vector<float> r{1, 0, 2, 1}, v{0.5f, 0.4f, 0.3f, 0.2f}, ret;
  std::vector<uint8_t> d{0, 0, 1, 1};
  auto adv = rl::ppo::gae(r, v, d, 0.9, 0.8, &ret);
  // deltas: d2 = 2 - 0.3 = 1.7; d1 = 0 + 0.9*0.3 - 0.4 = -0.13; d0 = 1 + 0.9*0.4 - 0.5 = 0.86; d3 = 1 - 0.2 = 0.8
  const double a2 = 1.7, a1 = -0.13 + 0.72 * a2, a0 = 0.86 + 0.72 * a1, a3 = 0.8;
  EXPECT_NEAR(adv[0], a0, 1e-6);
  EXPECT_NEAR(adv[1], a1, 1e-6);
  EXPECT_NEAR(adv[2], a2, 1e-6);
  EXPECT_NEAR(adv[3], a3, 1e-6);  // no bootstrapping across the episode boundary
  EXPECT_NEAR(ret[0], a0 + 0.5, 1e-6);
  EXPECT_NEAR(ret[3], a3 + 0.2, 1e-6);
}

TEST(RlPpo, LossOnAFixedBatch) {
  rl::PpoConfig cfg;
  cfg.clip = 0.2;
  cfg.value_coef = 0.5;
  cfg.entropy_coef = 0.01;
  rl::ppo::Evaluated ev;
  // ratios e^0.5 (clipped at 1.2 for a positive advantage), e^-0.5 (clipped at 0.8 for a negative one), 1
  ev.logp = torch::tensor({-0.5f, -2.5f, -1.0f});
  auto old = torch::tensor({-1.0f, -2.0f, -1.0f});
  auto adv = torch::tensor({2.0f, -1.0f, 0.5f});
  ev.value = torch::tensor({1.0f, 0.0f, 2.0f});
  auto ret = torch::tensor({0.0f, 1.0f, 2.0f});
  ev.entropy = torch::tensor({1.0f, 2.0f, 3.0f});
  auto l = rl::ppo::ppo_loss(ev, old, adv, ret, cfg);
  const double r0 = std::exp(0.5), r1 = std::exp(-0.5);
  const double pol = -(std::min(r0 * 2, 1.2 * 2) + std::min(r1 * -1, 0.8 * -1) + 0.5) / 3;
  const double val = (1 + 1 + 0) / 3.0, ent = 2.0;
  EXPECT_NEAR(l.policy.item<float>(), pol, 1e-5);
  EXPECT_NEAR(l.value.item<float>(), val, 1e-6);
  EXPECT_NEAR(l.entropy.item<float>(), ent, 1e-6);
  EXPECT_NEAR(l.total.item<float>(), pol + 0.5 * val - 0.01 * ent, 1e-5);
  EXPECT_NEAR(l.clip_fraction.item<float>(), 2.0 / 3, 1e-6);
  const double kl = ((r0 - 1 - 0.5) + (r1 - 1 + 0.5) + 0) / 3;
  EXPECT_NEAR(l.approx_kl.item<float>(), kl, 1e-5);
}

TEST(RlPpo, EvaluateReproducesTheLogProbabilityOfActing) {
  auto g = fire_modules(2);
  auto rules = fire_rules();
  auto m = analytic();
  torch::manual_seed(1);
  rl::nets::PolicyNet net(static_cast<int>(rules.size()), 16, 3);
  rl::GraphEnv env(g, rules, *m);
  auto obs = env.reset();
  ASSERT_TRUE(obs);
  std::mt19937_64 rng(2);
  std::vector<rl::ppo::Transition> ts;
  rl::Observation cur = *obs;
  for (int k = 0; k < 4; ++k) {
    auto c = rl::ppo::act(net, {&cur}, 200, false, rng)[0];
    ts.push_back(rl::ppo::make_transition(cur, c));
    auto s = env.step(c.action);
    ASSERT_TRUE(s);
    if (s->done) break;
    cur = s->observation;
  }
  std::vector<const rl::ppo::Transition*> batch;
  for (const auto& t : ts) batch.push_back(&t);
  torch::NoGradGuard ng;
  auto ev = rl::ppo::evaluate(net, batch, 200);
  for (size_t k = 0; k < ts.size(); ++k) {
    EXPECT_NEAR(ev.logp[static_cast<int64_t>(k)].item<float>(), ts[k].logp, 1e-4);
    EXPECT_NEAR(ev.value[static_cast<int64_t>(k)].item<float>(), ts[k].value, 1e-4);
    EXPECT_TRUE(std::isfinite(ev.entropy[static_cast<int64_t>(k)].item<float>()));
  }
}

TEST(RlConfig, ShippedFileIsTheDefaultsAndBadKeysAreRejected) {
  auto shipped = rl::load_ppo_config(std::string(RLFLOW_SOURCE_DIR) + "/configs/agent/ppo.yaml");
  ASSERT_TRUE(shipped) << shipped.error().message;
  EXPECT_EQ(rl::to_yaml(*shipped), rl::to_yaml(rl::PpoConfig{}));
  auto round = rl::parse_ppo_config(rl::to_yaml(small_config()), "t");
  ASSERT_TRUE(round);
  EXPECT_EQ(rl::to_yaml(*round), rl::to_yaml(small_config()));
  EXPECT_FALSE(rl::parse_ppo_config("ppo:\n  clipp: 0.1\n", "t"));
  EXPECT_FALSE(rl::parse_ppo_config("ppo:\n  clip: abc\n", "t"));
  EXPECT_FALSE(rl::parse_ppo_config("env:\n  reward: sparse\n", "t"));
  EXPECT_FALSE(rl::parse_ppo_config("training:\n  num_envs: 0\n", "t"));
}

TEST(RlCheckpoint, DamagedOrForeignFilesAreCleanErrors) {
  auto dir = temp_dir("ckpt");
  std::ofstream(dir / "junk.pt") << "not a checkpoint";
  auto meta = rl::checkpoint::read_meta((dir / "junk.pt").string());
  ASSERT_FALSE(meta);
  EXPECT_EQ(meta.error().code, ErrorCode::kBadInput);
  EXPECT_EQ(meta.error().message.find('\n'), std::string::npos);
  EXPECT_FALSE(rl::read_agent_info((dir / "missing.pt").string()));
  fs::remove_all(dir);
}

// The learning test: greedy is stuck at the start (every first step raises the cost), taso's
// alpha = 1.05 does not admit the enlarged kernel either; exhaustive search knows the optimum.
// The agent must reach it within a fixed number of episodes.
TEST(RlAgent, LearnsAnOptimumThatNeedsACostIncreasingStepFirst) {
  auto g = fire_modules(2);
  auto rules = fire_rules();
  auto m = analytic();
  const double initial = *cost::graph_cost(g, *m);
  const double greedy = search_cost("greedy", g, rules, *m);
  const double optimum = search_cost("exhaustive", g, rules, *m);
  EXPECT_DOUBLE_EQ(greedy, initial);
  ASSERT_LT(optimum, initial * 0.95);
  auto dir = temp_dir("learn");
  rl::TrainOptions o;
  o.models = {{"fire2", g}};
  o.rules = rules;
  o.cost = m.get();
  o.config = small_config();
  o.episodes = 320;
  o.seed = 7;
  o.out = (dir / "agent.pt").string();
  o.log_path = (dir / "log.jsonl").string();
  auto sum = rl::train_agent(o);
  ASSERT_TRUE(sum) << sum.error().message;
  const double best = sum->best_improvement.at("fire2");
  EXPECT_NEAR(best, (initial - optimum) / initial, 1e-9) << "episodes to best " << sum->episodes_to_best.at("fire2");
  // The trained policy's greedy rollout alone (argmax of both heads, no sampling) reaches it: the
  // policy learned the path, it did not just stumble on it while exploring.
  rl::RlSearchOptions ro;
  ro.agent_path = o.out;
  ro.rollouts = 0;
  auto opt = rl::make_rl_optimizer(ro, library(), *m);
  ASSERT_TRUE(opt) << opt.error().message;
  auto r = (*opt)->run(g, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->best_cost, optimum, 1e-9);
  auto replayed = search::replay(g, rules, r->steps);
  ASSERT_TRUE(replayed);
  EXPECT_NEAR(*cost::graph_cost(*replayed, *m), optimum, 1e-9);
  EXPECT_EQ(r->stop, search::StopReason::kRolloutsDone);
  EXPECT_GE(r->report.unique_graphs, 2);  // counted graphs, not steps + 1
  // Every graph visited was observed (its rewrites enumerated for the masks): the reset's and each
  // applied step's.
  EXPECT_LE(r->report.unique_graphs, r->report.expanded);
  EXPECT_GT(r->report.agent_actions, 0);
  EXPECT_EQ(r->report.budget_used, r->report.agent_actions);
  EXPECT_TRUE(r->report.phases.empty());  // the agent alone is not a combined search
  // The budget (the agent's actions) is checked between rollouts: the greedy rollout runs, then it stops.
  ro.rollouts = 5;
  auto limited = rl::make_rl_optimizer(ro, library(), *m);
  ASSERT_TRUE(limited) << limited.error().message;
  search::Limits lim;
  lim.budget = 1;
  auto rb = (*limited)->run(g, lim);
  ASSERT_TRUE(rb) << rb.error().message;
  EXPECT_EQ(rb->stop, search::StopReason::kBudget);
  EXPECT_EQ(rb->report.agent_actions, r->report.agent_actions);  // just the greedy rollout
  // The log has one line per update.
  std::ifstream log(o.log_path);
  int lines = 0;
  for (std::string line; std::getline(log, line);) ++lines;
  EXPECT_EQ(lines, 40);
  fs::remove_all(dir);
}

TEST(RlAgent, ResumedTrainingEqualsAnUninterruptedRun) {
  auto g = fire_modules(1);
  auto rules = fire_rules();
  auto m = analytic();
  auto dir = temp_dir("resume");
  rl::TrainOptions o;
  o.models = {{"fire1", g}};
  o.rules = rules;
  o.cost = m.get();
  o.config = small_config();
  o.seed = 11;
  o.episodes = 32;
  o.out = (dir / "straight.pt").string();
  ASSERT_TRUE(rl::train_agent(o));
  o.out = (dir / "split.pt").string();
  o.episodes = 16;
  ASSERT_TRUE(rl::train_agent(o));
  o.episodes = 32;
  o.resume = true;
  auto resumed = rl::train_agent(o);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->updates, 4);
  auto a = rl::read_agent_info((dir / "straight.pt").string());
  auto b = rl::read_agent_info((dir / "split.pt").string());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->env_steps, b->env_steps);
  EXPECT_EQ(a->episodes, 32);
  rl::nets::PolicyNet na(static_cast<int>(rules.size()), 32, 3), nb(static_cast<int>(rules.size()), 32, 3);
  ASSERT_TRUE(rl::checkpoint::load((dir / "straight.pt").string(), na, nullptr).ok());
  ASSERT_TRUE(rl::checkpoint::load((dir / "split.pt").string(), nb, nullptr).ok());
  auto pa = na->named_parameters(), pb = nb->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  // Resuming with other rules is refused.
  o.rules.pop_back();
  EXPECT_FALSE(rl::train_agent(o));
  fs::remove_all(dir);
}

// Data-parallel training (c10d, gloo on 127.0.0.1): two ranks, here two threads of this process
// (each with its own cost model, as separate processes would have), each collecting half of every
// update's episodes on its own model, end with the single-process run's parameters and counters,
// up to floating-point summation order. The CLI test runs the ranks as processes.
TEST(RlDistributed, TwoRanksEqualOneProcess) {
  if (!rl::dist::available()) GTEST_SKIP() << "built without c10d's gloo backend";
  auto rules = fire_rules();
  auto m = analytic();
  auto dir = temp_dir("dist");
  rl::TrainOptions o;
  o.models = {{"fire1", fire_modules(1)}, {"fire2", fire_modules(2)}};
  o.rules = rules;
  o.cost = m.get();
  o.config = small_config();
  // (seed 5 until RMSNorm widened the op one-hot: from that initialisation a KL early stop sat on
  // its threshold, and summation order alone decided it; seed 6 until RotaryEmbedding widened it
  // again: its weights then drifted 2.6e-4 apart by summation order, 7 to 13 but 10 stay within 1e-4)
  o.seed = 7;
  o.episodes = 24;
  o.out = (dir / "single.pt").string();
  o.log_path = (dir / "single.jsonl").string();
  auto single = rl::train_agent(o);
  ASSERT_TRUE(single) << single.error().message;

  const int port = free_port();
  ASSERT_GT(port, 0);
  std::vector<Expected<rl::TrainSummary>> sums(2, Error::internal("not run"));
  std::vector<std::unique_ptr<cost::CostModel>> costs;  // one per rank, as in separate processes
  for (int r = 0; r < 2; ++r) costs.push_back(analytic());
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      rl::TrainOptions d = o;
      d.cost = costs[static_cast<size_t>(r)].get();
      d.world_size = 2;
      d.rank = r;
      d.master = "127.0.0.1:" + std::to_string(port);
      d.dist_timeout_s = 60;
      d.out = (dir / ("rank" + std::to_string(r) + ".pt")).string();
      d.log_path = (dir / ("rank" + std::to_string(r) + ".jsonl")).string();
      sums[static_cast<size_t>(r)] = rl::train_agent(d);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(sums[static_cast<size_t>(r)]) << sums[static_cast<size_t>(r)].error().message;
  for (const auto& s : sums) {
    EXPECT_EQ(s->world_size, 2);
    EXPECT_EQ(s->updates, single->updates);
    EXPECT_EQ(s->episodes, single->episodes);
    EXPECT_EQ(s->env_steps, single->env_steps);
    EXPECT_EQ(s->episodes_to_best, single->episodes_to_best);
    for (const auto& [name, best] : single->best_improvement) EXPECT_NEAR(s->best_improvement.at(name), best, 1e-12) << name;
  }
  // Rank 0 alone writes the checkpoint and the log.
  EXPECT_TRUE(fs::exists(dir / "rank0.pt"));
  EXPECT_TRUE(fs::exists(dir / "rank0.jsonl"));
  EXPECT_FALSE(fs::exists(dir / "rank1.pt"));
  EXPECT_FALSE(fs::exists(dir / "rank1.jsonl"));
  rl::nets::PolicyNet na(static_cast<int>(rules.size()), 32, 3), nb(static_cast<int>(rules.size()), 32, 3);
  ASSERT_TRUE(rl::checkpoint::load((dir / "single.pt").string(), na, nullptr).ok());
  ASSERT_TRUE(rl::checkpoint::load((dir / "rank0.pt").string(), nb, nullptr).ok());
  auto pa = na->named_parameters(), pb = nb->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    const double diff = (item.value() - pb[item.key()]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << item.key();
  }
  fs::remove_all(dir);
}

// A rank that cannot reach its rendezvous, or a bad --master, is a clean error, not a hang or a crash.
TEST(RlDistributed, BadRendezvousIsACleanError) {
  EXPECT_FALSE(rl::dist::parse_master("127.0.0.1", "--master"));
  EXPECT_FALSE(rl::dist::parse_master("127.0.0.1:0", "--master"));
  EXPECT_FALSE(rl::dist::parse_master("127.0.0.1:port", "--master"));
  auto ok = rl::dist::parse_master("10.0.0.2:29500", "--master");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "10.0.0.2");
  EXPECT_EQ(ok->second, 29500);
  rl::TrainOptions o;
  o.models = {{"fire1", fire_modules(1)}};
  o.rules = fire_rules();
  auto m = analytic();
  o.cost = m.get();
  o.out = "/nonexistent/never-written.pt";
  o.world_size = 2;
  o.rank = 2;
  auto bad_rank = rl::train_agent(o);
  ASSERT_FALSE(bad_rank);
  EXPECT_EQ(bad_rank.error().code, ErrorCode::kBadInput);
  if (!rl::dist::available()) return;
  o.rank = 1;  // rank 0 never comes
  o.master = "127.0.0.1:" + std::to_string(free_port());
  o.dist_timeout_s = 2;
  auto lonely = rl::train_agent(o);
  ASSERT_FALSE(lonely);
  EXPECT_NE(lonely.error().message.find("distributed"), std::string::npos) << lonely.error().message;
}

// Imitation before PPO: greedy's trajectory replayed as demonstrations (ending in NO-OP where it
// converged), behaviour cloning fits them, and the cloned policy's own argmax rollout reaches
// greedy's cost before any PPO improvement.
TEST(RlImitation, ClonedPolicyReproducesGreedy) {
  using namespace rlflow::ir;
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 8, 12, 12}});
  for (int k = 0; k < 4; ++k) {
    auto w = b.weight("w" + std::to_string(k), random_tensor({8, 8, 3, 3}, 30 + k));
    x = b.relu(b.conv(x, w, {1, 1}, {1, 1, 1, 1}));
  }
  b.output(x, "y");
  const Graph g = b.build();
  auto rules = fire_rules();
  auto m = fusion_paying_analytic();
  const double initial = *cost::graph_cost(g, *m);
  const double greedy = search_cost("greedy", g, rules, *m);
  ASSERT_LT(greedy, initial);

  rl::PpoConfig cfg = small_config();
  auto demos = rl::imitation::greedy_demonstrations({{"chain", g}}, rules, *m, cfg);
  ASSERT_TRUE(demos) << demos.error().message;
  // Four Conv+Relu fusions; then only NO-OP is left, which ends the episode (a demonstration that
  // stops with moves left ends with an explicit NO-OP instead).
  ASSERT_EQ(demos->steps.size(), 4u);
  for (const auto& t : demos->steps) EXPECT_EQ(rules[static_cast<size_t>(t.xfer)]->name, "conv_relu_fuse");
  EXPECT_TRUE(demos->steps.back().done);
  EXPECT_GT(demos->steps.front().ret, demos->steps.back().ret);  // discounted returns of the remaining fusions
  EXPECT_NEAR(demos->improvement[0], (initial - greedy) / initial, 1e-9);

  auto dir = temp_dir("imitation");
  rl::TrainOptions o;
  o.models = {{"chain", g}};
  o.rules = rules;
  o.cost = m.get();
  o.config = cfg;
  o.config.imitation_epochs = 60;
  o.episodes = 8;  // one PPO update after cloning
  o.seed = 3;
  o.out = (dir / "agent.pt").string();
  auto sum = rl::train_agent(o);
  ASSERT_TRUE(sum) << sum.error().message;
  EXPECT_EQ(sum->imitation_epochs, 60);
  EXPECT_LT(sum->imitation_last_loss, sum->imitation_first_loss);
  // Greedy's four fusions cost the same, so which location it took first is arbitrary; the clone
  // need not pick the same one to reach the same graph. What must hold is the outcome, below.
  EXPECT_GE(sum->imitation_accuracy, 0.5);
  EXPECT_NEAR(sum->greedy_improvement.at("chain"), (initial - greedy) / initial, 1e-9);
  rl::RlSearchOptions ro;
  ro.agent_path = o.out;
  ro.rollouts = 0;  // the argmax rollout alone
  auto opt = rl::make_rl_optimizer(ro, library(), *m);
  ASSERT_TRUE(opt) << opt.error().message;
  auto r = (*opt)->run(g, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->best_cost, greedy + 1e-12);
  // The policy-guided beam search after the rollouts: never worse than the rollouts alone, and
  // its steps replay to the graph it reports.
  ro.beam = 2;
  ro.beam_branch = 3;
  auto beam = rl::make_rl_optimizer(ro, library(), *m);
  ASSERT_TRUE(beam) << beam.error().message;
  auto rb = (*beam)->run(g, {});
  ASSERT_TRUE(rb) << rb.error().message;
  EXPECT_LE(rb->best_cost, r->best_cost + 1e-12);
  EXPECT_GT(rb->report.agent_actions, r->report.agent_actions);
  EXPECT_GT(rb->report.expanded, r->report.expanded);  // the beam's states were observed too
  auto replayed = search::replay(g, rules, rb->steps);
  ASSERT_TRUE(replayed) << replayed.error().message;
  EXPECT_NEAR(*cost::graph_cost(*replayed, *m), rb->best_cost, 1e-9);
  ro.beam_branch = 0;
  EXPECT_FALSE(rl::make_rl_optimizer(ro, library(), *m));

  // --polish: greedy descent from the agent's best graph. An agent trained on one episode without
  // imitation stops short of greedy; the polish takes it to the local optimum (here all four
  // fusions, greedy's result), reports what it added, and its steps replay to the reported graph.
  o.config.imitation_epochs = 0;
  o.episodes = 1;
  o.out = (dir / "weak.pt").string();
  // The first seed whose one-episode agent stops short (which seeds do depends on the network's
  // initialisation; most do).
  rl::RlSearchOptions weak;
  weak.agent_path = o.out;
  weak.rollouts = 0;
  bool short_of_greedy = false;
  double weak_cost = 0;  // the weak agent's best
  for (uint64_t seed = 1; seed <= 16 && !short_of_greedy; ++seed) {
    o.seed = seed;
    ASSERT_TRUE(rl::train_agent(o));
    auto plain = rl::make_rl_optimizer(weak, library(), *m);
    ASSERT_TRUE(plain) << plain.error().message;
    auto rp = (*plain)->run(g, {});
    ASSERT_TRUE(rp) << rp.error().message;
    EXPECT_TRUE(rp->report.phases.empty());
    weak_cost = rp->best_cost;
    short_of_greedy = weak_cost > greedy + 1e-12;
  }
  ASSERT_TRUE(short_of_greedy) << "no seed in 1..16 gave an agent that stops short of the four fusions";
  weak.polish = true;
  auto polished = rl::make_rl_optimizer(weak, library(), *m);
  ASSERT_TRUE(polished) << polished.error().message;
  auto rq = (*polished)->run(g, {});
  ASSERT_TRUE(rq) << rq.error().message;
  EXPECT_NEAR(rq->best_cost, greedy, 1e-9);
  // Two phases: the agent, then greedy from the agent's best graph, whose graph is returned.
  ASSERT_EQ(rq->report.phases.size(), 2u);
  const auto& agent_phase = rq->report.phases[0];
  const auto& polish_phase = rq->report.phases[1];
  EXPECT_EQ(agent_phase.name, "rl");
  EXPECT_NEAR(agent_phase.best_cost, weak_cost, 1e-9);
  EXPECT_FALSE(agent_phase.returned);
  EXPECT_EQ(polish_phase.name, "greedy");
  EXPECT_EQ(polish_phase.from, 0);
  EXPECT_TRUE(polish_phase.ran);
  EXPECT_TRUE(polish_phase.returned);
  EXPECT_NEAR(polish_phase.initial_cost - polish_phase.best_cost, weak_cost - rq->best_cost, 1e-9);
  EXPECT_GT(polish_phase.steps, 0);
  EXPECT_EQ(rq->steps.size(), static_cast<size_t>(agent_phase.steps + polish_phase.steps));
  auto replayed_polish = search::replay(g, rules, rq->steps);
  ASSERT_TRUE(replayed_polish) << replayed_polish.error().message;
  EXPECT_NEAR(*cost::graph_cost(*replayed_polish, *m), rq->best_cost, 1e-9);

  // --never-below-greedy: greedy from the input as well. Without the polish the weak agent stops
  // short, so greedy's graph is returned and the report says so; with the polish the agent's graph
  // is as cheap, and a tie keeps the agent's.
  weak.polish = false;
  weak.never_below_greedy = true;
  auto guarded = rl::make_rl_optimizer(weak, library(), *m);
  ASSERT_TRUE(guarded) << guarded.error().message;
  auto rg = (*guarded)->run(g, {});
  ASSERT_TRUE(rg) << rg.error().message;
  ASSERT_EQ(rg->report.phases.size(), 2u);
  EXPECT_FALSE(rg->report.phases[0].returned);
  EXPECT_NEAR(rg->report.phases[0].best_cost, weak_cost, 1e-9);
  EXPECT_EQ(rg->report.phases[1].name, "greedy");
  EXPECT_EQ(rg->report.phases[1].from, -1);  // from the input
  EXPECT_TRUE(rg->report.phases[1].ran);
  EXPECT_TRUE(rg->report.phases[1].returned);
  EXPECT_NEAR(rg->report.phases[1].best_cost, greedy, 1e-9);
  EXPECT_NEAR(rg->best_cost, greedy, 1e-9);
  auto replayed_fallback = search::replay(g, rules, rg->steps);
  ASSERT_TRUE(replayed_fallback) << replayed_fallback.error().message;
  EXPECT_NEAR(*cost::graph_cost(*replayed_fallback, *m), rg->best_cost, 1e-9);
  weak.polish = true;
  auto both = rl::make_rl_optimizer(weak, library(), *m);
  ASSERT_TRUE(both) << both.error().message;
  auto rpg = (*both)->run(g, {});
  ASSERT_TRUE(rpg) << rpg.error().message;
  // rl, its polish, the fallback; the polished agent's graph ties greedy's and is kept.
  ASSERT_EQ(rpg->report.phases.size(), 3u);
  EXPECT_TRUE(rpg->report.phases[1].returned);
  EXPECT_TRUE(rpg->report.phases[2].ran);
  EXPECT_FALSE(rpg->report.phases[2].returned);
  EXPECT_EQ(rpg->report.phases[2].from, -1);
  EXPECT_NEAR(rpg->best_cost, greedy, 1e-9);
  fs::remove_all(dir);
}

// The training environment prices a graph exactly as `optimise --search rl` does (cost::MemoCost over
// the model optimise builds), under every deterministic cost model: the trainers wrap the shared
// model in locked_cost_model, and a wrapper that dropped runtime_fused once priced onnxruntime's fused
// nodes at full cost in training only.
TEST(RlEnvironment, TrainingPricesAGraphAsOptimiseDoes) {
  using namespace rlflow::ir;
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 16, 14, 14}});
  auto c = b.conv(x, b.weight("w", random_tensor({16, 16, 3, 3}, 3)), {1, 1}, {1, 1, 1, 1});
  auto r = b.op(OpKind::kRelu, {b.add(c, b.weight("bias", random_tensor({1, 16, 1, 1}, 4)))});
  b.output(b.op(OpKind::kConcat, {r, x}, AxisParams{1}), "y");
  const Graph g = b.build();
  for (const char* kind : {"analytic", "ort", "recorded"}) {
    cost::CostOptions o;
    o.kind = kind;
    o.deterministic = true;
    auto model = cost::make_cost_model(o);
    ASSERT_TRUE(model.ok()) << kind << ": " << model.error().message;
    cost::MemoCost optimise_cost(**model);
    auto expected = optimise_cost.cost(g);
    ASSERT_TRUE(expected.ok()) << expected.error().message;
    auto shared = rl::locked_cost_model(**model);
    EXPECT_EQ(shared->runtime_fused(g, constant_nodes(g)), (*model)->runtime_fused(g, constant_nodes(g))) << kind;
    rl::GraphEnv env(g, fire_rules(), *shared);
    ASSERT_TRUE(env.reset().ok());
    EXPECT_DOUBLE_EQ(env.initial_cost(), *expected) << kind;
    if (std::string(kind) == "ort") {
      // The case that went wrong: onnxruntime fuses the bias Add and the Relu into the Conv.
      auto fused = (*model)->runtime_fused(g, constant_nodes(g));
      EXPECT_TRUE(std::count(fused.begin(), fused.end(), true) > 0) << "the ort profile fuses nothing here";
    }
  }
}
