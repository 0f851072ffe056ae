// The progress line of the long commands (src/cli/progress.h): drawn on a terminal (a
// pseudo-terminal here), fitted to its width, erased at the end and before log messages; never
// drawn where stderr is not a terminal, with -q, or with --json.
#include "cli/common.h"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>

#include <chrono>
#include <thread>

#include "cli/progress.h"

using namespace rlflow_cli_test;
using rlflow::cli::fit_line;
using rlflow::cli::format_duration;
using rlflow::cli::line_columns;
using rlflow::cli::ProgressLine;

namespace {

// A pseudo-terminal `width` columns wide; the slave side stands in for the user's stderr.
struct Pty {
  int master = -1, slave = -1;
  explicit Pty(int width) {
    winsize ws{};
    ws.ws_col = static_cast<unsigned short>(width);
    ws.ws_row = 24;
    if (openpty(&master, &slave, nullptr, nullptr, &ws) != 0) master = slave = -1;
    if (master >= 0) fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  }
  ~Pty() {
    if (slave >= 0) close(slave);
    if (master >= 0) close(master);
  }
  // Everything written to the slave so far.
  std::string drain() const {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(master, buf, sizeof buf);
      if (n > 0) out.append(buf, static_cast<size_t>(n));
      else if (n < 0 && errno == EINTR) continue;
      else break;
    }
    return out;
  }
};

// The texts drawn, in order: what lies between carriage returns (and line feeds).
std::vector<std::string> segments(const std::string& tty) {
  std::vector<std::string> out{""};
  for (char c : tty) {
    if (c == '\r' || c == '\n') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

bool blank(const std::string& s) { return s.find_first_not_of(' ') == std::string::npos; }

// Erased at the end: the last thing written is "\r<spaces>\r".
void expect_erased_at_end(const std::string& tty) {
  ASSERT_GE(tty.size(), 2u);
  EXPECT_EQ(tty.back(), '\r') << tty;
  const size_t prev = tty.rfind('\r', tty.size() - 2);
  ASSERT_NE(prev, std::string::npos) << tty;
  EXPECT_TRUE(blank(tty.substr(prev + 1, tty.size() - prev - 2))) << tty;
}

ProgressLine::Options fast(int fd, bool hook_logger = false) {
  ProgressLine::Options o;
  o.fd = fd;
  o.period_s = 0.01;
  o.first_draw_s = 0;
  o.hook_logger = hook_logger;
  return o;
}

void wait_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

// ---- the helpers ----

TEST(ProgressText, DurationsReadAsTime) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(7.4), "7s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(7440), "2h04m");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "?");
}

TEST(ProgressText, FitLeavesTheLastColumnFreeAndNeverSplitsACharacter) {
  EXPECT_EQ(fit_line("short", 80), "short");
  const std::string long_text(200, 'x');
  EXPECT_EQ(fit_line(long_text, 40).size(), 39u);
  EXPECT_EQ(fit_line(long_text, 40).substr(36), "...");
  // Control characters (a model name with a newline, say) cannot move the cursor.
  EXPECT_EQ(fit_line("a\nb\rc\x1b[2Jd", 80), "a?b?c?[2Jd");
  // UTF-8: columns are code points, and a cut falls between them.
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "\xC3\xA9";  // e-acute
  const std::string fitted = fit_line(accents, 20);
  EXPECT_EQ(line_columns(fitted), 19u);
  EXPECT_EQ(fitted.substr(0, 2), "\xC3\xA9");
  EXPECT_EQ(fitted.size(), 16u * 2 + 3);
  EXPECT_EQ(line_columns(fit_line(long_text, 1)), 1u);
}

// ---- the line on a pseudo-terminal ----

TEST(ProgressLineOnATerminal, DrawsWithinTheWidthAndErasesAtTheEnd) {
  Pty pty(30);
  ASSERT_GE(pty.slave, 0) << "no pseudo-terminal";
  int n = 0;
  {
    ProgressLine line(true, [&n](double) { return (n++ % 2 ? std::string(100, 'a') : std::string("b")); }, fast(pty.slave));
    ASSERT_TRUE(line.enabled());
    wait_ms(150);
  }  // the destructor erases
  const std::string tty = pty.drain();
  ASSERT_GT(n, 2) << "the line was drawn " << n << " times";
  for (const auto& s : segments(tty)) EXPECT_LE(line_columns(s), 29u) << "a draw wider than the terminal wraps: " << s.size();
  // A short text after a long one blanks what the long one left.
  EXPECT_NE(tty.find("\rb" + std::string(28, ' ')), std::string::npos) << tty;
  expect_erased_at_end(tty);
}

TEST(ProgressLineOnATerminal, DisabledWritesNothing) {
  Pty pty(80);
  ASSERT_GE(pty.slave, 0);
  int n = 0;
  {
    ProgressLine line(false, [&n](double) { return std::to_string(++n); }, fast(pty.slave));
    EXPECT_FALSE(line.enabled());
    bool changed = false;
    line.update([&] { changed = true; });
    EXPECT_TRUE(changed);  // the state still moves; only the drawing is off
    wait_ms(50);
  }
  EXPECT_EQ(n, 0);
  EXPECT_EQ(pty.drain(), "");
}

TEST(ProgressLineOnATerminal, ACommandDoneBeforeTheFirstDrawShowsNothing) {
  Pty pty(80);
  ASSERT_GE(pty.slave, 0);
  auto o = fast(pty.slave);
  o.first_draw_s = 5;
  { ProgressLine line(true, [](double) { return std::string("working"); }, o); }
  EXPECT_EQ(pty.drain(), "");
}

namespace {

// A log sink writing to the pseudo-terminal, as spdlog's stderr sink writes to the user's.
class FdSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FdSink(int fd) : fd_(fd) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string s(msg.payload.data(), msg.payload.size());
    s += "\n";
    (void)!write(fd_, s.data(), s.size());
  }
  void flush_() override {}

 private:
  int fd_;
};

}  // namespace

TEST(ProgressLineOnATerminal, LogMessagesEraseTheLineFirstAndTheLoggerIsGivenBack) {
  Pty pty(60);
  ASSERT_GE(pty.slave, 0);
  auto previous = spdlog::default_logger();
  auto sink = std::make_shared<FdSink>(pty.slave);
  auto logger = std::make_shared<spdlog::logger>("progress_test", sink);
  spdlog::set_default_logger(logger);
  {
    ProgressLine line(true, [](double) { return std::string("[test] working on it"); }, fast(pty.slave, /*hook_logger=*/true));
    wait_ms(50);
    spdlog::warn("a warning");
    wait_ms(50);
    line.finish();
    EXPECT_EQ(logger->sinks().size(), 1u);
    EXPECT_EQ(logger->sinks().front(), sink);
    line.finish();  // twice is harmless
  }
  spdlog::set_default_logger(previous);
  const std::string tty = pty.drain();
  const size_t at = tty.find("a warning");
  ASSERT_NE(at, std::string::npos) << tty;
  ASSERT_GT(at, 0u);
  // Just before the message: the line blanked and the cursor back at column 0.
  EXPECT_EQ(tty[at - 1], '\r') << tty;
  const size_t prev = tty.rfind('\r', at - 2);
  ASSERT_NE(prev, std::string::npos);
  EXPECT_TRUE(blank(tty.substr(prev + 1, at - 2 - prev))) << tty;
  // The line came back after it.
  EXPECT_NE(tty.find("[test] working on it", at), std::string::npos) << tty;
  expect_erased_at_end(tty);
}

// ---- the binary ----

namespace {

struct TtyResult {
  int code = -1;
  std::string out;  // stdout (a file)
  std::string tty;  // what the terminal got on stderr
};

// Runs `rlflow ARGS...` with stderr on a pseudo-terminal `width` columns wide and stdout in a file.
TtyResult rlflow_on_tty(const std::vector<std::string>& args, int width = 60) {
  TtyResult r;
  Pty pty(width);
  if (pty.slave < 0) return r;
  TempDir io;
  const std::string out_path = (io / "stdout").string();
  std::vector<std::string> argv_s{RLFLOW_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int in = open("/dev/null", O_RDONLY), out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(pty.slave, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // Keep reading while it runs: a full pseudo-terminal buffer would block its writes.
  int status = 0;
  for (;;) {
    r.tty += pty.drain();
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    wait_ms(10);
  }
  r.tty += pty.drain();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  return r;
}

// z = MatMul(x, y) for x, y: float[384, 384]: about a millisecond a run on the reference executor.
void write_matmul_model(const fs::path& p) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("progress_test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("matmul");
  for (auto [vi, name] : {std::pair{g->add_input(), "x"}, std::pair{g->add_input(), "y"}, std::pair{g->add_output(), "z"}}) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(384);
    tt->mutable_shape()->add_dim()->set_dim_value(384);
  }
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->set_name("matmul");
  n->add_input("x");
  n->add_input("y");
  n->add_output("z");
  std::ofstream(p, std::ios::binary) << m.SerializeAsString();
}

// A bench of about a second (1000 rounds of the MatMul, or fewer when --max-seconds ends it): long
// enough for the line's first draw at a quarter of a second, few enough rounds that the statistics
// at the end are quick.
std::vector<std::string> long_bench(const fs::path& dir) {
  write_matmul_model(dir / "matmul.onnx");
  return {"bench", (dir / "matmul.onnx").string(), "--target", "cpu", "--threads", "1", "--warmup", "0", "--rounds", "1000", "--max-seconds", "1"};
}

}  // namespace

TEST(ProgressBinary, BenchDrawsALineOnATerminalWithinItsWidthAndErasesIt) {
  TempDir dir;
  auto r = rlflow_on_tty(long_bench(dir.path()), 50);
  ASSERT_EQ(r.code, 0) << r.tty;
  EXPECT_NE(r.tty.find("[bench] threads 1: round "), std::string::npos) << r.tty;
  EXPECT_NE(r.tty.find(" left"), std::string::npos) << r.tty;
  for (const auto& s : segments(r.tty)) EXPECT_LE(line_columns(s), 49u) << s;
  expect_erased_at_end(r.tty);
  EXPECT_NE(r.out.find("rounds in random order"), std::string::npos) << r.out;  // the table, on stdout
}

TEST(ProgressBinary, QuietAndJsonDrawNothingOnATerminal) {
  TempDir dir;
  for (const std::string flag : {"-q", "--json"}) {
    auto args = long_bench(dir.path());
    args.push_back(flag);
    auto r = rlflow_on_tty(args);
    ASSERT_EQ(r.code, 0) << flag << ": " << r.tty;
    EXPECT_EQ(r.tty.find('\r'), std::string::npos) << flag << ": " << r.tty;
    EXPECT_EQ(r.tty.find("[bench]"), std::string::npos) << flag << ": " << r.tty;
    if (flag == "--json") EXPECT_TRUE(parse_json(r.out).is_object()) << r.out;
  }
}

// Where stderr is a file (a pipe, a log, CI), optimise and bench write no progress at all.
TEST(ProgressBinary, NothingDrawnWhereStderrIsNotATerminal) {
  TempDir dir;
  for (bool json_flag : {false, true}) {
    std::vector<std::string> args{"optimise", (kData / "tiny_cnn.onnx").string(), "-o", (dir / "out.onnx").string(), "--deterministic",
                                  "--cost-model", "analytic"};
    if (json_flag) args.push_back("--json");
    auto r = rlflow_cli_test::rlflow(args);
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string* s : {&r.out, &r.err}) {
      EXPECT_EQ(s->find('\r'), std::string::npos) << *s;
      EXPECT_EQ(s->find("[search]"), std::string::npos) << *s;
      EXPECT_EQ(s->find("[optimise]"), std::string::npos) << *s;
    }
    if (json_flag) EXPECT_TRUE(parse_json(r.out).is_object()) << r.out;
  }
  auto b = rlflow_cli_test::rlflow(long_bench(dir.path()));
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(b.err.find('\r'), std::string::npos) << b.err;
  EXPECT_EQ(b.err.find("[bench]"), std::string::npos) << b.err;
}

namespace {
volatile sig_atomic_t g_interrupts = 0;
extern "C" void count_interrupt(int) { g_interrupts = g_interrupts + 1; }
}  // namespace

// Ctrl-C while a line is drawn erases it before the handler of before runs (the default one ends
// the process: then the prompt starts on a clean line); once the line is finished, SIGINT is the
// caller's again.
TEST(ProgressLineOnATerminal, AnInterruptErasesTheLineAndReachesTheHandlerOfBefore) {
  Pty pty(40);
  ASSERT_GE(pty.slave, 0) << "no pseudo-terminal";
  struct sigaction mine {}, saved {};
  mine.sa_handler = count_interrupt;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGINT, &mine, &saved), 0);
  g_interrupts = 0;
  {
    ProgressLine line(true, [](double) { return std::string("working"); }, fast(pty.slave));
    wait_ms(50);
    pty.drain();
    raise(SIGINT);
    EXPECT_EQ(g_interrupts, 1);
    EXPECT_NE(pty.drain().find("\r\x1b[K"), std::string::npos);
  }
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGINT, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &count_interrupt);
  raise(SIGINT);
  EXPECT_EQ(g_interrupts, 2);
  const std::string after = pty.drain();
  EXPECT_EQ(after.find("\x1b[K"), std::string::npos) << "a finished line still erases on SIGINT";
  sigaction(SIGINT, &saved, nullptr);
}
