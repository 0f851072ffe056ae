#pragma once
// Whole-file reads and atomic writes, shared by model export, rule files, profiles and caches.
#include <signal.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow {

// The input guard: every file rlflow reads is a regular file (a symlink is followed), at most
// max_bytes long. A FIFO, a device (/dev/zero), a socket or a directory is refused before it is
// opened, so no read blocks or runs without bound.
inline constexpr uint64_t kMaxInputBytes = uint64_t{2} << 30;  // protobuf's limit for a model
Status check_input_file(const std::string& path, uint64_t max_bytes = kMaxInputBytes);
Expected<std::string> read_file(const std::string& path, uint64_t max_bytes = kMaxInputBytes);

// Writes via a temporary file in the same directory and rename(2), so readers never see a
// partial file and a failed write leaves any previous file intact. The file gets the mode of the
// file it replaces, or 0666 less the umask; an existing path that is not a regular file (a device,
// a fifo) is refused rather than replaced. The temporary file is removed on every failure path,
// exceptions and (after install_temp_file_cleanup) interrupting signals included. `write` fills the open file descriptor; `check`, if given, inspects the complete
// temporary file before it is moved into place, and an error from it discards the file.
Status write_file_atomic(const std::string& path, const std::function<bool(int fd)>& write,
                         const std::function<Status(const std::string& tmp_path)>& check = {});
Status write_file_atomic(const std::string& path, const std::string& bytes);

// Whether a and b name the same file: by device and inode when both exist, else by normalised
// absolute path.
bool same_file(const std::string& a, const std::string& b);

// Checks a path the user named as an output before any work is done. Refuses (usage error, exit 2)
// an empty path, a missing folder, an existing directory, device, fifo or socket, and any path that
// is the same file as one of `inputs` (by device and inode, or by normalised path when neither
// exists yet). `role` names the flag in the message, e.g. "-o".
Status check_output_path(const std::string& path, const std::vector<std::string>& inputs, const std::string& role);

// Removes the temporary files of writes still in progress when SIGINT, SIGTERM or SIGHUP arrives,
// then lets the signal end the process as it would have. Called once by the CLI's main.
void install_temp_file_cleanup();

// Holds SIGINT, SIGTERM and SIGHUP back in this thread while it lives; one that arrives meanwhile
// is delivered when it ends. For steps a signal must not split: a temporary path created and then
// registered, or the renames that put a model and its weights in place.
class DeferInterrupts {
 public:
  DeferInterrupts();
  ~DeferInterrupts();
  DeferInterrupts(const DeferInterrupts&) = delete;
  DeferInterrupts& operator=(const DeferInterrupts&) = delete;

 private:
  sigset_t saved_;
};

// A path that is removed when this goes out of scope (unless keep() was called) and, after
// install_temp_file_cleanup, when an interrupting signal ends the process: a file is unlinked; a
// folder is removed with its contents on scope exit, and by the signal handler only once empty
// (register the files inside it as TempPaths too). The path may name something that does not
// exist yet, so a file that a rename will put there is covered from before it appears.
class TempPath {
 public:
  enum Kind { kFile, kFolder };
  explicit TempPath(std::string path, Kind kind = kFile);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& path() const { return path_; }
  void keep() { path_.clear(); }

 private:
  std::string path_;
  Kind kind_;
  int slot_;
};

// mkdtemp(3) of `name_template` (ending in XXXXXX), registered as a TempPath folder in one step.
Expected<std::unique_ptr<TempPath>> make_temp_folder(std::string name_template);

// Creates the folders above `path` (for caches under ~/.cache); outputs the user names are not
// given folders implicitly.
Status ensure_parent_dir(const std::string& path);

// A file or folder that ships with rlflow, by its path relative to the source tree (e.g.
// "configs/devices"): $ENV_VAR when set, then under the shipped root when one is set (the Python
// package's data folder: set_shipped_root), then next to the binary (<bin>/../REL, <bin>/../share/rlflow/REL),
// then the source tree this binary was built from. The first that exists wins; when none does, the
// source tree's path (so the error names a sensible path). Never the working directory.
std::string find_shipped(const std::string& relative, const char* env_var);
void set_shipped_root(const std::string& dir);

}  // namespace rlflow
