// Status codes shared by every nncodecs kernel. Kernels never throw or abort:
// they return one of these, and the binding turns it into a Python exception.
#pragma once

namespace nnc {

enum class Status : int {
  ok = 0,
  bad_argument = 1,   // a size, element size or layout the kernel cannot accept
  dst_too_small = 2,  // dst_cap below the *_bound() of the input
  overlap = 3,        // dst and src overlap where the kernel needs them apart
  corrupt = 4,        // encoded bytes that do not describe a valid stream
};

inline const char* status_message(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::bad_argument: return "bad argument";
    case Status::dst_too_small: return "destination buffer too small";
    case Status::overlap: return "destination overlaps source";
    case Status::corrupt: return "corrupt data";
  }
  return "unknown status";
}

}  // namespace nnc
