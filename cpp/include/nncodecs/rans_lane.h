// rANS per-lane arithmetic shared by the CPU build (g++), nvcc and NVRTC
// (CuPy): inline __host__ __device__ functions only, no standard headers
// under NVRTC. The bitstream is specified in docs/format.md.
//
// 32 interleaved lanes; state x in [2^15, 2^31); renormalisation moves one
// 16-bit word at most per symbol; probabilities of P bits (10..12).
#pragma once

#if defined(__CUDACC_RTC__)
typedef unsigned char nnc_u8;
typedef unsigned short nnc_u16;
typedef unsigned int nnc_u32;
typedef unsigned long long nnc_u64;
#else
#include <cstdint>
typedef std::uint8_t nnc_u8;
typedef std::uint16_t nnc_u16;
typedef std::uint32_t nnc_u32;
typedef std::uint64_t nnc_u64;
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NNC_HD __host__ __device__ __forceinline__
#else
#define NNC_HD inline
#endif

namespace nnc {
namespace rans {

constexpr nnc_u32 kLanes = 32;
constexpr nnc_u32 kStateLow = 1u << 15;   // L: every lane starts and must end here
constexpr nnc_u32 kStateHigh = 1u << 31;  // states stay below this
constexpr nnc_u32 kMinPrecision = 10;
constexpr nnc_u32 kMaxPrecision = 12;
constexpr nnc_u32 kMinSubblockLog2 = 12;
constexpr nnc_u32 kMaxSubblockLog2 = 16;

// One decode-table entry packs symbol (8 bits), frequency (12 bits) and the
// offset of the slot inside the symbol's range (12 bits). A frequency of 2^P
// never occurs: a one-symbol chunk is stored in constant mode.
NNC_HD nnc_u32 pack_entry(nnc_u32 symbol, nnc_u32 freq, nnc_u32 bias) {
  return symbol | (freq << 8) | (bias << 20);
}
NNC_HD nnc_u32 entry_symbol(nnc_u32 e) { return e & 0xFFu; }
NNC_HD nnc_u32 entry_freq(nnc_u32 e) { return (e >> 8) & 0xFFFu; }
NNC_HD nnc_u32 entry_bias(nnc_u32 e) { return e >> 20; }

// Encoder side, per symbol: if the state would leave [L, 2^31) after coding,
// first emit its low 16 bits. Returns true when a word was emitted.
NNC_HD bool encode_needs_word(nnc_u32 x, nnc_u32 freq, nnc_u32 precision) {
  // x_max = ((L >> P) << 16) * freq = 2^(31 - P) * freq
  return x >= (freq << (31 - precision));
}
NNC_HD nnc_u32 encode_step(nnc_u32 x, nnc_u32 freq, nnc_u32 cum, nnc_u32 precision) {
  return ((x / freq) << precision) + (x % freq) + cum;
}

// The same step without a division: x / freq as a multiply and a shift,
// exact for every x < 2^31 (Granlund-Montgomery, with l = ceil(log2 freq),
// rcp = ceil(2^(31+l) / freq) < 2^32). Then x' = x + cum + q * (2^P - freq),
// which equals encode_step. Fast encoders precompute both per symbol.
NNC_HD nnc_u32 encode_rcp_shift(nnc_u32 freq) {
  nnc_u32 l = 0;
  while ((1u << l) < freq) ++l;
  return 31 + l;
}
NNC_HD nnc_u32 encode_rcp(nnc_u32 freq, nnc_u32 shift) {
  return static_cast<nnc_u32>(((nnc_u64(1) << shift) + freq - 1) / freq);
}
NNC_HD nnc_u32 encode_step_rcp(nnc_u32 x, nnc_u32 rcp, nnc_u32 shift, nnc_u32 cum,
                               nnc_u32 complement) {
  const nnc_u32 q = static_cast<nnc_u32>((nnc_u64(x) * rcp) >> shift);
  return x + cum + q * complement;
}

// log2(f) in 16.16 fixed point (fraction truncated), integers only, so that
// every build (CPU, nvcc, NVRTC) estimates chunk sizes alike: the encoder's
// choice of a chunk's mode rests on these estimates.
NNC_HD nnc_u32 log2_fixed16(nnc_u32 f) {
  nnc_u32 ip = 0;
  while ((f >> ip) > 1u) ++ip;
  nnc_u64 y = nnc_u64(f) << (31 - ip);  // f / 2^ip in Q31: [2^31, 2^32)
  nnc_u32 frac = 0;
  for (int b = 15; b >= 0; --b) {
    y = (y * y) >> 31;
    if (y >= (nnc_u64(1) << 32)) {
      y >>= 1;
      frac |= 1u << b;
    }
  }
  return (ip << 16) | frac;
}

// Decoder side: the symbol's table entry from the state, the state after it,
// and whether a 16-bit word must be read to renormalise.
NNC_HD nnc_u32 decode_slot(nnc_u32 x, nnc_u32 precision) { return x & ((1u << precision) - 1u); }
NNC_HD nnc_u32 decode_step(nnc_u32 x, nnc_u32 entry, nnc_u32 precision) {
  return entry_freq(entry) * (x >> precision) + entry_bias(entry);
}
NNC_HD bool decode_needs_word(nnc_u32 x) { return x < kStateLow; }
NNC_HD nnc_u32 decode_refill(nnc_u32 x, nnc_u16 word) { return (x << 16) | word; }

// ---- chunk table --------------------------------------------------------------
// A 256-bit presence map (32 bytes, bit s%8 of byte s/8), then the frequency
// of every present symbol in ascending symbol order, P bits each, packed
// least-significant bit first into ceil(count * P / 8) bytes.

NNC_HD nnc_u32 table_bytes(nnc_u32 present, nnc_u32 precision) {
  return 32u + (present * precision + 7u) / 8u;
}

// Parse a table from `len` bytes: freqs[256] (0 for absent symbols). Returns
// the bytes used, or 0 when the table is malformed: truncated, a present
// symbol with frequency 0, fewer than two symbols, or a sum other than 2^P.
NNC_HD nnc_u32 parse_table(const nnc_u8* p, nnc_u32 len, nnc_u32 precision, nnc_u32* freqs) {
  if (len < 32u) return 0;
  nnc_u32 present = 0;
  for (nnc_u32 i = 0; i < 32u; ++i) {
    nnc_u32 b = p[i];
    while (b) {
      present += b & 1u;
      b >>= 1;
    }
  }
  const nnc_u32 need = table_bytes(present, precision);
  if (present < 2u || len < need) return 0;
  nnc_u32 bitpos = 32u * 8u, sum = 0;
  for (nnc_u32 s = 0; s < 256u; ++s) {
    freqs[s] = 0;
    if (!((p[s >> 3] >> (s & 7u)) & 1u)) continue;
    nnc_u32 v = 0;
    for (nnc_u32 k = 0; k < precision; ++k, ++bitpos) v |= ((p[bitpos >> 3] >> (bitpos & 7u)) & 1u) << k;
    if (v == 0) return 0;
    freqs[s] = v;
    sum += v;
  }
  if (sum != (1u << precision)) return 0;
  return need;
}

// Fill the 2^P-entry decode table from valid frequencies.
NNC_HD void build_decode_table(const nnc_u32* freqs, nnc_u32 precision, nnc_u32* table) {
  nnc_u32 cum = 0;
  for (nnc_u32 s = 0; s < 256u; ++s) {
    for (nnc_u32 j = 0; j < freqs[s]; ++j) table[cum + j] = pack_entry(s, freqs[s], j);
    cum += freqs[s];
  }
  (void)precision;
}

}  // namespace rans
}  // namespace nnc
