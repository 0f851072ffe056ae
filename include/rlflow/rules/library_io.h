#pragma once
#include <string>

#include "rlflow/rules/rule.h"

namespace rlflow::rules {

// The rule file: versioned JSON (configs/rules/*.json). Loading validates every rule.
Expected<RuleLibrary> load_library(const std::string& path);
Expected<RuleLibrary> parse_library(const std::string& json_text, const std::string& label);
std::string dump_library(const RuleLibrary& lib);
Status save_library(const RuleLibrary& lib, const std::string& path);

// Where the shipped library lives: $RLFLOW_RULES, else configs/rules/default.json found next to
// the binary's source tree or installed data directory.
std::string default_library_path();

}  // namespace rlflow::rules
