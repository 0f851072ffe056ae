#pragma once
// Precompiled for the exec module only; never include from a public header.
#include <ATen/ATen.h>
