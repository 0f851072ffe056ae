#include "rlflow/util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

namespace rlflow {

namespace fs = std::filesystem;

Expected<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  RLFLOW_TRY_STATUS(check_input_file(path, max_bytes));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::bad_input(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Error::bad_input(path + ": read error");
  return ss.str();
}

namespace {

// Temporary files and folders of writes in progress, for the signal handler: fixed storage,
// because a handler may only call async-signal-safe functions (unlink, rmdir) and must not
// allocate. A slot is 0 (free), 1 (being filled) or 2 (holds a path); g_temp_dir says whether it
// names a folder (removed after every file, so it is empty by then).
constexpr int kTempSlots = 32;
constexpr size_t kTempPathMax = 4096;
char g_temp_paths[kTempSlots][kTempPathMax];
bool g_temp_dir[kTempSlots];
std::atomic<int> g_temp_state[kTempSlots];

int register_temp(const std::string& path, bool dir) {
  if (path.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (!g_temp_state[i].compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
    g_temp_dir[i] = dir;
    g_temp_state[i].store(2);
    return i;
  }
  return -1;  // more at once than slots: that path is still removed on every non-signal path
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temp_state[slot].store(0);
}

extern "C" void remove_temps_and_reraise(int sig) {
  for (bool dirs : {false, true})
    for (int i = 0; i < kTempSlots; ++i)
      if (g_temp_state[i].load() == 2 && g_temp_dir[i] == dirs) dirs ? ::rmdir(g_temp_paths[i]) : ::unlink(g_temp_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

constexpr int kInterrupts[] = {SIGINT, SIGTERM, SIGHUP};

mode_t process_umask() {
  // /proc/self/status reads the umask without changing it (umask(2) can only set it, and setting
  // it twice would race with other threads creating files).
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISFIFO(m)) return "a fifo";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

DeferInterrupts::DeferInterrupts() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kInterrupts) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, &saved_);
}

DeferInterrupts::~DeferInterrupts() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

TempPath::TempPath(std::string path, Kind kind) : path_(std::move(path)), kind_(kind), slot_(register_temp(path_, kind == kFolder)) {}

TempPath::~TempPath() {
  if (!path_.empty()) {
    std::error_code ec;
    if (kind_ == kFolder)
      fs::remove_all(path_, ec);
    else
      ::unlink(path_.c_str());
  }
  unregister_temp(slot_);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa{}, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  const auto ca = fs::weakly_canonical(fs::absolute(a, ea), ea), cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  return !ea && !eb && ca == cb;
}

Status check_input_file(const std::string& path, uint64_t max_bytes) {
  struct stat st{};
  if (path.find('\0') != std::string::npos) return Error::bad_input("a file name contains a NUL byte");
  if (::stat(path.c_str(), &st) != 0) return Error::bad_input(path + ": no such file");
  if (S_ISDIR(st.st_mode)) return Error::bad_input(path + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode)) return Error::bad_input(path + ": is " + kind_of(st.st_mode) + "; rlflow reads only regular files");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Error::bad_input(path + ": is " + std::to_string(st.st_size) + " bytes, over the limit of " + std::to_string(max_bytes));
  return {};
}

Status check_output_path(const std::string& path, const std::vector<std::string>& inputs, const std::string& role) {
  auto usage = [&](const std::string& why) { return Error{ErrorCode::kUsage, role + " " + why}; };
  if (path.empty()) return usage("is empty: name the file to write");
  if (path.find('\0') != std::string::npos) return usage("contains a NUL byte");
  struct stat st{};
  // A symlink would be replaced by the file (the output is moved into place): -o /dev/stdout once
  // replaced that link. Name the file itself.
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return usage(path + " is a symlink; rlflow replaces the file it writes, so name the file itself");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return usage(path + " is " + kind_of(st.st_mode) + "; rlflow writes only regular files");
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return usage(path + ": the folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) return usage(path + ": the folder " + dir.string() + " is not writable");
  for (const auto& in : inputs)
    if (!in.empty() && same_file(path, in)) return usage(path + " is the input " + in + "; it would be overwritten");
  // Create (and remove) a temporary file named as the longest one the write will make, a model's
  // external-data file: a name too long for the file system, or a folder that takes no new files
  // (/proc, a read-only mount, root's access() saying yes), is found now and not after the run.
  std::string probe = (dir / ("." + target.filename().string() + ".data.tmp.XXXXXX")).string();
  DeferInterrupts defer;  // a signal waits until the probe is gone
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return usage(path + ": cannot create a file in " + dir.string() + " (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

Status write_file_atomic(const std::string& path, const std::function<bool(int fd)>& write,
                         const std::function<Status(const std::string& tmp_path)>& check) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  mode_t mode = 0666 & ~process_umask();
  if (struct stat st{}; ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return Error{ErrorCode::kUsage, path + " is a symlink; rlflow replaces the file it writes, so name the file itself"};
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return Error{ErrorCode::kUsage, path + " is " + kind_of(st.st_mode) + "; rlflow writes only regular files"};
    mode = st.st_mode & 07777;  // keep the mode of the file being replaced
  }
  std::string tmp_name = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::optional<TempPath> tmp;
  int fd = -1;
  {
    // Created and registered as one step: a signal in between (open(2) can take milliseconds on a
    // busy disk) would end the process before the handler knew the file.
    DeferInterrupts defer;
    fd = mkstemp(tmp_name.data());
    if (fd >= 0) tmp.emplace(tmp_name);
  }
  if (fd < 0) return Error::bad_input("cannot create a file in " + dir.string() + " (" + std::strerror(errno) + ")");
  bool wrote = false;
  try {
    wrote = write(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const std::string why = std::strerror(errno);
  fchmod(fd, mode);
  const bool synced = wrote && ::fsync(fd) == 0;
  if (::close(fd) != 0 || !synced) return Error::bad_input("cannot write " + path + " (" + why + ")");
  if (check) RLFLOW_TRY_STATUS(check(tmp->path()));
  if (std::rename(tmp->path().c_str(), path.c_str()) != 0)
    return Error::bad_input("cannot move the output into place at " + path + " (" + std::strerror(errno) + ")");
  tmp->keep();
  return {};
}

Expected<std::unique_ptr<TempPath>> make_temp_folder(std::string name_template) {
  DeferInterrupts defer;
  if (!::mkdtemp(name_template.data()))
    return Error::bad_input("cannot create a folder " + name_template + " (" + std::strerror(errno) + ")");
  return std::make_unique<TempPath>(name_template, TempPath::kFolder);
}

void install_temp_file_cleanup() {
  for (int sig : kInterrupts) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // e.g. under nohup
    struct sigaction sa{};
    sa.sa_handler = remove_temps_and_reraise;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
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

namespace {
std::string& shipped_root() {
  static std::string root;
  return root;
}
}  // namespace

void set_shipped_root(const std::string& dir) { shipped_root() = dir; }

std::string find_shipped(const std::string& relative, const char* env_var) {
  if (const char* env = env_var ? std::getenv(env_var) : nullptr; env && *env) return env;
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> candidates;
  if (!shipped_root().empty()) candidates.push_back(fs::path(shipped_root()) / relative);
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / relative);
    candidates.push_back(exe.parent_path() / ".." / "share" / "rlflow" / relative);
  }
  candidates.push_back(fs::path(RLFLOW_SOURCE_DIR) / relative);
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return fs::weakly_canonical(c, ec).string();
  // Never the working directory: a file of the same name there is not what shipped. The source
  // tree's path is what a "not found" error then names.
  return candidates.back().string();
}

}  // namespace rlflow
