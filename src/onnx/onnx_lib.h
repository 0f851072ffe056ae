#pragma once
// The ONNX C++ library rlflow links: the onnx that scripts/setup/build_onnx builds (see CMakeLists.txt), in
// its own C++ namespace (ONNX_NAMESPACE=onnx_rlflow) with its own proto file and package names, so it
// does not clash with Debian's onnx 1.12 that libtorch loads into the same process. rlflow's code calls
// it `onnx::`; include this header before any other <onnx/...> header.
#include <onnx/onnx_pb.h>

#include <type_traits>

// Fails to compile when Debian's /usr/include/onnx (namespace onnx) is found instead.
static_assert(std::is_same_v<onnx_rlflow::ModelProto, ONNX_NAMESPACE::ModelProto>,
              "rlflow must compile against the onnx of scripts/setup/build_onnx (namespace onnx_rlflow)");

namespace onnx = ONNX_NAMESPACE;
