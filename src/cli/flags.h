#pragma once
// Internal to the CLI: the checks and option helpers every command's flags share. Each subcommand
// declares its own flags (declare_* in the cmd_*.cpp files and commands.cpp) with these.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace rlflow::cli {

// Every number a flag takes is checked as the flags are parsed, before any work: it must be finite
// (a NaN passes no comparison, so it would switch a check or a limit off) and in the flag's range.
CLI::Validator number_at_least(double lo, bool strictly = false);
extern const CLI::Validator kNonNegative;  // >= 0
extern const CLI::Validator kPositive;     // > 0
extern const CLI::Validator kAtLeastOne;   // >= 1
// The one tolerance rule (exec::check_tolerance), applied to --atol and --rtol of every command.
extern const CLI::Validator kTolerance;

// --opset: auto, keep or N, parsed into the library's value (pipeline::parse_opset).
void add_opset_option(CLI::App* c, int64_t& into, const std::string& help);

}  // namespace rlflow::cli
