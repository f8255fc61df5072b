// The dispatch level: the CPU probe (the only __builtin_cpu_supports calls
// of the kernels) and the NNCODECS_DISPATCH cap, each settled once.
#include "nncodecs/dispatch.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace nnc {
namespace {

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#define NNC_X86_PROBE 1
#endif

DispatchLevel probe_cpu() {
#ifdef NNC_X86_PROBE
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
                    __builtin_cpu_supports("sse4.2");
  if (!avx2) return DispatchLevel::scalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  return avx512 ? DispatchLevel::avx512 : DispatchLevel::avx2;
#else
  return DispatchLevel::scalar;
#endif
}

struct Setting {
  DispatchLevel cpu, level;
  std::string error;  // empty: the variable was unset or named a level
  Setting() : cpu(probe_cpu()), level(cpu) {
    const char* env = std::getenv("NNCODECS_DISPATCH");
    if (env == nullptr || *env == '\0') return;
    for (DispatchLevel cap :
         {DispatchLevel::scalar, DispatchLevel::avx2, DispatchLevel::avx512}) {
      if (std::strcmp(env, dispatch_level_name(cap)) == 0) {
        if (static_cast<int>(cap) < static_cast<int>(cpu)) level = cap;
        return;
      }
    }
    error = std::string("NNCODECS_DISPATCH='") + env +
            "' names no dispatch level: use scalar, avx2 or avx512 (or leave it unset or "
            "empty for the CPU's best)";
  }
};

const Setting& setting() {
  static const Setting s;
  return s;
}

}  // namespace

DispatchLevel dispatch_level() { return setting().level; }

DispatchLevel cpu_dispatch_level() { return setting().cpu; }

const char* dispatch_level_name(DispatchLevel level) {
  switch (level) {
    case DispatchLevel::avx2: return "avx2";
    case DispatchLevel::avx512: return "avx512";
    default: return "scalar";
  }
}

const char* dispatch_env_error() {
  const std::string& e = setting().error;
  return e.empty() ? nullptr : e.c_str();
}

bool cpu_has(CpuFeature feature) {
#ifdef NNC_X86_PROBE
  switch (feature) {
    case CpuFeature::avx512vbmi: {
      static const bool yes = __builtin_cpu_supports("avx512vbmi");
      return yes;
    }
    case CpuFeature::vpclmulqdq: {
      static const bool yes = __builtin_cpu_supports("vpclmulqdq");
      return yes;
    }
  }
#else
  (void)feature;
#endif
  return false;
}

}  // namespace nnc
