#include "rlflow/cli/app.h"

int main(int argc, char** argv) { return rlflow::cli::run(argc, argv); }
