// libFuzzer target for the ONNX importer: any byte string must give a graph or a clean error,
// never a crash, a sanitizer report, a hang or unbounded memory. Built by scripts/checks/fuzz
// (clang, -fsanitize=fuzzer,address,undefined; CMake option RLFLOW_FUZZ).
#include <cstddef>
#include <cstdint>
#include <string>

#include "rlflow/ir/graph.h"
#include "rlflow/onnx/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  rlflow::onnxio::ImportOptions opts;  // no evaluator: folding needs libtorch, which is not instrumented
  // External data must not escape into the real file system: a base directory that does not exist.
  auto g = rlflow::onnxio::import_model(bytes, "fuzz.onnx", "/nonexistent-rlflow-fuzz", opts);
  if (g) {
    // What import accepts must be a valid graph and must export again.
    if (!rlflow::ir::validate(*g).ok()) __builtin_trap();
    rlflow::onnxio::ExportOptions eo;
    eo.check = false;
    (void)rlflow::onnxio::export_model(*g, eo, "fuzz.onnx");
  }
  return 0;
}
