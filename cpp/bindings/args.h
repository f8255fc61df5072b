// The binding's argument adaptation: buffers held for a call, names of
// layouts / element types / coders / variants parsed, and a failed Status
// turned into the Python exception (CorruptDataError or ValueError).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "nncodecs/frame.h"
#include "nncodecs/transform.h"

namespace nncodecs_py {

namespace py = pybind11;

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

nnc::Layout parse_layout(const std::string& name, const char* func);
// An element type by its name (nnc::kElements, the one table).
nnc::Element parse_element(const std::string& name, const char* func);
const char* element_name(nnc::Element e);
nnc::Variant parse_variant(const std::string& name, const char* func);
nnc::Coder parse_coder(const std::string& name);
const char* mode_name(nnc::ChunkMode m);

// Raise a transform kernel's failed Status as ValueError, with the call's sizes.
void raise_status(nnc::Status s, const char* func, std::size_t dst_len, std::size_t src_len,
                  std::size_t elemsize, const std::string& layout);
// Raise the Python exception for a failed frame call: CorruptDataError for
// bad encoded bytes, ValueError for bad arguments.
[[noreturn]] void raise_error(const nnc::Error& e, const char* func);

// A C-contiguous uint32 array of `rows` x 256 counts.
py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast> counts_array(
    py::handle obj, std::size_t rows, const char* func, const char* what);

}  // namespace nncodecs_py
