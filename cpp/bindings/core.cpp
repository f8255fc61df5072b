// pybind11 binding of the kernels: nncodecs._core. Checks buffers, releases
// the GIL around every kernel and turns a Status into a Python exception.
// The only C++ code that knows Python: this file (the module and the
// transform kernels), args.* (argument adaptation), output_cache.*,
// frame.cpp, gpu_host.cpp, constants.cpp and testing.cpp.
#include <string>

#include "args.h"
#include "bindings.h"
#include "nncodecs/dispatch.h"
#include "nncodecs/frame.h"
#include "nncodecs/threadpool.h"
#include "nncodecs/transform.h"
#include "output_cache.h"

using namespace nncodecs_py;  // NOLINT: this module's parts

namespace {

using ReorderFn = nnc::Status (*)(void*, std::size_t, const void*, std::size_t, nnc::Layout,
                                  nnc::Variant, int);
using PlanesFn = nnc::Status (*)(void*, std::size_t, const void*, std::size_t, std::size_t,
                                 nnc::Layout, nnc::Variant, int);

void call_reorder(ReorderFn fn, const char* func, py::handle dst, py::handle src,
                  const std::string& layout, const std::string& variant, int threads) {
  nnc::Layout l = parse_layout(layout, func);
  nnc::Variant v = parse_variant(variant, func);
  Buffer d(dst, true, func, "dst"), s(src, false, func, "src");
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = fn(d.data(), d.size(), s.data(), s.size(), l, v, threads);
  }
  raise_status(st, func, d.size(), s.size(), nnc::layout_width(l), layout);
}

void call_planes(PlanesFn fn, const char* func, py::handle dst, py::handle src,
                 std::size_t elemsize, const std::string& layout, const std::string& variant,
                 int threads) {
  nnc::Layout l = parse_layout(layout, func);
  nnc::Variant v = parse_variant(variant, func);
  Buffer d(dst, true, func, "dst"), s(src, false, func, "src");
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = fn(d.data(), d.size(), s.data(), s.size(), elemsize, l, v, threads);
  }
  raise_status(st, func, d.size(), s.size(), elemsize, layout);
}

const char* variant_name(nnc::Variant v) {
  return v == nnc::Variant::avx2 ? "avx2" : "scalar";
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "nncodecs C++ kernels (private: use the codecs in nncodecs.codecs)";
  // A cap that names no level stops the import here, before any kernel runs
  // at a level the user did not ask for. pybind11 raises it as ImportError.
  if (const char* error = nnc::dispatch_env_error()) throw py::value_error(error);

  m.def(
      "reorder_encode",
      [](py::handle dst, py::handle src, const std::string& layout, const std::string& variant,
         int threads) {
        call_reorder(nnc::reorder_encode, "reorder_encode", dst, src, layout, variant, threads);
      },
      py::arg("dst"), py::arg("src"), py::arg("layout"), py::arg("variant") = "auto",
      py::arg("threads") = 0, "Exponent-first bit reorder of src into dst (may be src).");
  m.def(
      "reorder_decode",
      [](py::handle dst, py::handle src, const std::string& layout, const std::string& variant,
         int threads) {
        call_reorder(nnc::reorder_decode, "reorder_decode", dst, src, layout, variant, threads);
      },
      py::arg("dst"), py::arg("src"), py::arg("layout"), py::arg("variant") = "auto",
      py::arg("threads") = 0, "Inverse of reorder_encode.");
  m.def(
      "planes_split",
      [](py::handle dst, py::handle src, std::size_t elemsize, const std::string& layout,
         const std::string& variant, int threads) {
        call_planes(nnc::planes_split, "planes_split", dst, src, elemsize, layout, variant,
                    threads);
      },
      py::arg("dst"), py::arg("src"), py::arg("elemsize"), py::arg("layout") = "none",
      py::arg("variant") = "auto", py::arg("threads") = 0,
      "Byte-plane split of src into dst, with the reorder of `layout` fused in.");
  m.def(
      "planes_merge",
      [](py::handle dst, py::handle src, std::size_t elemsize, const std::string& layout,
         const std::string& variant, int threads) {
        call_planes(nnc::planes_merge, "planes_merge", dst, src, elemsize, layout, variant,
                    threads);
      },
      py::arg("dst"), py::arg("src"), py::arg("elemsize"), py::arg("layout") = "none",
      py::arg("variant") = "auto", py::arg("threads") = 0,
      "Inverse of planes_split, with the inverse reorder fused in.");
  m.def(
      "variants",
      [] {
        py::list out;
        out.append("scalar");
        if (nnc::variant_available(nnc::Variant::avx2)) out.append("avx2");
        return out;
      },
      "Kernel variants this CPU runs.");
  m.def(
      "best_variant", [] { return variant_name(nnc::best_variant()); },
      "The variant 'auto' resolves to on this CPU.");
  m.def("hardware_threads", &nnc::hardware_threads, "Hardware threads on this machine.");
  m.attr("DISPATCH_LEVELS") = py::make_tuple("scalar", "avx2", "avx512");
  m.def(
      "dispatch_level", [] { return nnc::dispatch_level_name(nnc::dispatch_level()); },
      "The SIMD level every kernel choice obeys: the CPU's, capped by NNCODECS_DISPATCH.");
  m.def(
      "cpu_dispatch_level", [] { return nnc::dispatch_level_name(nnc::cpu_dispatch_level()); },
      "The SIMD level this CPU runs (scalar, avx2 or avx512), with no cap.");
  def_frame(m);
  def_gpu_host(m);
  def_output_cache(m);
  def_testing(m);
  def_constants(m);

  m.def(
      "crc32c",
      [](py::handle data, std::uint32_t crc, bool release_gil) {
        Buffer b(data, false, "crc32c", "data");
        if (!release_gil) return nnc::crc32c(crc, b.data(), b.size());
        py::gil_scoped_release release;
        return nnc::crc32c(crc, b.data(), b.size());
      },
      py::arg("data"), py::arg("crc") = 0, py::arg("release_gil") = true,
      "CRC32C (Castagnoli) of data, continuing crc. A daemon thread passes "
      "release_gil=False: one that takes the GIL back in here while Python shuts down is "
      "ended by an unwind that C++ turns into an abort.");
  m.def(
      "unzigzag_add",
      [](py::handle dst, py::handle ref, std::size_t width) {
        Buffer d(dst, true, "unzigzag_add", "dst"), r(ref, false, "unzigzag_add", "ref");
        nnc::Status st;
        {
          py::gil_scoped_release release;
          st = nnc::unzigzag_add(d.data(), d.size(), r.data(), r.size(), width);
        }
        raise_status(st, "unzigzag_add", d.size(), r.size(), width, "");
      },
      py::arg("dst"), py::arg("ref"), py::arg("width"),
      "dst <- ref + unzigzag(dst), elements of width bytes (a delta's 'sub' undone).");
  m.def("crc32c_combine", &nnc::crc32c_combine, py::arg("crc_a"), py::arg("crc_b"),
        py::arg("len_b"), "CRC32C of A||B from the CRCs of A and B.");
}
