// Argument adaptation for the binding (args.h).
#include "args.h"

namespace nncodecs_py {

// A float layout by the name of its element type (nnc::kElements), or "none".
nnc::Layout parse_layout(const std::string& name, const char* func) {
  if (name == "none") return nnc::Layout::none;
  std::string known = "none";
  for (const nnc::ElementInfo& e : nnc::kElements)
    if (e.layout != nnc::Layout::none) {
      if (name == e.name) return e.layout;
      known += std::string(", ") + e.name;
    }
  throw py::value_error(std::string("nncodecs._core.") + func + ": unknown layout '" + name +
                        "', expected one of " + known);
}

nnc::Element parse_element(const std::string& name, const char* func) {
  for (unsigned code = 0; code < nnc::kElementCount; ++code)
    if (name == nnc::kElements[code].name) return static_cast<nnc::Element>(code);
  std::string known;
  for (const nnc::ElementInfo& e : nnc::kElements) known += std::string(known.empty() ? "" : ", ") + e.name;
  throw py::value_error(std::string("nncodecs._core.") + func + ": unknown element type '" +
                        name + "', expected one of " + known);
}

const char* element_name(nnc::Element e) { return nnc::kElements[static_cast<unsigned>(e)].name; }

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

void raise_error(const nnc::Error& e, const char* func) {
  std::string msg = std::string("nncodecs._core.") + func + ": " + e.message;
  if (e.status == nnc::Status::corrupt) {
    py::object cls = py::module_::import("nncodecs.errors").attr("CorruptDataError");
    PyErr_SetString(cls.ptr(), msg.c_str());
    throw py::error_already_set();
  }
  throw py::value_error(msg);
}

nnc::Coder parse_coder(const std::string& name) {
  if (name == "rans") return nnc::Coder::rans;
  if (name == "huffman") return nnc::Coder::huffman;
  if (name == "auto") return nnc::Coder::automatic;
  throw py::value_error("nncodecs._core: unknown coder '" + name +
                        "', expected rans, huffman or auto");
}

const char* mode_name(nnc::ChunkMode m) {
  switch (m) {
    case nnc::ChunkMode::raw: return "raw";
    case nnc::ChunkMode::constant: return "constant";
    case nnc::ChunkMode::rans: return "rans";
    case nnc::ChunkMode::huffman: return "huffman";
    case nnc::ChunkMode::zstd: return "zstd";
  }
  return "?";
}


py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast> counts_array(
    py::handle obj, std::size_t rows, const char* func, const char* what) {
  auto a = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a || static_cast<std::size_t>(a.size()) != rows * 256)
    throw py::value_error(std::string("nncodecs._core.") + func + ": " + what + " must hold " +
                          std::to_string(rows) + " x 256 counts");
  return a;
}

}  // namespace nncodecs_py
