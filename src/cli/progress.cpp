#include "progress.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>

namespace rlflow::cli {

bool progress_wanted(bool json, int fd) { return !json && isatty(fd) && spdlog::get_level() < spdlog::level::err; }

int terminal_width(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

namespace {

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t line_columns(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += continuation(c) ? 0 : 1;
  return n;
}

std::string fit_line(std::string_view text, int width) {
  std::string clean;
  clean.reserve(text.size());
  for (unsigned char c : text) clean += (c < 0x20 || c == 0x7F) ? '?' : static_cast<char>(c);
  const size_t room = static_cast<size_t>(std::max(width - 1, 1));
  if (line_columns(clean) <= room) return clean;
  const std::string_view ellipsis = room > 3 ? "..." : "";
  const size_t keep = room - ellipsis.size();
  // Cut after `keep` code points, never inside a UTF-8 sequence.
  size_t cols = 0, i = 0;
  for (; i < clean.size(); ++i) {
    if (!continuation(static_cast<unsigned char>(clean[i]))) {
      if (cols == keep) break;
      ++cols;
    }
  }
  return clean.substr(0, i) + std::string(ellipsis);
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long long t = std::llround(s);
  if (t < 60) std::snprintf(buf, sizeof buf, "%llds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  return buf;
}

// Stands in for the default logger's sinks while a line is drawn: erases the line, then hands the
// message to the logger's own sinks. The next draw puts the line back below the message.
class ProgressLine::LogSink final : public spdlog::sinks::sink {
 public:
  explicit LogSink(ProgressLine& line) : line_(line) {}
  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::recursive_mutex> lock(line_.mutex_);
    line_.erase_locked();
    for (auto& s : line_.saved_sinks_)
      if (s->should_log(msg.level)) s->log(msg);
  }
  void flush() override {
    std::lock_guard<std::recursive_mutex> lock(line_.mutex_);
    for (auto& s : line_.saved_sinks_) s->flush();
  }
  void set_pattern(const std::string& pattern) override {
    for (auto& s : line_.saved_sinks_) s->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    for (auto& s : line_.saved_sinks_) s->set_formatter(f->clone());
  }

 private:
  ProgressLine& line_;
};

namespace {

// Ctrl-C while a line is drawn: the handler erases the line ("\r", clear to the end of the line:
// one write, async-signal-safe), then does what was installed before it (the default handler ends
// the process, as it would have; Python's sets its flag and KeyboardInterrupt follows), so the
// shell prompt does not land after a half line. One line at a time owns it.
std::atomic<int> g_interrupt_fd{-1};
struct sigaction g_previous_sigint {};

extern "C" void erase_line_on_sigint(int sig) {
  if (const int fd = g_interrupt_fd.load(); fd >= 0) {
    static const char kErase[] = "\r\x1b[K";
    const ssize_t n = ::write(fd, kErase, sizeof kErase - 1);
    (void)n;
  }
  if (g_previous_sigint.sa_flags & SA_SIGINFO) {
    if (g_previous_sigint.sa_sigaction) g_previous_sigint.sa_sigaction(sig, nullptr, nullptr);
  } else if (g_previous_sigint.sa_handler == SIG_IGN) {
  } else if (g_previous_sigint.sa_handler == SIG_DFL) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  } else {
    g_previous_sigint.sa_handler(sig);
  }
}

}  // namespace

ProgressLine::ProgressLine(bool enabled, Render render) : ProgressLine(enabled, std::move(render), Options{}) {}

ProgressLine::ProgressLine(bool enabled, Render render, Options options)
    : enabled_(enabled && static_cast<bool>(render)), render_(std::move(render)), opt_(options) {
  if (!enabled_) return;
  if (opt_.hook_logger) {
    if (auto logger = spdlog::default_logger()) {
      saved_sinks_ = logger->sinks();
      logger->sinks() = {std::make_shared<LogSink>(*this)};
      hooked_ = true;
    }
  }
  int none = -1;
  if (g_interrupt_fd.compare_exchange_strong(none, opt_.fd)) {
    struct sigaction sa {};
    sa.sa_handler = erase_line_on_sigint;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGINT, &sa, &g_previous_sigint) == 0) owns_interrupt_ = true;
    else g_interrupt_fd = -1;
  }
  thread_ = std::thread([this] { loop(); });
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const std::function<void()>& change) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  change();
}

void ProgressLine::print(const std::function<void()>& out) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  erase_locked();
  out();
  std::fflush(stdout);
}

void ProgressLine::finish() {
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    stopped_ = true;
    erase_locked();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (owns_interrupt_) {  // the handler of before, back
    ::sigaction(SIGINT, &g_previous_sigint, nullptr);
    g_interrupt_fd = -1;
    owns_interrupt_ = false;
  }
  if (hooked_) {
    // Only the thread that made the line logs now (the work it watched has returned), so the
    // logger's sink list can be given back.
    if (auto logger = spdlog::default_logger()) logger->sinks() = saved_sinks_;
    hooked_ = false;
  }
}

void ProgressLine::loop() {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  const auto period = std::chrono::duration<double>(opt_.period_s);
  wake_.wait_for(lock, std::chrono::duration<double>(opt_.first_draw_s), [this] { return stopped_; });
  while (!stopped_) {
    draw_locked();
    wake_.wait_for(lock, period, [this] { return stopped_; });
  }
}

void ProgressLine::draw_locked() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int width = terminal_width(opt_.fd);
  const std::string text = fit_line(render_(elapsed), width);
  const size_t cols = line_columns(text);
  std::string out = "\r";
  out += text;
  // Blank what is left of a longer previous line, within this width (a narrower terminal would
  // wrap the padding).
  const size_t limit = std::min(drawn_columns_, static_cast<size_t>(std::max(width - 1, 1)));
  if (limit > cols) out.append(limit - cols, ' ');
  write_all(out);
  drawn_columns_ = cols;
}

void ProgressLine::erase_locked() {
  if (drawn_columns_ == 0) return;
  const size_t cols = std::min(drawn_columns_, static_cast<size_t>(std::max(terminal_width(opt_.fd) - 1, 1)));
  std::string out(cols + 2, ' ');
  out.front() = out.back() = '\r';
  write_all(out);
  drawn_columns_ = 0;
}

void ProgressLine::write_all(const std::string& bytes) const {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(opt_.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away: the line is only decoration
    done += static_cast<size_t>(n);
  }
}

}  // namespace rlflow::cli
