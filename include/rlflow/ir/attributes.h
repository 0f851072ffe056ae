#pragma once
// ONNX node attributes in a form free of protobuf: what the reference executor reads to run an op
// the IR carries verbatim (an opaque node). The serialized NodeProto in OpaqueParams stays the
// source of truth for export; this is its parsed twin, filled on import.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rlflow/ir/tensor.h"

namespace rlflow::ir {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, TensorPtr>;

class Attributes {
 public:
  void set(std::string name, AttrValue v) { values_[std::move(name)] = std::move(v); }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  const std::map<std::string, AttrValue>& all() const { return values_; }

  int64_t i(const std::string& name, int64_t dflt) const { return get<int64_t>(name).value_or(dflt); }
  // A float attribute; an int given where a float is expected reads as that number.
  double f(const std::string& name, double dflt) const {
    if (auto v = get<double>(name)) return *v;
    if (auto v = get<int64_t>(name)) return static_cast<double>(*v);
    return dflt;
  }
  std::string s(const std::string& name, const std::string& dflt) const { return get<std::string>(name).value_or(dflt); }
  std::optional<std::vector<int64_t>> ints(const std::string& name) const { return get<std::vector<int64_t>>(name); }
  std::optional<std::vector<double>> floats(const std::string& name) const { return get<std::vector<double>>(name); }
  TensorPtr tensor(const std::string& name) const { return get<TensorPtr>(name).value_or(nullptr); }

 private:
  template <class T>
  std::optional<T> get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    return std::nullopt;
  }
  std::map<std::string, AttrValue> values_;
};

using AttributesPtr = std::shared_ptr<const Attributes>;

}  // namespace rlflow::ir
