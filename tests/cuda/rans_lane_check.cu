// Compile check of the shared rANS lane header under nvcc (tests/gpu/test_cuda_compile.py):
// one warp decodes one sub-block, lane i holding rANS lane i, and the word
// prefix count comes from ballot/popc, as docs/format.md lays out. The GPU
// issue builds its kernels on this; here it only has to compile.
#include "nncodecs/rans_lane.h"

using namespace nnc;

extern "C" __global__ void rans_decode_subblock(const nnc_u32* table, nnc_u32 precision,
                                                const nnc_u32* states, const nnc_u16* words,
                                                nnc_u32 nwords, nnc_u32 symbols, nnc_u8* out,
                                                int* status) {
  const nnc_u32 lane = threadIdx.x & 31u;
  nnc_u32 x = states[lane];
  nnc_u32 wi = 0;
  const nnc_u32 steps = (symbols + 31u) / 32u;
  for (nnc_u32 t = 0; t < steps; ++t) {
    const nnc_u32 i = t * 32u + lane;
    const bool active = i < symbols;
    bool need = false;
    if (active) {
      const nnc_u32 e = table[rans::decode_slot(x, precision)];
      out[i] = static_cast<nnc_u8>(rans::entry_symbol(e));
      x = rans::decode_step(x, e, precision);
      need = rans::decode_needs_word(x);
    }
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, need);
    const nnc_u32 before = __popc(ballot & ((1u << lane) - 1u));
    if (need) {
      const nnc_u32 at = wi + before;
      x = at < nwords ? rans::decode_refill(x, words[at]) : 0u;
    }
    wi += __popc(ballot);
  }
  const bool ok = (x == rans::kStateLow) && wi == nwords;
  if (!__all_sync(0xFFFFFFFFu, ok) && lane == 0) *status = 1;
}

extern "C" __global__ void parse_table_check(const nnc_u8* bytes, nnc_u32 len, nnc_u32 precision,
                                             nnc_u32* table, int* status) {
  nnc_u32 freqs[256];
  if (rans::parse_table(bytes, len, precision, freqs) == 0) {
    *status = 1;
    return;
  }
  rans::build_decode_table(freqs, precision, table);
}
