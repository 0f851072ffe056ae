#pragma once
// Internal to rl: YAML configs as "section.key" fields visited by one function, so parsing,
// validation of unknown keys and printing cannot drift apart.
#include <yaml-cpp/yaml.h>

#include <set>
#include <sstream>
#include <string>

#include "rlflow/util/expected.h"

namespace rlflow::rl::yaml_fields {

inline std::pair<std::string, std::string> split_key(const std::string& k) {
  auto dot = k.find('.');
  return {k.substr(0, dot), k.substr(dot + 1)};
}

// visit(config, f) calls f("section.key", field) for every field.
template <class C, class Visit>
Expected<C> parse(const std::string& text, const std::string& origin, Visit visit) {
  C c;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error::bad_input(origin + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap() && !root.IsNull()) return Error::bad_input(origin + ": expected a mapping of sections");
  std::string err;
  std::set<std::string> known;
  visit(c, [&](const std::string& key, auto& field) {
    auto [sec, name] = split_key(key);
    known.insert(key);
    if (!err.empty() || !root[sec] || !root[sec][name]) return;
    try {
      field = root[sec][name].template as<std::decay_t<decltype(field)>>();
    } catch (const YAML::Exception&) {
      err = origin + ": " + key + ": bad value '" + YAML::Dump(root[sec][name]) + "'";
    }
  });
  if (!err.empty()) return Error::bad_input(err);
  if (root.IsMap())
    for (const auto& sec : root) {
      const auto s = sec.first.as<std::string>();
      if (!sec.second.IsMap()) return Error::bad_input(origin + ": section '" + s + "' must be a mapping");
      for (const auto& kv : sec.second)
        if (!known.count(s + "." + kv.first.as<std::string>()))
          return Error::bad_input(origin + ": unknown setting '" + s + "." + kv.first.as<std::string>() + "'");
    }
  return c;
}

template <class C, class Visit>
std::string print(const C& in, Visit visit) {
  C c = in;
  YAML::Node root;
  visit(c, [&](const std::string& key, auto& field) {
    auto [sec, name] = split_key(key);
    root[sec][name] = field;
  });
  std::ostringstream os;
  os << root;
  return os.str();
}

}  // namespace rlflow::rl::yaml_fields
