// What every fuzz target provides besides LLVMFuzzerTestOneInput: its inputs
// made from a frame, so that one set of seed frames (fuzz/driver.cpp's, and
// the conformance corpus's) seeds every target. The driver uses it to build
// its own seeds and, with --write-seeds, libFuzzer's corpus.
#pragma once

#include <cstdint>
#include <vector>

#include "nncodecs/frame.h"

// A bound on the decoded size, as every caller of the decoders gives one.
constexpr std::uint64_t kFuzzMaxDecoded = std::uint64_t(1) << 22;

// Appends to *out the target's inputs made from `frame` (none where it has none).
void nnc_fuzz_inputs(const std::vector<std::uint8_t>& frame,
                     std::vector<std::vector<std::uint8_t>>* out);

// A finding that is not a memory error: a wrong result. Prints and aborts,
// so that libFuzzer (and the driver) keep the input as a crash.
[[noreturn]] void nnc_fuzz_finding(const char* what);
