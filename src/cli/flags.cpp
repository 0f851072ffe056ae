#include "flags.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "rlflow/exec/compare.h"
#include "rlflow/pipeline/target.h"

namespace rlflow::cli {

CLI::Validator number_at_least(double lo, bool strictly) {
  const std::string desc = fmt::format("{} {}", strictly ? ">" : ">=", lo);
  return CLI::Validator(
      [lo, strictly, desc](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < lo || (strictly && v == lo))
          return "must be a finite number " + desc + ", not '" + text + "'";
        return {};
      },
      "NUMBER " + desc);
}

const CLI::Validator kNonNegative = number_at_least(0);
const CLI::Validator kPositive = number_at_least(0, true);
const CLI::Validator kAtLeastOne = number_at_least(1);

const CLI::Validator kTolerance(
    [](std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
      auto st = exec::check_tolerance(v, "the tolerance");
      return st.ok() ? std::string() : st.error().message;
    },
    "TOLERANCE >= 0");

void add_opset_option(CLI::App* c, int64_t& into, const std::string& help) {
  c->add_option_function<std::string>(
       "--opset",
       [&into](const std::string& v) {
         auto parsed = pipeline::parse_opset(v);
         if (!parsed) throw CLI::ValidationError("--opset", parsed.error().message);
         into = *parsed;
       },
       help)
      ->default_str("auto");
}

}  // namespace rlflow::cli
