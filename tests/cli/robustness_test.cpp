// A careless or hostile user's inputs (issue 30): no data lost, no wrong result passed, memory
// bounded, one clean refusal with a distinct exit code, and no file left behind.
#include <sys/stat.h>

#include "cli/common.h"

#include <onnx/checker.h>

using namespace rlflow_cli_test;

namespace {

onnx::ValueInfoProto* typed(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  return vi;
}

onnx::ModelProto model_shell(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                          const std::string& name = "") {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

void save(const onnx::ModelProto& m, const fs::path& p) { std::ofstream(p, std::ios::binary) << m.SerializeAsString(); }

// y = Relu(MatMul(x, w)), x: [1, 8], w: [8, 8] stored in `data_name` beside the model.
void write_external_data_model(const fs::path& p, const std::string& data_name) {
  auto m = model_shell();
  auto* g = m.mutable_graph();
  typed(g->add_input(), "x", {1, 8});
  typed(g->add_output(), "y", {1, 8});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(8);
  w->add_dims(8);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", data_name}, {"offset", std::string("0")}, {"length", std::string("256")}}) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  std::ofstream(p.parent_path() / data_name, std::ios::binary).write(reinterpret_cast<const char*>(values.data()), 256);
  add_node(m, "MatMul", {"x", "w"}, {"h"}, "mm");
  add_node(m, "Relu", {"h"}, {"y"}, "relu");
  save(m, p);
}

bool has_temp_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

// ---- data loss ----

TEST(Robustness, OutputNamingTheInputsExternalWeightsIsRefusedAndTheWeightsSurvive) {
  TempDir d;
  write_external_data_model(d / "ext.onnx", "ext.data");
  const std::string before = slurp(d / "ext.data");
  auto r = rlflow({"optimise", (d / "ext.onnx").string(), "-o", (d / "ext.data").string(), "--search", "none"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_error_line(r, "ext.data");
  EXPECT_EQ(slurp(d / "ext.data"), before);
  // -o ext would put its own weights file at ext.data, the input's.
  r = rlflow({"optimise", (d / "ext.onnx").string(), "-o", (d / "ext").string(), "--search", "none"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(slurp(d / "ext.data"), before);
  EXPECT_FALSE(fs::exists(d / "ext"));
  // Elsewhere it works, and the weights are read from the external file.
  r = rlflow({"optimise", (d / "ext.onnx").string(), "-o", (d / "out.onnx").string(), "--search", "none"});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Robustness, OutputThatIsNotARegularFileIsRefusedAndLeftAlone) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  ASSERT_EQ(mkfifo((d / "fifo").c_str(), 0600), 0);
  fs::create_directory(d / "dir");
  for (const auto& out : {d / "fifo", d / "dir"}) {
    auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", out.string(), "--search", "none"});
    EXPECT_EQ(r.code, 2) << out << ": " << r.err;
    expect_one_error_line(r, "regular files");
  }
  EXPECT_TRUE(fs::is_fifo(d / "fifo"));
  EXPECT_TRUE(fs::is_directory(d / "dir"));
  auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", "/dev/null", "--search", "none"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(Robustness, BadOutputPathsAreRefusedBeforeAnyWork) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  // A search that would take long if it ran: the refusal comes first, with nothing on stdout.
  for (const auto& out : {std::string(), (d / "missing" / "o.onnx").string()}) {
    auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", out, "--search", "taso", "--budget", "100000"});
    EXPECT_EQ(r.code, 2) << "'" << out << "': " << r.err;
    expect_one_error_line(r);
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(Robustness, OutputKeepsTheModeOfTheFileItReplacesAndHonoursTheUmask) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  std::ofstream(d / "old.onnx") << "previous";
  fs::permissions(d / "old.onnx", fs::perms::owner_read | fs::perms::owner_write);
  auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", (d / "old.onnx").string(), "--search", "none"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fs::status(d / "old.onnx").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string cmd = "umask 077 && " + quote(RLFLOW_BINARY) + " optimise " + quote((d / "m.onnx").string()) + " -o " +
                          quote((d / "new.onnx").string()) + " --search none 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(fs::status(d / "new.onnx").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

// ---- wrong results let through ----

TEST(Robustness, NonFiniteOrNegativeTolerancesAreUsageErrors) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--atol", "nan"}, {"--rtol", "nan"}, {"--atol", "-1"}, {"--rtol", "inf"}, {"--atol", "NaN"}}) {
    auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", (d / "o.onnx").string(), flag, value});
    EXPECT_EQ(r.code, 2) << flag << " " << value << ": " << r.err;
    expect_one_error_line(r, flag);
    EXPECT_FALSE(fs::exists(d / "o.onnx"));
  }
  write_tensor(d / "input_0.pb", {1, 4}, {-1, 2, -3, 4});
  write_tensor(d / "output_0.pb", {1, 4}, {0, 2, 0, 4});
  auto r = rlflow({"run", (d / "m.onnx").string(), "--data-dir", d.path().string(), "--atol", "nan"});
  EXPECT_EQ(r.code, 2) << r.err;
}

// ---- memory and hangs ----

TEST(Robustness, AModelWhoseRunWouldExhaustMemoryIsRefusedNamingTheTensor) {
  TempDir d;
  auto m = model_shell();
  typed(m.mutable_graph()->add_input(), "x", {65536, 65536});
  typed(m.mutable_graph()->add_output(), "y", {65536, 65536});
  add_node(m, "Relu", {"x"}, {"y"}, "relu");
  save(m, d / "huge.onnx");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"optimise", (d / "huge.onnx").string(), "-o", (d / "o.onnx").string()},
                                               {"cost", (d / "huge.onnx").string(), "--cost-model", "cpu"},
                                               {"bench", (d / "huge.onnx").string(), "--target", "cpu"}}) {
    auto r = rlflow(args);
    EXPECT_EQ(r.code, 3) << args[0] << ": " << r.err;
    expect_one_error_line(r, "input 'x'");
  }
  // `info` runs nothing, so it still describes the model.
  EXPECT_EQ(rlflow({"info", (d / "huge.onnx").string()}).code, 0);
  EXPECT_FALSE(fs::exists(d / "o.onnx"));
  EXPECT_FALSE(has_temp_files(d.path()));
}

TEST(Robustness, AnInputShapeTooLargeForMemoryIsRefusedAndLeavesNoTemporaryFile) {
  TempDir d;
  auto r = rlflow({"optimise", (kData / "dynamic_linear.onnx").string(), "-o", (d / "o.onnx").string(), "--input-shape",
                   "x:4000000,4096,64"});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "memory limit");
  EXPECT_TRUE(d.entries().empty());
  // --memory-limit sets the limit: 1 MiB is below even this small model at a larger size.
  r = rlflow({"optimise", (kData / "dynamic_linear.onnx").string(), "-o", (d / "o.onnx").string(), "--input-shape", "x:8,1024,64",
              "--memory-limit", "1"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(d.entries().empty());
}

// Issue 41: a FIFO as the model or as --rules blocked forever; `optimise <(cat m.onnx)` said "the
// model has no graph". Each is refused at once, naming what it is.
TEST(Robustness, AFifoIsRefusedNotWaitedOn) {
  TempDir d;
  const auto fifo = d / "m.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = rlflow({"info", fifo.string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "fifo");
  r = rlflow({"optimise", (kData / "tiny_cnn.onnx").string(), "-o", (d / "o.onnx").string(), "--rules", fifo.string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "fifo");
  EXPECT_FALSE(fs::exists(d / "o.onnx"));
}

// A KV-cache decoder's mask is "past_sequence_length + sequence_length": --input-shape sizes that
// disagree with it are one usage error, not a verification failure (exit 4) after the work.
TEST(Robustness, InputShapesMustAgreeWithADimExpression) {
  TempDir d;
  const auto model = (kData / "kv_cache_decoder.onnx").string();
  std::vector<std::string> args{"optimise", model, "-o", (d / "o.onnx").string(), "--search", "none",
                                "--input-shape", "x:1,1,16", "--input-shape", "past_key:1,2,1,8", "--input-shape", "past_value:1,2,1,8",
                                "--input-shape", "attention_mask:1,1"};
  auto r = rlflow(args);
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_error_line(r, "past_sequence_length + sequence_length");
  args.back() = "attention_mask:1,2";
  r = rlflow(args);
  EXPECT_EQ(r.code, 0) << r.err;
}

// Issue 41: --input-shape that changes a static dim wrote a file declaring the new size. optimise
// refuses it (exit 2, naming the axis); info may still look at the model at another size.
TEST(Robustness, AnInputShapeCannotChangeAStaticDimOfTheWrittenFile) {
  TempDir d;
  auto r = rlflow({"optimise", (kData / "tiny_cnn.onnx").string(), "-o", (d / "o.onnx").string(), "--input-shape", "x:8,3,64,64"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_error_line(r, "axis 0 is 1 in the model");
  EXPECT_TRUE(d.entries().empty());
  auto info = rlflow({"info", (kData / "tiny_cnn.onnx").string(), "--input-shape", "x:8,3,64,64"});
  EXPECT_EQ(info.code, 0) << info.err;
}

TEST(Robustness, ThreadCountsAreBounded) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  auto r = rlflow({"bench", (d / "m.onnx").string(), (d / "m.onnx").string(), "--threads", "100000"});
  EXPECT_EQ(r.code, 2) << r.err;
  expect_one_error_line(r, "--threads");
  r = rlflow({"optimise", (d / "m.onnx").string(), "-o", (d / "o.onnx").string(), "--bench-threads", "100000"});
  EXPECT_EQ(r.code, 2) << r.err;
}

// ---- exit codes of valid and invalid models ----

TEST(Robustness, AGraphWhoseOutputIsItsInputRoundTrips) {
  TempDir d;
  auto m = model_shell();
  typed(m.mutable_graph()->add_input(), "x", {2, 3});
  typed(m.mutable_graph()->add_output(), "x", {2, 3});
  save(m, d / "pass.onnx");
  auto r = rlflow({"optimise", (d / "pass.onnx").string(), "-o", (d / "o.onnx").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  onnx::ModelProto out;
  std::ifstream f(d / "o.onnx", std::ios::binary);
  ASSERT_TRUE(out.ParseFromIstream(&f));
  EXPECT_NO_THROW(onnx::checker::check_model(out));
  ASSERT_EQ(out.graph().output_size(), 1);
  EXPECT_EQ(out.graph().output(0).name(), "x");
  EXPECT_EQ(out.graph().input(0).name(), "x");
}

TEST(Robustness, UnknownOrEmptyOpTypesAreRefusedAsUnsupportedNotInternal) {
  TempDir d;
  for (const std::string op : {"FooBar", ""}) {
    auto m = model_shell();
    typed(m.mutable_graph()->add_input(), "x", {2, 3});
    typed(m.mutable_graph()->add_output(), "z", {2, 3});
    typed(m.mutable_graph()->add_value_info(), "y", {2, 3});
    add_node(m, op, {"x"}, {"y"}, "odd");
    add_node(m, "Relu", {"y"}, {"z"}, "relu");
    save(m, d / "m.onnx");
    auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", (d / "o.onnx").string()});
    EXPECT_EQ(r.code, 3) << "'" << op << "': " << r.err;
    expect_one_error_line(r, op.empty() ? "empty op_type" : "FooBar");
    EXPECT_FALSE(fs::exists(d / "o.onnx"));
  }
}

TEST(Robustness, AZeroSizeDimensionSaysWhatToPass) {
  TempDir d;
  auto m = model_shell();
  typed(m.mutable_graph()->add_input(), "x", {0, 3});
  typed(m.mutable_graph()->add_output(), "y", {0, 3});
  add_node(m, "Relu", {"x"}, {"y"}, "relu");
  save(m, d / "zero.onnx");
  auto r = rlflow({"optimise", (d / "zero.onnx").string(), "-o", (d / "o.onnx").string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "--input-shape x:1,3");
  // What it suggests works.
  r = rlflow({"optimise", (d / "zero.onnx").string(), "-o", (d / "o.onnx").string(), "--input-shape", "x:1,3"});
  EXPECT_EQ(r.code, 0) << r.err;
}

// ---- leftovers and late checks ----

TEST(Robustness, NonsenseNumbersAreUsageErrors) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--time-limit", "-1"}, {"--time-limit", "nan"},  {"--time-limit", "inf"},      {"--budget", "-5"},
      {"--memory-limit", "0"}, {"--candidates", "0"},   {"--seed", "-1"},            {"--bench-rounds", "-1"},
      {"--bench-max-seconds", "-1"}, {"--bench-threads", "-1"}, {"--alpha", "nan"}, {"--beam", "-1"}};
  for (const auto& [flag, value] : bad) {
    auto r = rlflow({"optimise", (d / "m.onnx").string(), "-o", (d / "o.onnx").string(), flag, value});
    EXPECT_EQ(r.code, 2) << flag << " " << value << ": " << r.err;
    expect_one_error_line(r, flag);
  }
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--rounds", "0"}, {"--warmup", "-1"}, {"--max-seconds", "nan"}, {"--seed", "-1"}}) {
    auto r = rlflow({"bench", (d / "m.onnx").string(), "--target", "cpu", flag, value});
    EXPECT_EQ(r.code, 2) << flag << " " << value << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(d / "o.onnx"));
}

TEST(Robustness, NamesWithControlBytesStayOnOneErrorLine) {
  TempDir d;
  auto m = model_shell();
  typed(m.mutable_graph()->add_input(), "x", {1, 4});
  typed(m.mutable_graph()->add_output(), "y", {1, 4});
  add_node(m, "Relu", {std::string("a\0b\nc", 5)}, {"y"}, "relu");
  save(m, d / "nul.onnx");
  auto r = rlflow({"optimise", (d / "nul.onnx").string(), "-o", (d / "o.onnx").string()});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "a\\x00b\\x0ac");
  EXPECT_NE(r.err.find("which no node"), std::string::npos) << r.err;  // the message goes on past the NUL
}

TEST(Robustness, BenchReportsACorruptSecondFileAsItsFirstLine) {
  TempDir d;
  write_relu_model(d / "m.onnx");
  std::ofstream(d / "corrupt.onnx") << "this is not a protobuf";
  auto r = rlflow({"bench", (d / "m.onnx").string(), (d / "corrupt.onnx").string(), "--rounds", "1"});
  EXPECT_EQ(r.code, 3) << r.err;
  expect_one_error_line(r, "corrupt.onnx");
}
