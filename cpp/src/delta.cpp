// The inverse of a checkpoint delta's "sub" transform (docs/container.md):
// dst <- ref + unzigzag(dst), as unsigned integers of the element's width, in one
// pass over both buffers (the compiler vectorises the loop for each width).
#include <cstddef>
#include <cstdint>

#include "nncodecs/transform.h"

namespace nnc {
namespace {

template <typename U>
void unzigzag_add_as(void* dst, const void* ref, std::size_t count) {
  auto* d = static_cast<U*>(dst);
  const auto* r = static_cast<const U*>(ref);
  for (std::size_t i = 0; i < count; ++i) {
    const U x = d[i];
    d[i] = static_cast<U>(static_cast<U>((x >> 1) ^ static_cast<U>(0 - (x & 1))) + r[i]);
  }
}

}  // namespace

Status unzigzag_add(void* dst, std::size_t dst_len, const void* ref, std::size_t ref_len,
                    std::size_t width) {
  if (dst_len != ref_len) return Status::bad_argument;
  if (width == 0 || dst_len % width) return Status::bad_argument;
  const std::size_t count = dst_len / width;
  switch (width) {
    case 1: unzigzag_add_as<std::uint8_t>(dst, ref, count); break;
    case 2: unzigzag_add_as<std::uint16_t>(dst, ref, count); break;
    case 4: unzigzag_add_as<std::uint32_t>(dst, ref, count); break;
    case 8: unzigzag_add_as<std::uint64_t>(dst, ref, count); break;
    default: return Status::bad_argument;
  }
  return Status::ok;
}

}  // namespace nnc
