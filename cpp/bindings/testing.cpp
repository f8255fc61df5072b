// Test toggles on the module: force a kernel variant, list the variants.
#include <string>

#include "args.h"
#include "bindings.h"
#include "nncodecs/coders.h"

namespace nncodecs_py {

void def_testing(py::module_& m) {
  m.def(
      "_set_rans_variant",
      [](const std::string& name) {
        const int v = name == "auto" ? 0 : name == "scalar" ? 1 : name == "avx2" ? 2
                      : name == "avx512" ? 3 : -1;
        if (!nnc::set_rans_variant(v))
          throw py::value_error("rANS variant '" + name + "' is unknown or not available here");
      },
      py::arg("name"), "Testing: force the SIMD variant of the rANS encoder and decoder and of the decoder's "
        "plane merge (auto, scalar, avx2, avx512).");
  m.def(
      "rans_variants",
      [] {
        py::list out;
        out.append("scalar");
        for (const char* name : {"avx2", "avx512"})
          if (nnc::set_rans_variant(std::string(name) == "avx2" ? 2 : 3)) out.append(name);
        nnc::set_rans_variant(0);
        return out;
      },
      "rANS variants (encoder and decoder) this CPU runs.");
  m.def("_set_crc_narrow", &nnc::crc32c_set_narrow, py::arg("narrow"),
        "Testing: True keeps CRC32C to the crc32-instruction kernel (no VPCLMULQDQ folding).");
}

}  // namespace nncodecs_py
