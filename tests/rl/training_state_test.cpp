// Training state (issue 30): checksummed checkpoints, periodic world-model checkpoints, logs that
// a fresh run starts afresh and a resumed run cuts back to its checkpoint, the held-out metrics of
// a finished world model given --resume, and the RL commands' refusal of outputs that are inputs
// and of nonsense numbers. Analytic cost model and fixed seeds throughout.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "rl/checkpoint.h"
#include "rl/common.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rl/world_model.h"

using namespace rlflow;
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace rltest;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

// The values of `key` on the log's lines, in order.
std::vector<int64_t> log_keys(const fs::path& p, const std::string& key) {
  std::vector<int64_t> out;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);) out.push_back(json::parse(line).at(key).get<int64_t>());
  return out;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

rl::TrainOptions small_agent(const fs::path& dir, cost::CostModel* cost) {
  rl::TrainOptions o;
  o.models = {{"fire1", fire_modules(1)}};
  o.rules = fire_rules();
  o.cost = cost;
  o.config.env.max_steps = 6;
  o.config.hidden = 16;
  o.config.episodes_per_update = 4;
  o.config.minibatch = 16;
  o.config.checkpoint_every = 2;
  o.seed = 5;
  o.episodes = 24;  // 6 updates
  o.out = (dir / "agent.pt").string();
  o.log_path = (dir / "agent.jsonl").string();
  return o;
}

rl::WorldModelTrainOptions small_wm(const fs::path& dir, cost::CostModel* cost) {
  rl::WorldModelTrainOptions o;
  o.cost = cost;
  o.models = {{"fire1", fire_modules(1)}};
  o.rules = fire_rules();
  o.agent_config.hidden = 16;
  o.agent_config.env.max_steps = 6;
  o.config.lstm_hidden = 16;
  o.config.mixtures = 2;
  o.config.epochs = 6;
  o.config.checkpoint_every = 2;
  o.config.batch_episodes = 4;
  o.episodes = 16;
  o.seed = 3;
  o.out = (dir / "wm.pt").string();
  o.log_path = (dir / "wm.jsonl").string();
  return o;
}

// The kill -9 of a run, after the line of the update (epoch) `at` was logged and before its
// checkpoint: the progress callback that sees it throws.
struct Killed {};

struct Run {
  int code = -1;
  std::string err;
  int err_lines() const { return static_cast<int>(std::count(err.begin(), err.end(), '\n')); }
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Run rlflow_cli(const std::vector<std::string>& args, const fs::path& dir) {
  std::string cmd = quote(RLFLOW_BINARY);
  for (const auto& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  const fs::path err = dir / "stderr.txt";
  cmd += " >/dev/null 2>";
  cmd += quote(err.string());
  cmd += " </dev/null";
  const int st = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  return r;
}

}  // namespace

// Every checkpoint carries a checksum of its payload: a flipped byte anywhere (header, archive
// metadata, weights) is a bad-input error naming the file, not a silently different agent. A
// checkpoint written before the checksum existed (a bare torch archive) still loads.
TEST(RlTrainingState, FlippedCheckpointBytesAreACleanErrorNamingTheFile) {
  auto m = analytic();
  auto dir = temp_dir("flip");
  auto o = small_agent(dir, m.get());
  o.episodes = 4;
  ASSERT_TRUE(rl::train_agent(o));
  const std::string good = slurp(o.out);
  ASSERT_EQ(good.rfind("rlflow-checkpoint-v2 ", 0), 0u);
  rl::nets::PolicyNet net(static_cast<int>(o.rules.size()), 16, 3);
  ASSERT_TRUE(rl::checkpoint::load(o.out, net, nullptr).ok());
  const fs::path bad = dir / "bad.pt";
  std::set<size_t> positions = {0, 5, 21, 30, 37, good.size() / 3, good.size() / 2, good.size() - 30, good.size() - 1};
  for (size_t k = 1; k < 16; ++k) positions.insert(k * good.size() / 16);
  for (size_t pos : positions) {
    std::string b = good;
    b[pos] = static_cast<char>(b[pos] ^ 0x10);
    spit(bad, b);
    auto meta = rl::checkpoint::read_meta(bad.string());
    auto loaded = rl::checkpoint::load(bad.string(), net, nullptr);
    ASSERT_FALSE(meta) << "byte " << pos << " of " << good.size();
    ASSERT_FALSE(loaded.ok()) << "byte " << pos;
    EXPECT_EQ(meta.error().code, ErrorCode::kBadInput);
    EXPECT_EQ(meta.error().message.rfind(bad.string(), 0), 0u) << meta.error().message;
    EXPECT_EQ(meta.error().message.find('\n'), std::string::npos);
  }
  spit(bad, good.substr(0, good.size() - 100));  // truncated
  EXPECT_FALSE(rl::checkpoint::read_meta(bad.string()));
  // An older checkpoint, the archive without the header line: loaded, unverified.
  spit(bad, good.substr(good.find('\n') + 1));
  EXPECT_TRUE(rl::checkpoint::read_meta(bad.string()));
  EXPECT_TRUE(rl::checkpoint::load(bad.string(), net, nullptr).ok());
  // --resume from a damaged checkpoint is refused, and so is running it as a search strategy.
  std::string b = good;
  b[good.size() / 2] = static_cast<char>(b[good.size() / 2] ^ 0x01);
  spit(o.out, b);
  o.resume = true;
  o.episodes = 8;
  auto resumed = rl::train_agent(o);
  ASSERT_FALSE(resumed);
  EXPECT_EQ(resumed.error().code, ErrorCode::kBadInput);
  EXPECT_NE(resumed.error().message.find(o.out), std::string::npos) << resumed.error().message;
  rl::RlSearchOptions ro;
  ro.agent_path = o.out;
  auto opt = rl::make_rl_optimizer(ro, library(), *m);
  ASSERT_FALSE(opt);
  EXPECT_EQ(opt.error().code, ErrorCode::kBadInput);
  fs::remove_all(dir);
}

// World models too: train-world-model --resume, train-agent --world-model and --policy read them
// through the same checked loader.
TEST(RlTrainingState, FlippedWorldModelBytesAreRefusedEverywhereTheyAreRead) {
  auto m = analytic();
  auto dir = temp_dir("wmflip");
  auto o = small_wm(dir, m.get());
  o.config.epochs = 1;
  ASSERT_TRUE(rl::train_world_model(o));
  rl::DreamTrainOptions d;
  d.world_model = o.out;
  d.models = o.models;
  d.library = &library();
  d.cost = m.get();
  d.config.hidden = 16;
  d.episodes = 4;
  d.batch = 4;
  d.eval_every = 0;
  d.out = (dir / "ctrl.pt").string();
  ASSERT_TRUE(rl::train_dream_agent(d));
  for (const std::string path : {o.out, d.out}) {
    std::string b = slurp(path);
    b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x04);
    spit(path, b);
  }
  auto r = o;
  r.resume = true;
  r.config.epochs = 2;
  auto resumed = rl::train_world_model(r);
  ASSERT_FALSE(resumed);
  EXPECT_EQ(resumed.error().code, ErrorCode::kBadInput);
  EXPECT_NE(resumed.error().message.find(o.out), std::string::npos) << resumed.error().message;
  d.out = (dir / "ctrl2.pt").string();
  auto dream = rl::train_dream_agent(d);
  ASSERT_FALSE(dream);
  EXPECT_NE(dream.error().message.find(o.out), std::string::npos) << dream.error().message;
  auto p = o;
  p.out = (dir / "wm2.pt").string();
  p.data_path = o.out + ".data";
  p.episodes = 20;  // four new episodes, to be collected by the (damaged) controller
  p.policy = (dir / "ctrl.pt").string();
  auto collected = rl::train_world_model(p);
  ASSERT_FALSE(collected);
  EXPECT_NE(collected.error().message.find(p.policy), std::string::npos) << collected.error().message;
  fs::remove_all(dir);
}

// train-world-model checkpoints every training.checkpoint_every epochs. A run killed at epoch 5
// (logged, not yet checkpointed) leaves the epoch-4 checkpoint; --resume cuts the log back to it
// and ends exactly where an uninterrupted run ends, every epoch logged once. A fresh run over the
// same files starts a new log.
TEST(RlTrainingState, WorldModelCheckpointsPeriodicallyAndResumesWithoutDuplicateLogLines) {
  auto m = analytic();
  auto dir = temp_dir("wmresume");
  auto straight = small_wm(dir, m.get());
  straight.out = (dir / "straight.pt").string();
  straight.log_path = (dir / "straight.jsonl").string();
  auto whole = rl::train_world_model(straight);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(log_keys(straight.log_path, "epoch"), one_to(6));

  auto o = small_wm(dir, m.get());
  EXPECT_THROW(rl::train_world_model(o,
                                     [](const rl::WorldModelMetrics& mm) {
                                       if (mm.epoch == 5) throw Killed{};
                                     }),
               Killed);
  auto meta = rl::checkpoint::read_meta(o.out);
  ASSERT_TRUE(meta) << meta.error().message;
  EXPECT_EQ(meta->value("epochs", 0), 4);
  EXPECT_EQ(log_keys(o.log_path, "epoch"), one_to(5));
  {
    std::ofstream(o.log_path, std::ios::app) << "{\"epoch\": 6, \"train_lo";  // a line cut short by the kill
  }
  o.resume = true;
  auto resumed = rl::train_world_model(o);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(log_keys(o.log_path, "epoch"), one_to(6));
  EXPECT_EQ(resumed->collected, 0);
  EXPECT_EQ(resumed->last.epoch, 6);
  EXPECT_DOUBLE_EQ(resumed->last.nll, whole->last.nll);
  EXPECT_DOUBLE_EQ(resumed->last.reward_mse, whole->last.reward_mse);
  EXPECT_DOUBLE_EQ(resumed->last.train_loss, whole->last.train_loss);

  o.resume = false;
  o.config.epochs = 2;
  ASSERT_TRUE(rl::train_world_model(o));
  EXPECT_EQ(log_keys(o.log_path, "epoch"), one_to(2));
  fs::remove_all(dir);
}

// A finished world model given --resume trains no further and reports its real held-out metrics
// (before: all zeros).
TEST(RlTrainingState, FinishedWorldModelResumedReportsItsHeldOutMetrics) {
  auto m = analytic();
  auto dir = temp_dir("wmdone");
  auto o = small_wm(dir, m.get());
  o.config.epochs = 2;
  auto first = rl::train_world_model(o);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_GT(first->last.nll, 0.0);
  o.resume = true;
  auto again = rl::train_world_model(o);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->last.epoch, 2);
  EXPECT_DOUBLE_EQ(again->last.nll, first->last.nll);
  EXPECT_DOUBLE_EQ(again->last.reward_mse, first->last.reward_mse);
  EXPECT_DOUBLE_EQ(again->last.done_accuracy, first->last.done_accuracy);
  EXPECT_DOUBLE_EQ(again->last.mask_accuracy, first->last.mask_accuracy);
  EXPECT_DOUBLE_EQ(again->last.count_mae, first->last.count_mae);
  EXPECT_DOUBLE_EQ(again->last.train_loss, first->last.train_loss);
  EXPECT_EQ(log_keys(o.log_path, "epoch"), one_to(2));  // nothing trained, nothing logged
  fs::remove_all(dir);
}

// train-agent with checkpoint_every 2, killed after update 3 was logged: --resume drops the
// update-3 line the checkpoint does not cover, and the finished log has each update once. A fresh
// run truncates the log.
TEST(RlTrainingState, AgentResumeAfterAKillKeepsTheLogFreeOfDuplicates) {
  auto m = analytic();
  auto dir = temp_dir("agentlog");
  auto o = small_agent(dir, m.get());
  EXPECT_THROW(rl::train_agent(o,
                               [](const rl::UpdateLog& u) {
                                 if (u.update == 3) throw Killed{};
                               }),
               Killed);
  auto info = rl::read_agent_info(o.out);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->updates, 2);
  EXPECT_EQ(log_keys(o.log_path, "update"), one_to(3));
  o.resume = true;
  auto resumed = rl::train_agent(o);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->updates, 6);
  EXPECT_EQ(log_keys(o.log_path, "update"), one_to(6));
  o.resume = false;
  o.episodes = 8;
  ASSERT_TRUE(rl::train_agent(o));
  EXPECT_EQ(log_keys(o.log_path, "update"), one_to(2));
  fs::remove_all(dir);
}

// The RL commands check every file they write against every file they read, and against each
// other, before any work: exit 2, one error line, the model untouched and nothing written.
TEST(RlTrainingState, CommandsRefuseOutputsThatAreInputs) {
  auto dir = temp_dir("guard");
  const fs::path model = dir / "m.onnx";
  fs::copy_file(fs::path(RLFLOW_SOURCE_DIR) / "tests/data/tiny_cnn.onnx", model);
  const std::string bytes = slurp(model);
  const std::string m = model.string(), a = (dir / "a.pt").string();
  const std::vector<std::vector<std::string>> refused = {
      {"train-agent", "--out", m, "--model", m, "--deterministic", "--episodes", "1"},
      {"train-world-model", "--out", m, "--model", m, "--deterministic", "--episodes", "1"},
      {"train-agent", "--log", m, "--model", m, "--out", a, "--deterministic", "--episodes", "1"},
      {"train-agent", "--log", a, "--model", m, "--out", a, "--deterministic", "--episodes", "1"},
      {"train-world-model", "--data", m, "--model", m, "--out", a, "--deterministic", "--episodes", "1"},
      {"train-world-model", "--data", a, "--model", m, "--out", a, "--deterministic", "--episodes", "1"},
      {"train-agent", "--out", (dir / "no" / "a.pt").string(), "--model", m, "--deterministic", "--episodes", "1"},
      {"train-agent", "--out", m, "--model", m, "--resume", "--deterministic", "--episodes", "1"},
  };
  for (const auto& args : refused) {
    auto r = rlflow_cli(args, dir);
    std::string line;
    for (const auto& s : args) line += s + " ";
    EXPECT_EQ(r.code, 2) << line << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << line << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("rlflow: error:", 0), 0u) << r.err;
    EXPECT_EQ(slurp(model), bytes) << line;
    EXPECT_FALSE(fs::exists(a)) << line;
  }
  fs::remove_all(dir);
}

// Through the binary: a checkpoint written by train-agent is resumed (--out is then read and
// rewritten: no clash); once a byte is flipped, --resume and optimise --agent exit 3 naming it.
TEST(RlTrainingState, CommandsRefuseADamagedCheckpointWithExit3) {
  auto dir = temp_dir("cliflip");
  const std::string m = (fs::path(RLFLOW_SOURCE_DIR) / "tests/data/tiny_cnn.onnx").string(), a = (dir / "a.pt").string();
  auto r = rlflow_cli({"train-agent", "--model", m, "--out", a, "--deterministic", "--episodes", "1"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  r = rlflow_cli({"train-agent", "--model", m, "--out", a, "--deterministic", "--episodes", "2", "--resume"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string b = slurp(a);
  b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x20);
  spit(a, b);
  r = rlflow_cli({"train-agent", "--model", m, "--out", a, "--deterministic", "--episodes", "3", "--resume"}, dir);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find(a), std::string::npos) << r.err;
  r = rlflow_cli({"optimise", m, "-o", (dir / "o.onnx").string(), "--search", "rl", "--agent", a, "--deterministic"}, dir);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find(a), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "o.onnx"));
  fs::remove_all(dir);
}

TEST(RlTrainingState, CommandsRefuseNonsenseNumbers) {
  auto dir = temp_dir("numbers");
  const std::string m = (fs::path(RLFLOW_SOURCE_DIR) / "tests/data/tiny_cnn.onnx").string(), a = (dir / "a.pt").string();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--episodes", "0"},     {"--dream-batch", "0"},          {"--eval-every", "-1"},           {"--temperature", "0"},
      {"--temperature", "-2"}, {"--temperature", "inf"},        {"--temperature", "nan"},         {"--uncertainty-penalty", "-0.5"},
      {"--uncertainty-penalty", "nan"}, {"--imitation-epochs", "-2"}, {"--dagger-rounds", "-5"},
  };
  for (const auto& [flag, value] : bad) {
    auto r = rlflow_cli({"train-agent", "--model", m, "--out", a, "--deterministic", flag, value}, dir);
    EXPECT_EQ(r.code, 2) << flag << " " << value << "\n" << r.err;
    EXPECT_EQ(r.err_lines(), 1) << flag << " " << value << "\n" << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(a));
  }
  auto r = rlflow_cli({"train-world-model", "--model", m, "--out", a, "--deterministic", "--episodes", "0"}, dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--episodes"), std::string::npos) << r.err;
  fs::remove_all(dir);
}
