#include "rlflow/util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace rlflow {

namespace fs = std::filesystem;

Expected<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Error::bad_input(path + ": is a directory, not an ONNX file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::bad_input(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Error::bad_input(path + ": read error");
  return ss.str();
}

Status write_file_atomic(const std::string& path, const std::function<bool(int fd)>& write,
                         const std::function<Status(const std::string& tmp_path)>& check) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = mkstemp(tmp.data());
  if (fd < 0) return Error::bad_input("cannot create a file in " + dir.string() + " (" + std::strerror(errno) + ")");
  const bool wrote = write(fd);
  const std::string why = std::strerror(errno);
  fchmod(fd, 0644);
  const bool synced = wrote && ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced) {
    ::unlink(tmp.c_str());
    return Error::bad_input("cannot write " + path + " (" + why + ")");
  }
  if (check) {
    Status st = check(tmp);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error::bad_input("cannot move the output into place at " + path + " (" + err + ")");
  }
  return {};
}

Status write_file_atomic(const std::string& path, const std::string& bytes) {
  return write_file_atomic(path, [&](int fd) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return false;
      off += static_cast<size_t>(w);
    }
    return true;
  });
}

Status ensure_parent_dir(const std::string& path) {
  const fs::path target(path);
  if (!target.has_parent_path()) return {};
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) return Error::bad_input(path + ": cannot create folder " + target.parent_path().string() + ": " + ec.message());
  return {};
}

std::string find_shipped(const std::string& relative, const char* env_var) {
  if (const char* env = env_var ? std::getenv(env_var) : nullptr; env && *env) return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> candidates;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / relative);
    candidates.push_back(exe.parent_path() / ".." / "share" / "rlflow" / relative);
  }
  candidates.push_back(fs::path(RLFLOW_SOURCE_DIR) / relative);
  candidates.push_back(fs::path(relative));
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return fs::weakly_canonical(c, ec).string();
  return candidates.back().string();
}

}  // namespace rlflow
