// Shared by every fuzz target (fuzz/targets.h).
#include <cstdio>
#include <cstdlib>

#include "targets.h"

void nnc_fuzz_finding(const char* what) {
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}
