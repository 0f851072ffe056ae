#pragma once
// One status line on stderr for the long commands (optimise, bench, train-agent,
// train-world-model), drawn only where a person watches it: stderr is a terminal, the command is
// not quiet (-q) and does not print --json. Elsewhere nothing is drawn, so logs, pipes and JSON
// consumers never see a carriage return.
//
// The line is redrawn by its own thread, at most 10 times a second, from a render function the
// command supplies: times (elapsed, time left) keep moving while the work is between callbacks.
// Each draw fits the terminal's current width (no wrapping, no stale characters). Log messages
// (spdlog) erase the line before they print, and the next draw puts it back. The destructor
// erases it, so an early return or an exception leaves the terminal clean, and so does Ctrl-C: while
// a line is drawn, SIGINT erases it first and then does what it did before.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace spdlog::sinks {
class sink;
}

namespace rlflow::cli {

// Whether a progress line belongs on `fd`: a terminal, the log level below error (not -q), not --json.
bool progress_wanted(bool json, int fd = STDERR_FILENO);

// The terminal's width in columns; 80 when `fd` is not a terminal or does not say.
int terminal_width(int fd = STDERR_FILENO);

// `text` made safe for one line of `width` columns: control characters become '?', and the text
// is cut (with "...") to width - 1 characters, so that the last column stays free and no terminal
// wraps. UTF-8 sequences count as one column and are never cut in half.
std::string fit_line(std::string_view text, int width);

// Columns `text` takes (UTF-8 code points).
size_t line_columns(std::string_view text);

// 7s, 3m05s, 2h04m. Negative or not finite: "?".
std::string format_duration(double seconds);

class ProgressLine {
 public:
  // The line's text given the seconds since the line was made. Called with the line's lock held,
  // on the drawing thread: it must not log.
  using Render = std::function<std::string(double elapsed_s)>;
  struct Options {
    int fd = STDERR_FILENO;
    double period_s = 0.1;       // between draws
    double first_draw_s = 0.25;  // a command done sooner never shows the line
    bool hook_logger = true;     // route the default spdlog logger's messages through the line (erase, log, redraw)
  };

  // Draws nothing unless `enabled` (see progress_wanted).
  ProgressLine(bool enabled, Render render);
  ProgressLine(bool enabled, Render render, Options options);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Runs `change` (which updates what the render function reads) under the line's lock. The next
  // draw shows it. It must not log.
  void update(const std::function<void()>& change);
  // Erases the line, runs `out` (which prints part of the command's result) and flushes stdout;
  // the line comes back below it at the next draw. `out` must not log.
  void print(const std::function<void()>& out);
  // Erases the line and stops drawing for good; the logger is given back its own sinks. Call it
  // before printing the command's result or error. Safe to call more than once.
  void finish();

 private:
  class LogSink;
  void draw_locked();
  void erase_locked();
  void write_all(const std::string& bytes) const;
  void loop();

  const bool enabled_;
  Render render_;
  Options opt_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::recursive_mutex mutex_;
  std::condition_variable_any wake_;
  bool stopped_ = false;
  size_t drawn_columns_ = 0;  // of the text now on the terminal; 0: nothing drawn
  std::thread thread_;
  std::vector<std::shared_ptr<spdlog::sinks::sink>> saved_sinks_;
  bool hooked_ = false;
  bool owns_interrupt_ = false;  // this line's SIGINT handler is installed
};

}  // namespace rlflow::cli
