// `rlflow optimise`: the pipeline (include/rlflow/pipeline/optimise.h) with a progress line on a
// terminal, its report on stdout, and its error as an exit code.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "rlflow/cli/app.h"

namespace rlflow::cli {

int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o) {
  pipeline::OptimiseHooks hooks;
  const bool tty = !g.json && isatty(STDERR_FILENO) && spdlog::get_level() < spdlog::level::err;
  if (tty)
    hooks.progress = [](const search::Report& r, double best) {
      std::fprintf(stderr, "\r[search] expanded %lld, unique %lld, best cost %.4f ms, %.1fs   ", static_cast<long long>(r.expanded),
                   static_cast<long long>(r.unique_graphs), best, r.seconds_total);
    };
  auto report = pipeline::optimise(o, hooks);
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  if (!report) return report_error(g, report.error());
  if (g.json) std::cout << json_text(report->to_json()) << std::endl;
  else report->print(stdout);
  return kOk;
}

}  // namespace rlflow::cli
