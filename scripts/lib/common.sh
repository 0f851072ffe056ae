# Sourced by every bash script under scripts/: paths shared by setup, build, test, demo and the rest.
RLFLOW_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RLFLOW_VENV="${RLFLOW_VENV:-$HOME/.local/share/rlflow/venv}"
RLFLOW_BUILD="${RLFLOW_BUILD:-$RLFLOW_ROOT/build}"
RLFLOW_BIN="$RLFLOW_BUILD/rlflow"
PY="$RLFLOW_VENV/bin/python"
# The ONNX C++ library rlflow links: built from the PyPI sdist by scripts/setup/build_onnx (Debian's is 1.12,
# IR 8 / opset 17). Keep the version in step with RLFLOW_ONNX_VERSION in CMakeLists.txt.
RLFLOW_ONNX_VERSION=1.19.1
RLFLOW_ONNX_PREFIX="${RLFLOW_ONNX_PREFIX:-$HOME/.local/share/rlflow/onnx-$RLFLOW_ONNX_VERSION}"
export RLFLOW_ROOT RLFLOW_VENV RLFLOW_BUILD RLFLOW_BIN PY RLFLOW_ONNX_VERSION RLFLOW_ONNX_PREFIX
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"  # the pthread OpenBLAS at one thread (see src/exec/executor.cpp)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # torch/ORT threads in scripts; note GNU nproc obeys it, so job counts use getconf
log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
