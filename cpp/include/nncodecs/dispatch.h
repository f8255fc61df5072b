// The SIMD dispatch level: the one place that asks the CPU what it runs.
// Every run-time kernel choice (transforms, rANS, CRC32C, the row shift)
// goes through dispatch_level(): the CPU's own level, capped by the
// environment variable NNCODECS_DISPATCH (scalar, avx2 or avx512), so that
// one machine can measure and test every path. The frames written do not
// depend on the level.
#pragma once

namespace nnc {

// scalar: portable C++ only (no intrinsics, no hardware CRC instruction).
// avx2: AVX2 with POPCNT and SSE4.2. avx512: that plus AVX-512 F, BW, VL.
enum class DispatchLevel : int { scalar = 0, avx2 = 1, avx512 = 2 };

// The level every kernel choice obeys: the lower of cpu_dispatch_level() and
// the NNCODECS_DISPATCH cap. The variable is read once, at the first call
// (unset or empty: no cap). A value that names no level caps nothing and is
// reported by dispatch_env_error() (the Python module refuses to load then).
DispatchLevel dispatch_level();
// What this CPU runs, with no cap.
DispatchLevel cpu_dispatch_level();
// "scalar", "avx2" or "avx512".
const char* dispatch_level_name(DispatchLevel level);
// Null, or the message for an NNCODECS_DISPATCH that names no level.
const char* dispatch_env_error();

// Features a kernel needs beyond its level's (AVX-512 VBMI for the rANS
// kernels, VPCLMULQDQ for CRC32C folding). False off x86.
enum class CpuFeature { avx512vbmi, vpclmulqdq };
bool cpu_has(CpuFeature feature);

// True when kernels of `level` may run here (within the CPU and the cap).
inline bool dispatch_allows(DispatchLevel level) {
  return static_cast<int>(dispatch_level()) >= static_cast<int>(level);
}

}  // namespace nnc
