#pragma once

namespace rlflow::cli {

// Exit codes shared by every subcommand.
enum ExitCode : int { kOk = 0, kUsage = 2, kBadInput = 3, kVerificationFailed = 4, kInternal = 5 };

int run(int argc, char** argv);

}  // namespace rlflow::cli
