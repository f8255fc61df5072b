// The format's constants on the module, so that Python reads them instead
// of restating them: chunk size, chunk modes, float layouts, element types,
// the whole-input zstd kind, and the GPU kernels' struct layouts.
#include <string>

#include "args.h"
#include "bindings.h"
#include "nncodecs/gpu_structs.h"

namespace nncodecs_py {
namespace {

// A GPU struct's size and its fields' offsets: (size, {field: offset}).
template <class T>
py::tuple struct_layout(std::initializer_list<std::pair<const char*, std::size_t>> fields) {
  py::dict offsets;
  for (const auto& [name, at] : fields) offsets[name] = at;
  return py::make_tuple(sizeof(T), offsets);
}

#define NNC_FIELD(T, f) {#f, offsetof(T, f)}

py::dict gpu_structs() {
  using namespace nnc::gpu;
  py::dict d;
  d["RansChunk"] = struct_layout<RansChunk>(
      {NNC_FIELD(RansChunk, payload), NNC_FIELD(RansChunk, out), NNC_FIELD(RansChunk, first),
       NNC_FIELD(RansChunk, length), NNC_FIELD(RansChunk, symbols),
       NNC_FIELD(RansChunk, shifted), NNC_FIELD(RansChunk, desc)});
  d["PlaneSource"] = struct_layout<PlaneSource>(
      {NNC_FIELD(PlaneSource, offset), NNC_FIELD(PlaneSource, kind),
       NNC_FIELD(PlaneSource, value)});
  d["FrameDesc"] = struct_layout<FrameDesc>(
      {NNC_FIELD(FrameDesc, frame), NNC_FIELD(FrameDesc, out), NNC_FIELD(FrameDesc, planes),
       NNC_FIELD(FrameDesc, external), NNC_FIELD(FrameDesc, rows),
       NNC_FIELD(FrameDesc, row_length), NNC_FIELD(FrameDesc, n), NNC_FIELD(FrameDesc, k),
       NNC_FIELD(FrameDesc, chunks), NNC_FIELD(FrameDesc, layout),
       NNC_FIELD(FrameDesc, sources), NNC_FIELD(FrameDesc, precision),
       NNC_FIELD(FrameDesc, subblock_log2), NNC_FIELD(FrameDesc, to_planes),
       NNC_FIELD(FrameDesc, pad)});
  d["MergeTask"] =
      struct_layout<MergeTask>({NNC_FIELD(MergeTask, desc), NNC_FIELD(MergeTask, chunk)});
  d["CrcTask"] = struct_layout<CrcTask>(
      {NNC_FIELD(CrcTask, desc), NNC_FIELD(CrcTask, plane), NNC_FIELD(CrcTask, chunk),
       NNC_FIELD(CrcTask, from_elements)});
  d["EncodeChunk"] = struct_layout<EncodeChunk>(
      {NNC_FIELD(EncodeChunk, input), NNC_FIELD(EncodeChunk, words),
       NNC_FIELD(EncodeChunk, symbols), NNC_FIELD(EncodeChunk, first_sub),
       NNC_FIELD(EncodeChunk, freqs), NNC_FIELD(EncodeChunk, pad)});
  d["FramePiece"] = struct_layout<FramePiece>(
      {NNC_FIELD(FramePiece, dst), NNC_FIELD(FramePiece, src), NNC_FIELD(FramePiece, words),
       NNC_FIELD(FramePiece, length), NNC_FIELD(FramePiece, kind),
       NNC_FIELD(FramePiece, first_sub), NNC_FIELD(FramePiece, subblocks)});
  d["EncodeDesc"] = struct_layout<EncodeDesc>(
      {NNC_FIELD(EncodeDesc, input), NNC_FIELD(EncodeDesc, planes), NNC_FIELD(EncodeDesc, rows),
       NNC_FIELD(EncodeDesc, row_length), NNC_FIELD(EncodeDesc, n), NNC_FIELD(EncodeDesc, k),
       NNC_FIELD(EncodeDesc, layout), NNC_FIELD(EncodeDesc, elements),
       NNC_FIELD(EncodeDesc, shift), NNC_FIELD(EncodeDesc, bits), NNC_FIELD(EncodeDesc, pad)});
  d["EncodeTask"] = struct_layout<EncodeTask>(
      {NNC_FIELD(EncodeTask, desc), NNC_FIELD(EncodeTask, plane), NNC_FIELD(EncodeTask, index),
       NNC_FIELD(EncodeTask, pad)});
  return d;
}

#undef NNC_FIELD

}  // namespace

void def_constants(py::module_& m) {
  m.attr("CHUNK_LOG2") = nnc::kChunkLog2;
  m.attr("FRAME_VERSION") = nnc::kFrameVersionTyped;
  py::dict modes;
  for (nnc::ChunkMode mode : {nnc::ChunkMode::raw, nnc::ChunkMode::constant, nnc::ChunkMode::rans,
                              nnc::ChunkMode::huffman, nnc::ChunkMode::zstd})
    modes[mode_name(mode)] = static_cast<int>(mode);
  m.attr("CHUNK_MODES") = modes;
  py::dict layouts;  // name: (nnc::Layout code, width in bytes, mantissa bits)
  layouts["none"] = py::make_tuple(0, 0, 0);
  for (const nnc::ElementInfo& e : nnc::kElements)
    if (e.layout != nnc::Layout::none)
      layouts[e.name] = py::make_tuple(static_cast<int>(e.layout), nnc::layout_width(e.layout),
                                       nnc::layout_mantissa_bits(e.layout));
  m.attr("LAYOUTS") = layouts;
  py::list elements;  // by code: (name, width in bytes (0: any), float layout name)
  for (const nnc::ElementInfo& e : nnc::kElements) {
    const char* layout = "none";
    for (const nnc::ElementInfo& f : nnc::kElements)
      if (e.layout != nnc::Layout::none && f.layout == e.layout) layout = f.name;
    elements.append(py::make_tuple(e.name, e.width, layout));
  }
  m.attr("ELEMENT_TYPES") = py::tuple(elements);
  m.attr("WHOLE_MAGIC") = py::bytes(reinterpret_cast<const char*>(nnc::kWholeMagic), 4);
  m.attr("WHOLE_TYPED_MAGIC") = py::bytes(reinterpret_cast<const char*>(nnc::kWholeTypedMagic), 4);
  m.attr("WHOLE_ZSTD_LIMIT") = nnc::kWholeZstdLimit;
  m.attr("TINY_BYTES") = nnc::kTinyBytes;
  m.attr("GPU_STRUCTS") = gpu_structs();
}

}  // namespace nncodecs_py
