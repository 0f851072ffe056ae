#pragma once
// Precompiled for the rl module only; never include from a public header.
#include <torch/torch.h>
