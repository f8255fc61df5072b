// The decoders' output allocator: new uint8 arrays of 1 MiB or more come
// from, and go back to, a small cache of blocks, so that a tensor decoded
// after another was dropped (a model streamed tensor by tensor through the
// numcodecs codecs) lands in memory the kernel has already mapped and
// zeroed: fresh pages cost the kernel's page clearing (docs/development.md
// has the measurements). A block (sizes are whole 2 MiB units) is reused for
// a request that wastes at most a quarter of the request plus one unit
// of it; at most kBlocks blocks and kMaxBytes in all are kept, the oldest
// let go first. Blocks held by live arrays are never in the cache.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace nncodecs_py {

namespace py = pybind11;

// A new uint8 array of `bytes`: from the output cache at 1 MiB or more (the
// block goes back to it with the array), else NumPy's own (its allocator
// asks for transparent huge pages on large arrays).
py::array_t<std::uint8_t> new_output(std::size_t bytes);

// output_cache_clear and output_cache_stats, on the module.
void def_output_cache(py::module_& m);

}  // namespace nncodecs_py
