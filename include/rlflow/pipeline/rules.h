#pragma once
// `rlflow rules` as a library: list a rule file's rules and totals; verify them (numerically on their
// instances, then optionally a Z3 proof each); bench the matcher on models with a random-chain
// semantic check; generate rules. verify and generate use the rule tools module
// (rules/tools_module.h), loaded when they run. None prints; each returns a typed report that prints
// itself as text or JSON, and the CLI binds its flags to the option structs below.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/rules/library_io.h"
#include "rlflow/rules/prover.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// ---- rules list ----
struct RulesListOptions {
  std::string file;  // empty: the shipped library
  bool summary = false;  // the report leaves out the rows (print and JSON): totals only
};

struct RulesListReport {
  std::string file;
  rules::RuleLibrary library;
  bool summary = false;
  std::map<std::string, int> by_status, by_provenance, by_proof, default_by_proof;
  std::map<std::string, int> unproved_reasons;  // a failed proof's reason without its rule's details
  int default_set = 0;         // rules marked for the default set
  int default_set_in_use = 0;  // of those, proved (rule selection uses them)

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<RulesListReport> list_rules(const RulesListOptions& o);

// ---- rules verify ----
struct RulesVerifyOptions {
  std::string file;               // empty: the shipped library
  std::vector<std::string> only;  // rule names; empty: every rule
  int sample = 0;                 // only this many of those, drawn with `seed` (0: all)
  uint64_t seed = 0;
  bool write = false;             // record each rule's status in the file
  bool prove = false;             // also prove each rule with Z3 (in a child process each)
  double prove_timeout = 10.0;    // seconds per rule
  std::string dump_smt2;          // with prove: each rule's SMT-LIB query into this directory
  int jobs = 1;                   // rules checked in parallel
};

struct RuleVerdict {
  std::string rule;
  bool numeric_ok = false;  // every instance matched the executor's reference
  size_t instances = 0;
  double max_abs_diff = 0;
  std::string message;      // why the numeric check failed
  std::optional<rules::ProofResult> proof;
  rules::VerifyStatus status = rules::VerifyStatus::kUnverified;  // the rule's status now
  bool conflict() const { return !numeric_ok && proof && proof->proved(); }  // proved, but numerically refuted
  bool ok() const { return numeric_ok && status != rules::VerifyStatus::kRefuted; }  // a disproved rule fails
};

struct RulesVerifyReport {
  std::string file;
  bool prove = false;
  int jobs = 1;
  std::vector<RuleVerdict> rules;  // in library order
  int passed = 0, failed = 0, proved = 0, conflicts = 0;
  std::map<std::string, int> outcomes;  // proof outcome -> rules
  double seconds = 0, prove_seconds = 0;
  bool written = false;  // the statuses were saved into `file`

  bool ok() const { return failed == 0 && conflicts == 0; }
  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<RulesVerifyReport> verify_rules(const RulesVerifyOptions& o);

// ---- rules bench ----
struct RulesBenchOptions {
  std::string file;  // empty: the shipped library
  std::vector<std::string> models;
  int applications = 1000;  // random-chain applications per model
  int chain = 50;           // applications per chain before its result is run
  int repeats = 5;          // timing repetitions (median)
  uint64_t seed = 0;
};

struct RulesBenchRow {
  std::string model;
  size_t nodes = 0, matches = 0;
  double match_all_ms = 0;        // every match of every rule, median of the repeats
  double applications_per_s = 0;  // over the original graph's matches
  int applications = 0, executor_runs = 0, failures = 0;
  std::string first_failure;
};

struct RulesBenchReport {
  std::string file;
  std::vector<RulesBenchRow> models;

  int failures() const;
  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<RulesBenchReport> bench_rules(const RulesBenchOptions& o);

// ---- rules generate ----
struct RulesGenerateOptions {
  int depth = 3;                    // ops per enumerated graph, 1..4
  std::vector<std::string> worlds;  // conv, matmul (empty: both)
  size_t max_group = 48;
  int derivation_steps = 3;
  std::vector<std::string> zoo;     // models whose matches choose the default set
  std::string file;                 // library whose hand-written rules generated duplicates are checked against
  std::string out;                  // write only the generated rules here
  std::string merge_into;           // replace the generated rules of this file, keep the others
};

struct RulesGenerateHooks {
  std::function<void(const std::string& stage, size_t done, size_t total)> progress;  // total 0: unknown
};

struct RulesGenerateReport {
  int depth = 0;
  std::string out, merged_into;
  size_t merged_total = 0;  // rules in merged_into after the merge
  std::vector<std::string> rules;  // the generated rules' names
  double seconds = 0;
  std::vector<std::pair<std::string, int64_t>> totals;  // stage -> count, in order
  std::vector<std::pair<std::string, int64_t>> dropped;  // why candidates were dropped -> how many
  std::vector<std::pair<std::string, double>> phase_seconds;
  bool details = true;  // the text lists the dropped counts and the phases' seconds

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<RulesGenerateReport> generate_rules(const RulesGenerateOptions& o, const RulesGenerateHooks& hooks = {});

}  // namespace rlflow::pipeline
