// Canonical Huffman chunk coder: code lengths <= 11 bits (a 2 KiB-entry
// decode table that fits L1), 4 interleaved bit streams per sub-block.
// Bitstream: docs/format.md ("Huffman chunk").
#include <algorithm>
#include <cstring>

#include "coders.h"

namespace nnc {
namespace detail {

void huffman_lengths(const std::uint32_t counts[256], unsigned max_bits, std::uint8_t lengths[256]) {
  // Optimal lengths by the two-queue method over symbols sorted by (count,
  // symbol); then limited to max_bits and repaired to satisfy Kraft.
  std::memset(lengths, 0, 256);
  int sym[256], n = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) sym[n++] = s;
  if (n < 2) {
    if (n == 1) lengths[sym[0]] = 1;
    return;
  }
  std::stable_sort(sym, sym + n, [&](int a, int b) { return counts[a] < counts[b]; });
  // Nodes 0..n-1 are leaves, n..2n-2 internal; parent[] gives the tree.
  std::uint64_t weight[511];
  int parent[511];
  std::fill(parent, parent + (2 * n - 1), -1);  // (not parent + 2n - 1: past the end)
  for (int i = 0; i < n; ++i) weight[i] = counts[sym[i]];
  int leaf = 0, inner = n, next = n;
  auto take = [&]() {
    if (leaf < n && (inner >= next || weight[leaf] <= weight[inner])) return leaf++;
    return inner++;
  };
  for (; next < 2 * n - 1; ++next) {
    int a = take(), b = take();
    weight[next] = weight[a] + weight[b];
    parent[a] = parent[b] = next;
  }
  int depth[511];
  depth[2 * n - 2] = 0;
  for (int i = 2 * n - 3; i >= 0; --i) depth[i] = depth[parent[i]] + 1;
  for (int i = 0; i < n; ++i) lengths[sym[i]] = static_cast<std::uint8_t>(depth[i]);

  // Limit: clamp, then lengthen the rarest short codes until Kraft fits.
  const std::uint32_t cap = 1u << max_bits;
  std::uint32_t kraft = 0;
  for (int i = 0; i < n; ++i) {
    int s = sym[i];
    if (lengths[s] > max_bits) lengths[s] = static_cast<std::uint8_t>(max_bits);
    kraft += cap >> lengths[s];
  }
  while (kraft > cap) {
    for (int i = 0; i < n && kraft > cap; ++i) {  // rarest first
      int s = sym[i];
      if (lengths[s] < max_bits) {
        kraft -= cap >> (lengths[s] + 1);
        ++lengths[s];
      }
    }
  }
  // Spend any slack on the most frequent symbols.
  for (int i = n - 1; i >= 0; --i) {
    int s = sym[i];
    while (lengths[s] > 1 && kraft + (cap >> lengths[s]) <= cap) {
      kraft += cap >> lengths[s];
      --lengths[s];
    }
  }
}

namespace {

// Bytes with their bits in reverse order.
struct ByteReverse {
  std::uint8_t r[256];
  constexpr ByteReverse() : r() {
    for (unsigned i = 0; i < 256; ++i) {
      unsigned v = 0;
      for (unsigned k = 0; k < 8; ++k) v |= ((i >> k) & 1u) << (7 - k);
      r[i] = static_cast<std::uint8_t>(v);
    }
  }
};
constexpr ByteReverse kReverse;

// Canonical codes, bit-reversed for least-significant-bit-first streams, of
// the n symbols listed in syms (ascending, each with a length); the codes of
// other symbols are left alone.
void canonical_codes(const std::uint8_t lengths[256], const std::uint8_t* syms, unsigned n,
                     std::uint16_t codes[256]) {
  unsigned count[32] = {0};
  for (unsigned i = 0; i < n; ++i) ++count[lengths[syms[i]]];
  std::uint32_t next[32] = {0}, code = 0;
  for (unsigned len = 1; len < 32; ++len) {
    code = (code + count[len - 1]) << 1;
    next[len] = code;
  }
  for (unsigned i = 0; i < n; ++i) {
    const unsigned len = lengths[syms[i]];
    const std::uint32_t c = next[len]++;  // len <= 16 bits
    const std::uint32_t r = (std::uint32_t(kReverse.r[c & 0xFF]) << 8) | kReverse.r[(c >> 8) & 0xFF];
    codes[syms[i]] = static_cast<std::uint16_t>(r >> (16 - len));
  }
}

// The symbols with a code, ascending; returns how many.
unsigned coded_symbols(const std::uint8_t lengths[256], std::uint8_t syms[256]) {
  unsigned n = 0;
  for (int s = 0; s < 256; ++s)
    if (lengths[s]) syms[n++] = static_cast<std::uint8_t>(s);
  return n;
}

struct BitWriter {
  std::vector<std::uint8_t>* out;
  std::uint64_t acc = 0;
  unsigned bits = 0;
  void put(std::uint32_t code, unsigned len) {
    acc |= std::uint64_t(code) << bits;
    bits += len;
    while (bits >= 8) {
      out->push_back(static_cast<std::uint8_t>(acc));
      acc >>= 8;
      bits -= 8;
    }
  }
  void flush() {
    if (bits) out->push_back(static_cast<std::uint8_t>(acc));  // padding bits are zero
    acc = 0;
    bits = 0;
  }
};

// Least-significant-bit-first reader. Past the end it supplies zero bits and
// counts them, so a decoder never reads outside the stream and can tell an
// overrun afterwards.
struct BitReader {
  const std::uint8_t* p;
  const std::uint8_t* end;
  std::uint64_t buf = 0;
  unsigned bits = 0;
  std::uint64_t consumed = 0;

  void refill() {
    if (end - p >= 8) {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      buf |= v << bits;
      p += (63 - bits) >> 3;
      bits |= 56;
    } else {
      while (bits <= 56 && p < end) {
        buf |= std::uint64_t(*p++) << bits;
        bits += 8;
      }
      if (bits < 56) bits = 56;  // virtual zero bits past the end
    }
  }
};

}  // namespace

std::size_t huffman_estimate(const std::uint32_t counts[256], std::size_t m,
                             unsigned subblock_log2) {
  std::uint8_t lengths[256];
  huffman_lengths(counts, kHuffmanMaxBits, lengths);
  std::uint64_t bits = 0;
  unsigned present = 0;
  for (int s = 0; s < 256; ++s) {
    present += lengths[s] != 0;
    bits += std::uint64_t(counts[s]) * lengths[s];
  }
  const std::size_t blocks = (m + (std::size_t(1) << subblock_log2) - 1) >> subblock_log2;
  // Stream lengths, and half a byte of padding per stream on average.
  return 32 + (present + 1) / 2 + blocks * kHuffmanStreams * 4 + blocks * kHuffmanStreams / 2 +
         static_cast<std::size_t>(bits / 8);
}

void huffman_encode_chunk(const std::uint8_t* src, std::size_t m, const std::uint32_t counts[256],
                          unsigned subblock_log2, std::vector<std::uint8_t>* out) {
  std::uint8_t lengths[256];
  std::uint16_t codes[256];
  huffman_lengths(counts, kHuffmanMaxBits, lengths);
  std::uint8_t syms[256];
  canonical_codes(lengths, syms, coded_symbols(lengths, syms), codes);
  // Table: presence map, then 4-bit lengths of present symbols, low nibble first.
  const std::size_t start = out->size();
  out->resize(start + 32, 0);
  unsigned present = 0;
  for (int s = 0; s < 256; ++s)
    if (lengths[s]) {
      (*out)[start + s / 8] |= std::uint8_t(1u << (s % 8));
      ++present;
    }
  const std::size_t nib_at = out->size();
  out->resize(nib_at + (present + 1) / 2, 0);
  unsigned k = 0;
  for (int s = 0; s < 256; ++s)
    if (lengths[s]) {
      (*out)[nib_at + k / 2] |= std::uint8_t(lengths[s] << (4 * (k % 2)));
      ++k;
    }

  const std::size_t block = std::size_t(1) << subblock_log2;
  const std::size_t blocks = (m + block - 1) / block;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* sym = src + b * block;
    const std::size_t mb = std::min(block, m - b * block);
    const std::size_t quarter = (mb + kHuffmanStreams - 1) / kHuffmanStreams;
    const std::size_t lens_at = out->size();
    out->resize(lens_at + 4 * kHuffmanStreams);
    for (unsigned j = 0; j < kHuffmanStreams; ++j) {
      const std::size_t begin = std::min(mb, j * quarter), end = std::min(mb, begin + quarter);
      const std::size_t before = out->size();
      BitWriter w{out};
      for (std::size_t i = begin; i < end; ++i) w.put(codes[sym[i]], lengths[sym[i]]);
      w.flush();
      store_u32(out->data() + lens_at + 4 * j, static_cast<std::uint32_t>(out->size() - before));
    }
  }
}

bool huffman_decode_chunk(std::uint8_t* dst, std::size_t m, const std::uint8_t* src,
                          std::size_t len, unsigned subblock_log2, Error* err) {
  if (len < 32) return fail(err, Status::corrupt, "Huffman chunk: %zu bytes, no table", len);
  std::uint8_t lengths[256] = {0};
  std::uint64_t map[4] = {0, 0, 0, 0};  // presence: symbol s is bit s % 64 of word s / 64
  for (int i = 0; i < 32; ++i) map[i / 8] |= std::uint64_t(src[i]) << (8 * (i % 8));
  unsigned present = 0;
  for (std::uint64_t word : map) present += static_cast<unsigned>(__builtin_popcountll(word));
  const std::size_t table_len = 32 + (present + 1) / 2;
  if (present < 2 || len < table_len)
    return fail(err, Status::corrupt, "Huffman chunk: table of %u symbols in %zu bytes", present,
                len);
  std::uint32_t cap = 1u << kHuffmanMaxBits;
  std::uint32_t kraft = 0;
  unsigned k = 0, longest = 0;
  std::uint8_t syms[256];
  for (int wi = 0; wi < 4; ++wi)
    for (std::uint64_t word = map[wi]; word; word &= word - 1) {
      const int s = 64 * wi + __builtin_ctzll(word);
      syms[k] = static_cast<std::uint8_t>(s);
      const unsigned l = (src[32 + k / 2] >> (4 * (k % 2))) & 0xFu;
      ++k;
      if (l == 0 || l > kHuffmanMaxBits)
        return fail(err, Status::corrupt, "Huffman chunk: symbol %d has code length %u", s, l);
      lengths[s] = static_cast<std::uint8_t>(l);
      kraft += cap >> l;
      longest = std::max(longest, l);
    }
  if (kraft > cap)
    return fail(err, Status::corrupt, "Huffman chunk: code lengths oversubscribe the code space");
  std::uint16_t codes[256];
  canonical_codes(lengths, syms, present, codes);
  // Entry: symbol | length << 8; length 0 marks a code that does not exist.
  // The table spans the longest code only (its build costs more than
  // decoding a small chunk: 2^11 entries for a 384-symbol bias otherwise).
  // A complete code fills every entry; only an incomplete one needs zeros.
  const bool complete = kraft == cap;
  cap = 1u << longest;
  std::uint16_t table[1u << kHuffmanMaxBits];
  if (!complete) std::memset(table, 0, cap * sizeof(table[0]));
  for (unsigned i = 0; i < present; ++i) {
    const unsigned s = syms[i], l = lengths[s];
    for (std::uint32_t i = codes[s]; i < cap; i += 1u << l)
      table[i] = static_cast<std::uint16_t>(s | (l << 8));
  }
  const std::uint16_t* tab = table;

  const std::size_t block = std::size_t(1) << subblock_log2;
  const std::size_t blocks = (m + block - 1) / block;
  std::size_t pos = table_len;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t mb = std::min(block, m - b * block);
    const std::size_t quarter = (mb + kHuffmanStreams - 1) / kHuffmanStreams;
    if (len - pos < 4 * kHuffmanStreams)
      return fail(err, Status::corrupt, "Huffman sub-block %zu: stream lengths truncated", b);
    BitReader r[kHuffmanStreams];
    std::size_t first[kHuffmanStreams], count[kHuffmanStreams];
    const std::uint8_t* lens = src + pos;
    pos += 4 * kHuffmanStreams;
    for (unsigned j = 0; j < kHuffmanStreams; ++j) {
      const std::size_t slen = load_u32(lens + 4 * j);
      if (slen > len - pos)
        return fail(err, Status::corrupt, "Huffman sub-block %zu: stream %u of %zu bytes overruns",
                    b, j, slen);
      r[j].p = src + pos;
      r[j].end = src + pos + slen;
      pos += slen;
      first[j] = std::min(mb, j * quarter);
      count[j] = std::min(mb, first[j] + quarter) - first[j];
    }
    std::uint8_t* out = dst + b * block;
    bool bad = false;
    auto decode_one = [&](unsigned j, std::size_t i) {
      const std::uint16_t e = tab[r[j].buf & (cap - 1)];
      const unsigned l = e >> 8;
      bad |= (l == 0);
      out[first[j] + i] = static_cast<std::uint8_t>(e);
      r[j].buf >>= l;
      r[j].bits -= l;
      r[j].consumed += l;
    };
    // Streams 0..2 have `quarter` symbols, the last one possibly fewer.
    const std::size_t common = count[kHuffmanStreams - 1];
    std::size_t i = 0;
    for (; i + 4 <= common; i += 4) {
      for (unsigned j = 0; j < kHuffmanStreams; ++j) {
        r[j].refill();  // >= 56 bits: four codes of <= 11 bits
        decode_one(j, i);
        decode_one(j, i + 1);
        decode_one(j, i + 2);
        decode_one(j, i + 3);
      }
    }
    for (unsigned j = 0; j < kHuffmanStreams; ++j)
      for (std::size_t q = i; q < count[j]; ++q) {
        if (r[j].bits < kHuffmanMaxBits) r[j].refill();
        decode_one(j, q);
      }
    if (bad)
      return fail(err, Status::corrupt, "Huffman sub-block %zu: a code that is not in the table",
                  b);
    for (unsigned j = 0; j < kHuffmanStreams; ++j) {
      const std::uint64_t avail = 8 * std::uint64_t(load_u32(lens + 4 * j));
      if (r[j].consumed > avail || (r[j].consumed + 7) / 8 != avail / 8)
        return fail(err, Status::corrupt,
                    "Huffman sub-block %zu: stream %u used %llu bits of %llu", b, j,
                    static_cast<unsigned long long>(r[j].consumed),
                    static_cast<unsigned long long>(avail));
    }
  }
  if (pos != len)
    return fail(err, Status::corrupt, "Huffman chunk: %zu bytes left over after the streams",
                len - pos);
  return true;
}

}  // namespace detail
}  // namespace nnc
