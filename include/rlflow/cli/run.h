#pragma once
// The command line's entry point and exit codes, apart from the rest of app.h: main.cpp includes
// only this (app.h brings in the pipeline's headers, about 5 CPU-s of compiling per file).

namespace rlflow::cli {

// Exit codes shared by every subcommand.
enum ExitCode : int { kOk = 0, kUsage = 2, kBadInput = 3, kVerificationFailed = 4, kInternal = 5 };

int run(int argc, char** argv);

}  // namespace rlflow::cli
