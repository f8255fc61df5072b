// pybind11 binding of the kernels: nncodecs._core. Checks buffers, releases
// the GIL around every kernel and turns a Status into a Python exception.
// The only C++ file that knows Python.
#include <pybind11/pybind11.h>

#include <string>

#include "nncodecs/threadpool.h"
#include "nncodecs/transform.h"

namespace py = pybind11;

namespace {

// A contiguous buffer held for the duration of a call.
class Buffer {
 public:
  Buffer(py::handle obj, bool writable, const char* func, const char* what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      throw py::type_error(std::string("nncodecs._core.") + func + ": " + what + " must be a " +
                           (writable ? "writable " : "") + "C-contiguous buffer, got " +
                           std::string(py::str(py::type::of(obj).attr("__name__"))));
    }
  }
  ~Buffer() { PyBuffer_Release(&view_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return view_.buf; }
  std::size_t size() const { return static_cast<std::size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

nnc::Layout parse_layout(const std::string& name, const char* func) {
  static const std::pair<const char*, nnc::Layout> table[] = {
      {"none", nnc::Layout::none},       {"float64", nnc::Layout::f64},
      {"float32", nnc::Layout::f32},     {"float16", nnc::Layout::f16},
      {"bfloat16", nnc::Layout::bf16},   {"float8_e4m3fn", nnc::Layout::f8_e4m3},
      {"float8_e5m2", nnc::Layout::f8_e5m2},
  };
  for (const auto& [key, value] : table)
    if (name == key) return value;
  throw py::value_error(std::string("nncodecs._core.") + func + ": unknown layout '" + name +
                        "', expected one of none, float64, float32, float16, bfloat16, "
                        "float8_e4m3fn, float8_e5m2");
}

nnc::Variant parse_variant(const std::string& name, const char* func) {
  nnc::Variant v;
  if (name == "auto") v = nnc::Variant::automatic;
  else if (name == "scalar") v = nnc::Variant::scalar;
  else if (name == "avx2") v = nnc::Variant::avx2;
  else
    throw py::value_error(std::string("nncodecs._core.") + func + ": unknown variant '" + name +
                          "', expected auto, scalar or avx2");
  if (!nnc::variant_available(v))
    throw py::value_error(std::string("nncodecs._core.") + func + ": variant '" + name +
                          "' is not available on this CPU");
  return v;
}

void raise_status(nnc::Status s, const char* func, std::size_t dst_len, std::size_t src_len,
                  std::size_t elemsize, const std::string& layout) {
  if (s == nnc::Status::ok) return;
  throw py::value_error(std::string("nncodecs._core.") + func + ": " + nnc::status_message(s) +
                        " (dst " + std::to_string(dst_len) + " bytes, src " +
                        std::to_string(src_len) + " bytes, element size " +
                        std::to_string(elemsize) + ", layout " + layout + ")");
}

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
}
