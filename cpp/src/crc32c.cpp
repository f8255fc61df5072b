// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): a slice-by-8 table
// kernel (dispatch level scalar), the SSE4.2 crc32 instruction (avx2) and
// VPCLMULQDQ folding (ymm at avx2, zmm at avx512, where the CPU has it),
// chosen at run time; combination of two CRCs for chunks computed in
// parallel.
#include <atomic>
#include <cstring>

#include "nncodecs/dispatch.h"
#include "nncodecs/frame.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define NNC_HAVE_SSE42 1
#endif

namespace nnc {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;
// Testing: false = widest kernel; true = no carry-less folding (crc32 only).
std::atomic<bool> g_crc_narrow{false};

struct Tables {
  std::uint32_t t[8][256];
  Tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  }
};

const Tables& tables() {
  static const Tables tab;
  return tab;
}

std::uint32_t crc_table(std::uint32_t crc, const std::uint8_t* p, std::size_t len) {
  const auto& t = tables().t;
  while (len >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^
          t[4][(v >> 24) & 0xFF] ^ t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^
          t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
    p += 8;
    len -= 8;
  }
  while (len--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFFu];
  return crc;
}

std::uint32_t gf2_times(const std::uint32_t* mat, std::uint32_t vec) {
  std::uint32_t sum = 0;
  for (int i = 0; vec; vec >>= 1, ++i)
    if (vec & 1u) sum ^= mat[i];
  return sum;
}

void gf2_square(std::uint32_t* square, const std::uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// The operator that advances a raw CRC register over `bytes` zero bytes:
// the one-byte operator raised to that power by repeated squaring.
struct ZeroShift {
  std::uint32_t mat[32];
  explicit ZeroShift(std::uint64_t bytes) {
    std::uint32_t bit[32], base[32], tmp[32];
    bit[0] = kPoly;  // one zero bit
    for (int n = 1; n < 32; ++n) bit[n] = 1u << (n - 1);
    gf2_square(tmp, bit);   // 2 bits
    gf2_square(bit, tmp);   // 4 bits
    gf2_square(base, bit);  // 8 bits: one byte
    for (int n = 0; n < 32; ++n) mat[n] = 1u << n;
    while (bytes) {
      if (bytes & 1u) {
        for (int n = 0; n < 32; ++n) tmp[n] = gf2_times(base, mat[n]);
        std::memcpy(mat, tmp, sizeof(mat));
      }
      bytes >>= 1;
      if (bytes) {
        gf2_square(tmp, base);
        std::memcpy(base, tmp, sizeof(base));
      }
    }
  }
  std::uint32_t apply(std::uint32_t crc) const { return gf2_times(mat, crc); }
};

#ifdef NNC_HAVE_SSE42
constexpr std::size_t kLaneBytes = 4096;

// Three independent crc32 chains over adjacent 4 KiB lanes hide the
// instruction's latency; the lanes are joined with the zero-byte operator.
__attribute__((target("sse4.2"))) std::uint32_t crc_sse42_3way(std::uint32_t crc,
                                                               const std::uint8_t*& p,
                                                               std::size_t& len) {
  static const ZeroShift shift(kLaneBytes);
  while (len >= 3 * kLaneBytes) {
    std::uint64_t a = crc, b = 0, c = 0;
    const std::uint8_t* pa = p;
    const std::uint8_t* pb = p + kLaneBytes;
    const std::uint8_t* pc = p + 2 * kLaneBytes;
    for (std::size_t i = 0; i < kLaneBytes; i += 8) {
      std::uint64_t va, vb, vc;
      std::memcpy(&va, pa + i, 8);
      std::memcpy(&vb, pb + i, 8);
      std::memcpy(&vc, pc + i, 8);
      a = _mm_crc32_u64(a, va);
      b = _mm_crc32_u64(b, vb);
      c = _mm_crc32_u64(c, vc);
    }
    crc = shift.apply(shift.apply(static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b)) ^
          static_cast<std::uint32_t>(c);
    p += 3 * kLaneBytes;
    len -= 3 * kLaneBytes;
  }
  return crc;
}

// The CRC32C of a 256-byte folded window (zero initial value): what both
// folding widths end with.
__attribute__((target("sse4.2"))) std::uint32_t crc_window(const std::uint8_t* folded) {
  std::uint64_t c = 0;
  for (std::size_t i = 0; i < 256; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, folded + i, 8);
    c = _mm_crc32_u64(c, v);
  }
  return static_cast<std::uint32_t>(c);
}

// Long inputs: carry-less multiplication folds 256 bytes at a time (four
// zmm registers of four 128-bit lanes each) forward by 256 bytes, which keeps
// the CRC modulo the polynomial; the 256 folded bytes then go through the
// crc32 instruction. The constants are x^(2048+32) and x^(2048-32) mod P,
// bit-reflected and shifted left by one (derived, and checked against the
// bitwise CRC, by a small model of this loop). About 3x the 3-way crc32 loop.
#define NNC_VPCLMUL __attribute__((target("avx512f,avx512bw,vpclmulqdq,sse4.2")))
NNC_VPCLMUL inline __m512i fold(__m512i a, __m512i k, const std::uint8_t* q) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), _mm512_loadu_si512(q),
                                   0x96);  // a ^ b ^ c
}

NNC_VPCLMUL std::uint32_t crc_fold512(std::uint32_t crc, const std::uint8_t*& p, std::size_t& len) {
  constexpr std::size_t kWindow = 256;
  if (len < 2 * kWindow) return crc;
  const __m512i k = _mm512_set_epi64(0xb9e02b86, 0xdcb17aa4, 0xb9e02b86, 0xdcb17aa4, 0xb9e02b86,
                                     0xdcb17aa4, 0xb9e02b86, 0xdcb17aa4);
  __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(crc))));
  __m512i a1 = _mm512_loadu_si512(p + 64), a2 = _mm512_loadu_si512(p + 128),
          a3 = _mm512_loadu_si512(p + 192);
  p += kWindow;
  len -= kWindow;
  while (len >= kWindow) {
    a0 = fold(a0, k, p);
    a1 = fold(a1, k, p + 64);
    a2 = fold(a2, k, p + 128);
    a3 = fold(a3, k, p + 192);
    p += kWindow;
    len -= kWindow;
  }
  alignas(64) std::uint8_t folded[kWindow];
  _mm512_store_si512(folded, a0);
  _mm512_store_si512(folded + 64, a1);
  _mm512_store_si512(folded + 128, a2);
  _mm512_store_si512(folded + 192, a3);
  return crc_window(folded);
}

// The same folding with AVX2's eight ymm registers of two 128-bit lanes
// each: the same 256-byte window, so the same constants. For CPUs with
// VPCLMULQDQ but no AVX-512 (and the avx2 dispatch level).
#define NNC_VPCLMUL256 __attribute__((target("avx2,vpclmulqdq,sse4.2")))
NNC_VPCLMUL256 std::uint32_t crc_fold256(std::uint32_t crc, const std::uint8_t*& p,
                                         std::size_t& len) {
  constexpr std::size_t kWindow = 256;
  if (len < 2 * kWindow) return crc;
  const __m256i k = _mm256_set_epi64x(0xb9e02b86, 0xdcb17aa4, 0xb9e02b86, 0xdcb17aa4);
  __m256i a[8];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i));
  a[0] = _mm256_xor_si256(a[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(crc))));
  p += kWindow;
  len -= kWindow;
  while (len >= kWindow) {
    for (int i = 0; i < 8; ++i)
      a[i] = _mm256_xor_si256(
          _mm256_xor_si256(_mm256_clmulepi64_epi128(a[i], k, 0x00),
                           _mm256_clmulepi64_epi128(a[i], k, 0x11)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i)));
    p += kWindow;
    len -= kWindow;
  }
  alignas(32) std::uint8_t folded[kWindow];
  for (int i = 0; i < 8; ++i)
    _mm256_store_si256(reinterpret_cast<__m256i*>(folded + 32 * i), a[i]);
  return crc_window(folded);
}

// 2: 512-bit folding (avx512 level), 1: 256-bit (avx2 level), 0: none.
int vpclmul_width() {
  static const int width = !cpu_has(CpuFeature::vpclmulqdq)          ? 0
                           : dispatch_allows(DispatchLevel::avx512) ? 2
                           : dispatch_allows(DispatchLevel::avx2)   ? 1
                                                                    : 0;
  return width;
}

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t crc, const std::uint8_t* p,
                                                          std::size_t len) {
  if (!g_crc_narrow.load(std::memory_order_relaxed)) {
    const int width = vpclmul_width();
    if (width == 2) crc = crc_fold512(crc, p, len);
    if (width == 1) crc = crc_fold256(crc, p, len);
  }
  crc = crc_sse42_3way(crc, p, len);
  std::uint64_t c = crc;
  while (len >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    len -= 8;
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  while (len--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

}  // namespace

void crc32c_set_narrow(bool narrow) { g_crc_narrow.store(narrow); }

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t len) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  crc = ~crc;
#ifdef NNC_HAVE_SSE42
  static const bool hw = dispatch_allows(DispatchLevel::avx2);  // SSE4.2 comes with it
  crc = hw ? crc_sse42(crc, p, len) : crc_table(crc, p, len);
#else
  crc = crc_table(crc, p, len);
#endif
  return ~crc;
}

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  // Advance A's register over len_b zero bytes, then xor in B. The operators
  // for 2^i zero bytes are squared once, on first use: a combine is then one
  // 32x32 GF(2) matrix-vector product per set bit of len_b.
  struct Powers {
    std::uint32_t op[64][32];
    Powers() {
      std::uint32_t bit[32], tmp[32];
      bit[0] = kPoly;  // one zero bit
      for (int n = 1; n < 32; ++n) bit[n] = 1u << (n - 1);
      gf2_square(tmp, bit);      // 2 bits
      gf2_square(bit, tmp);      // 4 bits
      gf2_square(op[0], bit);    // 8 bits: one byte
      for (int i = 1; i < 64; ++i) gf2_square(op[i], op[i - 1]);
    }
  };
  static const Powers powers;
  for (int i = 0; len_b; ++i, len_b >>= 1)
    if (len_b & 1u) crc_a = gf2_times(powers.op[i], crc_a);
  return crc_a ^ crc_b;
}

std::uint32_t crc32c_join(const std::uint32_t* crcs, const std::uint64_t* lens,
                          std::size_t count) {
  // Pieces of one length (a frame's full chunks) take a byte-sliced table of
  // the operator for that many zero bytes: four lookups a piece instead of a
  // matrix product, once the 1,024 entries are made (worth it for many).
  std::uint32_t crc = 0, table[4][256];
  std::uint64_t tabled = ~std::uint64_t(0);
  for (std::size_t i = 0; i < count; ++i) {
    if (lens[i] != tabled && count - i >= 256 && i + 1 < count && lens[i + 1] == lens[i]) {
      for (int b = 0; b < 4; ++b)
        for (std::uint32_t v = 0; v < 256; ++v)
          table[b][v] = crc32c_combine(v << (8 * b), 0, lens[i]);
      tabled = lens[i];
    }
    if (lens[i] == tabled)
      crc = table[0][crc & 0xFF] ^ table[1][(crc >> 8) & 0xFF] ^ table[2][(crc >> 16) & 0xFF] ^
            table[3][crc >> 24] ^ crcs[i];
    else
      crc = crc32c_combine(crc, crcs[i], lens[i]);
  }
  return crc;
}

}  // namespace nnc
