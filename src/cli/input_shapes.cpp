#include <charconv>

#include "commands.h"

namespace rlflow::cli {

Expected<std::map<std::string, ir::Shape>> parse_input_shapes(const std::vector<std::string>& specs) {
  std::map<std::string, ir::Shape> out;
  for (const auto& spec : specs) {
    auto bad = [&](const std::string& why) {
      return Error{ErrorCode::kUsage, "--input-shape '" + spec + "': " + why + " (expected name:d0,d1,...)"};
    };
    const auto colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("missing name");
    const std::string name = spec.substr(0, colon);
    ir::Shape shape;
    std::string_view rest(spec.c_str() + colon + 1);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view tok = rest.substr(0, comma);
      int64_t v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || v <= 0) return bad("'" + std::string(tok) + "' is not a positive integer");
      shape.push_back(v);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
      if (rest.empty()) return bad("trailing comma");
    }
    if (out.count(name)) return bad("input given twice");
    out[name] = shape;
  }
  return out;
}

}  // namespace rlflow::cli
