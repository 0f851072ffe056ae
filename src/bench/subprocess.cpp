#include "subprocess.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

extern char** environ;

namespace rlflow::bench {

Expected<std::unique_ptr<LineProcess>> LineProcess::start(const std::vector<std::string>& argv) {
  if (argv.empty()) return Error::internal("no program to start");
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0) return Error::internal(std::string("pipe: ") + std::strerror(errno));
  if (pipe(from_child) != 0) {
    close(to_child[0]);
    close(to_child[1]);
    return Error::internal(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, to_child[1]);
  posix_spawn_file_actions_addclose(&fa, from_child[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(to_child[0]);
  close(from_child[1]);
  if (rc != 0) {
    close(to_child[1]);
    close(from_child[0]);
    return Error::bad_input("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  std::unique_ptr<LineProcess> p(new LineProcess());
  p->pid_ = pid;
  p->in_ = fdopen(to_child[1], "w");
  p->out_ = fdopen(from_child[0], "r");
  p->name_ = argv.size() > 1 ? argv[1] : argv[0];
  if (!p->in_ || !p->out_) return Error::internal("fdopen failed");
  return p;
}

LineProcess::~LineProcess() {
  if (in_) std::fclose(in_);  // EOF on its stdin: a well-behaved child exits
  if (pid_ > 0) {
    int status = 0;
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid_, &status, WNOHANG) != 0) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  if (out_) std::fclose(out_);
}

Expected<std::string> LineProcess::request(const std::string& line) {
  // A child that died would raise SIGPIPE on write; report it as an error instead.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  const bool sent = std::fputs(line.c_str(), in_) >= 0 && std::fputc('\n', in_) != EOF && std::fflush(in_) == 0;
  sigaction(SIGPIPE, &old, nullptr);
  if (!sent) return Error::internal(name_ + " stopped accepting requests (did it exit?)");
  std::string reply;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, out_)) {
    reply += buf;
    if (!reply.empty() && reply.back() == '\n') {
      reply.pop_back();
      return reply;
    }
  }
  return Error::internal(name_ + " exited without answering");
}

}  // namespace rlflow::bench
