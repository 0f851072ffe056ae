#include "rlflow/cli/run.h"

int main(int argc, char** argv) { return rlflow::cli::run(argc, argv); }
