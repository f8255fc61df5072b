// Scalar reference kernels and the dispatcher: argument checks, variant
// choice and the split of large buffers across the thread pool.
#include "nncodecs/transform.h"

#include <cstring>

#include "nncodecs/reorder_word.h"
#include "nncodecs/threadpool.h"
#include "transform_kernels.h"

namespace nnc {

std::size_t layout_width(Layout layout) {
  switch (layout) {
    case Layout::f64: return 8;
    case Layout::f32: return 4;
    case Layout::f16:
    case Layout::bf16: return 2;
    case Layout::f8_e4m3:
    case Layout::f8_e5m2: return 1;
    case Layout::none: return 0;
  }
  return 0;
}

unsigned layout_mantissa_bits(Layout layout) {
  switch (layout) {
    case Layout::f64: return 52;
    case Layout::f32: return 23;
    case Layout::f16: return 10;
    case Layout::bf16: return 7;
    case Layout::f8_e4m3: return 3;
    case Layout::f8_e5m2: return 2;
    case Layout::none: return 0;
  }
  return 0;
}

static bool layout_valid(Layout layout) {
  return static_cast<int>(layout) >= 0 && static_cast<int>(layout) <= 6;
}

namespace detail {
namespace {

template <class U>
U load_word(const uint8_t* p) {
  U w;
  std::memcpy(&w, p, sizeof(U));  // elements are little-endian, as is every supported host
  return w;
}

template <class U>
void reorder_words(uint8_t* dst, const uint8_t* src, std::size_t begin, std::size_t end,
                   unsigned m, bool decode) {
  for (std::size_t i = begin; i < end; ++i) {
    U w = load_word<U>(src + i * sizeof(U));
    w = decode ? reorder_decode_word<U>(w, m) : reorder_encode_word<U>(w, m);
    std::memcpy(dst + i * sizeof(U), &w, sizeof(U));
  }
}

void reorder_scalar(uint8_t* dst, const uint8_t* src, std::size_t begin, std::size_t end,
                    Layout layout, bool decode) {
  const unsigned m = layout_mantissa_bits(layout);
  switch (layout_width(layout)) {
    case 1: reorder_words<uint8_t>(dst, src, begin, end, m, decode); break;
    case 2: reorder_words<uint16_t>(dst, src, begin, end, m, decode); break;
    case 4: reorder_words<uint32_t>(dst, src, begin, end, m, decode); break;
    case 8: reorder_words<uint64_t>(dst, src, begin, end, m, decode); break;
    default: break;
  }
}

template <class U>
void split_words(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                 std::size_t end, unsigned m) {
  for (std::size_t i = begin; i < end; ++i) {
    U w = reorder_encode_word<U>(load_word<U>(src + i * sizeof(U)), m);
    for (std::size_t j = 0; j < sizeof(U); ++j) dst[j * n + i] = static_cast<uint8_t>(w >> (8 * j));
  }
}

template <class U>
void merge_words(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                 std::size_t end, unsigned m) {
  for (std::size_t i = begin; i < end; ++i) {
    U w = 0;
    for (std::size_t j = 0; j < sizeof(U); ++j) w |= static_cast<U>(U(src[j * n + i]) << (8 * j));
    w = reorder_decode_word<U>(w, m);
    std::memcpy(dst + i * sizeof(U), &w, sizeof(U));
  }
}

void split_scalar(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                  std::size_t end, std::size_t es, Layout layout) {
  const unsigned m = layout_mantissa_bits(layout);
  switch (layout_width(layout)) {
    case 1: split_words<uint8_t>(dst, src, n, begin, end, m); return;
    case 2: split_words<uint16_t>(dst, src, n, begin, end, m); return;
    case 4: split_words<uint32_t>(dst, src, n, begin, end, m); return;
    case 8: split_words<uint64_t>(dst, src, n, begin, end, m); return;
    default: break;
  }
  if (es == 1) {  // one plane: a copy
    if (end > begin) std::memcpy(dst + begin, src + begin, end - begin);
    return;
  }
  for (std::size_t i = begin; i < end; ++i) {
    for (std::size_t j = 0; j < es; ++j) dst[j * n + i] = src[i * es + j];
  }
}

void merge_scalar(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                  std::size_t end, std::size_t es, Layout layout) {
  const unsigned m = layout_mantissa_bits(layout);
  switch (layout_width(layout)) {
    case 1: merge_words<uint8_t>(dst, src, n, begin, end, m); return;
    case 2: merge_words<uint16_t>(dst, src, n, begin, end, m); return;
    case 4: merge_words<uint32_t>(dst, src, n, begin, end, m); return;
    case 8: merge_words<uint64_t>(dst, src, n, begin, end, m); return;
    default: break;
  }
  if (es == 1) {
    if (end > begin) std::memcpy(dst + begin, src + begin, end - begin);
    return;
  }
  for (std::size_t i = begin; i < end; ++i) {
    for (std::size_t j = 0; j < es; ++j) dst[i * es + j] = src[j * n + i];
  }
}

template <class U>
void merge_ptr_words(uint8_t* dst, const uint8_t* const* planes, std::size_t count, unsigned m,
                     bool reorder) {
  for (std::size_t i = 0; i < count; ++i) {
    U w = 0;
    for (std::size_t j = 0; j < sizeof(U); ++j) w |= static_cast<U>(U(planes[j][i]) << (8 * j));
    if (reorder) w = reorder_decode_word<U>(w, m);
    std::memcpy(dst + i * sizeof(U), &w, sizeof(U));
  }
}

void merge_ptrs_scalar(uint8_t* dst, const uint8_t* const* planes, std::size_t count,
                       std::size_t es, Layout layout) {
  const bool tx = layout != Layout::none;
  const unsigned m = layout_mantissa_bits(layout);
  switch (es) {
    case 1:
      if (tx) reorder_words<uint8_t>(dst, planes[0], 0, count, m, true);
      else if (count) std::memcpy(dst, planes[0], count);
      return;
    case 2: merge_ptr_words<uint16_t>(dst, planes, count, m, tx); return;
    case 4: merge_ptr_words<uint32_t>(dst, planes, count, m, tx); return;
    case 8: merge_ptr_words<uint64_t>(dst, planes, count, m, tx); return;
    default:
      for (std::size_t i = 0; i < count; ++i)
        for (std::size_t j = 0; j < es; ++j) dst[i * es + j] = planes[j][i];
  }
}

}  // namespace

const RangeKernels scalar_kernels = {reorder_scalar, split_scalar, merge_scalar,
                                     merge_ptrs_scalar};

}  // namespace detail

bool variant_available(Variant variant) {
  switch (variant) {
    case Variant::automatic:
    case Variant::scalar: return true;
    case Variant::avx2:
#ifdef NNC_HAVE_AVX2_KERNELS
      return dispatch_allows(DispatchLevel::avx2);
#else
      return false;
#endif
  }
  return false;
}

Variant best_variant() { return variant_available(Variant::avx2) ? Variant::avx2 : Variant::scalar; }

const detail::RangeKernels& detail::active_kernels() {
#ifdef NNC_HAVE_AVX2_KERNELS
  if (best_variant() == Variant::avx2) return avx2_kernels;
#endif
  return scalar_kernels;
}

namespace {

const detail::RangeKernels* kernels_for(Variant variant) {
  if (variant == Variant::automatic) variant = best_variant();
  if (!variant_available(variant)) return nullptr;
#ifdef NNC_HAVE_AVX2_KERNELS
  if (variant == Variant::avx2) return &detail::avx2_kernels;
#endif
  return &detail::scalar_kernels;
}

bool overlaps(const void* a, std::size_t alen, const void* b, std::size_t blen) {
  auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return alen != 0 && blen != 0 && pa < pb + blen && pb < pa + alen;
}

// Below this many bytes a second thread costs more than it saves.
constexpr std::size_t kParallelBytes = std::size_t(1) << 20;
constexpr std::size_t kTaskBytes = std::size_t(1) << 18;

// Run body(begin, end) over [0, n) elements, in pieces on the pool when large.
template <class Body>
void for_ranges(std::size_t n, std::size_t elemsize, int threads, Body body) {
  const std::size_t bytes = n * elemsize;
  const int want = resolve_threads(threads);
  if (want <= 1 || bytes < kParallelBytes) {
    body(std::size_t(0), n);
    return;
  }
  std::size_t tasks = bytes / kTaskBytes;
  tasks = tasks < std::size_t(want) * 4 ? tasks : std::size_t(want) * 4;
  // Piece boundaries on multiples of 64 elements keep SIMD blocks whole.
  std::size_t per = ((n / tasks) + 63) & ~std::size_t(63);
  tasks = (n + per - 1) / per;
  parallel_for(tasks, want, [&](std::size_t t) {
    std::size_t b = t * per, e = b + per < n ? b + per : n;
    body(b, e);
  });
}

Status check_common(std::size_t dst_cap, std::size_t src_len, std::size_t elemsize,
                    Layout layout, const detail::RangeKernels* k) {
  if (k == nullptr || !layout_valid(layout) || elemsize == 0) return Status::bad_argument;
  if (layout != Layout::none && elemsize != layout_width(layout)) return Status::bad_argument;
  if (src_len % elemsize != 0) return Status::bad_argument;
  if (dst_cap < transform_bound(src_len)) return Status::dst_too_small;
  return Status::ok;
}

Status reorder(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
               Layout layout, Variant variant, int threads, bool decode) {
  const detail::RangeKernels* k = kernels_for(variant);
  const std::size_t width = layout == Layout::none ? 1 : layout_width(layout);
  Status s = check_common(dst_cap, src_len, width, layout, k);
  if (s != Status::ok) return s;
  if (dst != src && overlaps(dst, src_len, src, src_len)) return Status::overlap;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* p = static_cast<const uint8_t*>(src);
  if (layout == Layout::none) {
    if (d != p && src_len != 0) std::memcpy(d, p, src_len);
    return Status::ok;
  }
  for_ranges(src_len / width, width, threads,
             [&](std::size_t b, std::size_t e) { k->reorder(d, p, b, e, layout, decode); });
  return Status::ok;
}

}  // namespace

Status reorder_encode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                      Layout layout, Variant variant, int threads) {
  return reorder(dst, dst_cap, src, src_len, layout, variant, threads, false);
}

Status reorder_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                      Layout layout, Variant variant, int threads) {
  return reorder(dst, dst_cap, src, src_len, layout, variant, threads, true);
}

namespace {

using PlanesKernel = decltype(detail::RangeKernels::split);

Status planes(PlanesKernel detail::RangeKernels::*which, void* dst, std::size_t dst_cap,
              const void* src, std::size_t src_len, std::size_t elemsize, Layout layout,
              Variant variant, int threads) {
  const detail::RangeKernels* k = kernels_for(variant);
  Status s = check_common(dst_cap, src_len, elemsize, layout, k);
  if (s != Status::ok) return s;
  if (overlaps(dst, src_len, src, src_len)) return Status::overlap;
  const std::size_t n = src_len / elemsize;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* p = static_cast<const uint8_t*>(src);
  PlanesKernel kernel = k->*which;
  for_ranges(n, elemsize, threads,
             [&](std::size_t b, std::size_t e) { kernel(d, p, n, b, e, elemsize, layout); });
  return Status::ok;
}

}  // namespace

Status planes_split(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::size_t elemsize, Layout layout, Variant variant, int threads) {
  return planes(&detail::RangeKernels::split, dst, dst_cap, src, src_len, elemsize, layout,
                variant, threads);
}

Status planes_merge(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::size_t elemsize, Layout layout, Variant variant, int threads) {
  return planes(&detail::RangeKernels::merge, dst, dst_cap, src, src_len, elemsize, layout,
                variant, threads);
}

}  // namespace nnc
