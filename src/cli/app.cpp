#include "rlflow/cli/app.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>
#include <sstream>
#include <vector>

#include "commands.h"
#include "rlflow/bench/ort_cost.h"
#include "rlflow/pipeline/rl_module.h"
#include "rlflow/util/file_io.h"

namespace rlflow::cli {

namespace {


void setup_logging(int verbosity, bool quiet) {
  // Once per process: the Python package runs commands again and again in one.
  auto logger = spdlog::get("rlflow");
  if (!logger) logger = spdlog::stderr_color_mt("rlflow");
  logger->set_pattern("%^[%l]%$ %v");
  spdlog::set_default_logger(logger);
  if (quiet) spdlog::set_level(spdlog::level::err);
  else if (verbosity >= 2) spdlog::set_level(spdlog::level::debug);
  else if (verbosity == 1) spdlog::set_level(spdlog::level::info);
  else spdlog::set_level(spdlog::level::warn);
}

// Every command's options and its subcommand, as the command line fills them.
struct Commands {
  GlobalOptions g;
  int verbosity = 0;
  bool quiet = false, version = false;
  // Every subcommand with what runs it, in the order tried; each command's options live in its
  // entries (declared in the command's own file).
  Subcommands commands;
};

// Global flags (-v, -vv, -q, --version) work after the subcommand too: an option a subcommand does
// not know falls through to the app (subcommands inherit this setting).
void declare_global(CLI::App& app, Commands& p) {
  app.require_subcommand(0, 1);
  app.fallthrough();

  app.add_flag("-v,--verbose", p.verbosity, "More log output on stderr (-vv for debug)");
  app.add_flag("-q,--quiet", p.quiet, "Only errors on stderr");
  app.add_flag("--version", p.version, "Print the version and the available devices");
}





void declare_all(CLI::App& app, Commands& p) {
  declare_global(app, p);
  declare_info(app, p.g, p.commands);
  declare_optimise(app, p.g, p.commands);
  declare_train_agent(app, p.g, p.commands);
  declare_train_world_model(app, p.g, p.commands);
  declare_run_bench(app, p.g, p.commands);
  declare_compare(app, p.g, p.commands);
  declare_rules(app, p.g, p.commands);
  declare_cost(app, p.g, p.commands);
}

// The parsed subcommand's exit code.
int dispatch(const CLI::App& app, Commands& p) {
  if (p.version) {
    std::cout << version_string() << std::endl;
    return kOk;
  }
  for (const auto& c : p.commands)
    if (c.app->parsed()) return c.run();
  std::cerr << app.help();
  return kUsage;
}

// argv for CLI11 from a list of arguments (the program name first).
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// Before any flag is declared: --cost-model's and --search's checks and help list what modules
// above cost and search register there (bench's ort-measured backend, rl's agent strategy).
void register_modules() {
  bench::register_cost_backends();
  pipeline::register_rl_strategy();
}

constexpr const char* kDescription = "rlflow: a graph-level optimiser for ONNX models";

}  // namespace

int run(int argc, char** argv) {
  register_modules();
  CLI::App app{kDescription};
  Commands p;
  declare_all(app, p);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "rlflow: error: " << e.what() << "\n";
    return kUsage;
  }
  try {
    setup_logging(p.verbosity, p.quiet);
    install_temp_file_cleanup();
    return dispatch(app, p);
  } catch (const std::bad_alloc&) {
    return report_error(p.g, Error::internal("out of memory"));
  } catch (const std::exception& e) {
    return report_error(p.g, Error::internal(std::string("unexpected failure: ") + e.what()));
  }
}

JsonRun run_json(const std::vector<std::string>& args) {
  register_modules();
  CLI::App app{kDescription};
  Commands p;
  declare_all(app, p);
  std::vector<std::string> all{"rlflow"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  auto argv = argv_of(all);
  try {
    app.parse(static_cast<int>(all.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return {kUsage, {}, e.what()};
  }
  // The command prints its JSON document on stdout: caught here, restored on every way out.
  std::ostringstream captured;
  struct Restore {
    std::streambuf* old;
    ~Restore() { std::cout.rdbuf(old); }
  } restore{std::cout.rdbuf(captured.rdbuf())};
  int code = kInternal;
  try {
    setup_logging(p.verbosity, p.quiet);
    code = dispatch(app, p);
  } catch (const std::bad_alloc&) {
    code = report_error(p.g, Error::internal("out of memory"));
  } catch (const std::exception& e) {
    code = report_error(p.g, Error::internal(std::string("unexpected failure: ") + e.what()));
  }
  return {code, captured.str(), {}};
}

Expected<pipeline::OptimiseOptions> parse_optimise_args(const std::vector<std::string>& args) {
  register_modules();
  CLI::App app{kDescription};
  Commands p;
  declare_global(app, p);
  auto opt = declare_optimise(app, p.g, p.commands);
  std::vector<std::string> all{"rlflow", "optimise"};
  all.insert(all.end(), args.begin(), args.end());
  auto argv = argv_of(all);
  try {
    app.parse(static_cast<int>(all.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return Error{ErrorCode::kUsage, e.what()};
  }
  setup_logging(p.verbosity, p.quiet);
  return *opt;
}

}  // namespace rlflow::cli
