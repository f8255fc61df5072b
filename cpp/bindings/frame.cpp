// The frame API on the module: encode and decode in one call each (zstd
// inside), the header of either kind, and the steps the GPU host and tests
// take one by one (frame_encode with zstd candidates or its zstd probe,
// frame_info, zstd_chunks).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "nncodecs/frame_steps.h"
#include "output_cache.h"

namespace nncodecs_py {
namespace {

// The pieces of a zstd plan as a list: plane bytes (bytes) or None.
py::list plan_list(const std::vector<std::vector<std::uint8_t>>& pieces,
                   const std::vector<bool>& wanted) {
  py::list out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (wanted[i])
      out.append(py::bytes(reinterpret_cast<const char*>(pieces[i].data()), pieces[i].size()));
    else
      out.append(py::none());
  }
  return out;
}

nnc::EncodeParams encode_params(const char* func, unsigned planes, const std::string& coder,
                                unsigned precision, unsigned subblock_log2, bool checksum,
                                const std::string& layout, bool elements, int threads,
                                unsigned min_gain_permille, std::uint64_t row_length,
                                const std::string& element) {
  nnc::EncodeParams params;
  params.element = parse_element(element, func);
  params.coder = parse_coder(coder);
  params.planes = planes;
  params.precision = precision;
  params.subblock_log2 = subblock_log2;
  params.checksum = checksum;
  params.layout = parse_layout(layout, func);
  params.elements = elements;
  params.threads = threads;
  params.min_gain_permille = min_gain_permille;
  params.row_length = row_length;
  return params;
}

// Encode straight into a new bytes object of frame_bound, then shrink it in
// place (`out` owns the only reference until then, as _PyBytes_Resize
// needs). `run` encodes into (dst, cap, &written, &err) without the GIL;
// None when it writes nothing (frame_encode's zstd plan).
template <class Run>
py::object encode_into_bytes(std::size_t src_len, unsigned planes, const char* func, Run run) {
  const std::size_t bound = nnc::frame_bound(src_len, planes ? planes : 1);
  PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(bound));
  if (raw == nullptr) throw py::error_already_set();
  py::bytes out = py::reinterpret_steal<py::bytes>(raw);
  nnc::Error err;
  std::size_t written = 0;
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = run(PyBytes_AS_STRING(raw), bound, &written, &err);
  }
  if (st != nnc::Status::ok) raise_error(err, func);
  if (written == 0) return py::none();  // every frame has a header
  if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(written)) != 0) {
    out.release();
    throw py::error_already_set();
  }
  out.release();
  return py::reinterpret_steal<py::bytes>(raw);
}

py::bytes encode(py::handle src, unsigned planes, const std::string& coder, unsigned precision,
                 unsigned subblock_log2, bool checksum, const std::string& layout, bool elements,
                 int threads, unsigned min_gain_permille, std::uint64_t row_length,
                 const std::string& element, int zstd_level, bool big_endian) {
  nnc::EncodeParams params =
      encode_params("encode", planes, coder, precision, subblock_log2, checksum, layout, elements,
                    threads, min_gain_permille, row_length, element);
  params.zstd_level = zstd_level;
  params.big_endian = big_endian;
  Buffer in(src, false, "encode", "src");
  return encode_into_bytes(in.size(), planes, "encode",
                           [&](void* dst, std::size_t cap, std::size_t* written, nnc::Error* err) {
                             return nnc::encode(dst, cap, written, in.data(), in.size(), params,
                                                err);
                           });
}

py::object frame_encode(py::handle src, unsigned planes, const std::string& coder,
                        unsigned precision, unsigned subblock_log2, bool checksum,
                        const std::string& layout, bool elements, int threads, py::object zstd,
                        unsigned min_gain_permille, bool probe_zstd, std::uint64_t row_length,
                        const std::string& element) {
  const nnc::EncodeParams params =
      encode_params("frame_encode", planes, coder, precision, subblock_log2, checksum, layout,
                    elements, threads, min_gain_permille, row_length, element);
  Buffer in(src, false, "frame_encode", "src");
  // zstd candidates: a list with one bytes object (or None) per (plane, chunk).
  std::vector<const std::uint8_t*> zdata;
  std::vector<std::uint32_t> zsize;
  std::vector<std::unique_ptr<Buffer>> held;
  nnc::External ext;
  if (!zstd.is_none()) {
    py::list items = zstd.cast<py::list>();
    const std::size_t n = planes ? in.size() / planes : 0;
    const std::size_t expect = std::size_t(planes) * ((n + nnc::kChunkSymbols - 1) >> nnc::kChunkLog2);
    if (items.size() != expect)
      throw py::value_error("nncodecs._core.frame_encode: " + std::to_string(items.size()) +
                            " zstd candidates for " + std::to_string(expect) + " chunks");
    for (py::handle item : items) {
      if (item.is_none()) {
        zdata.push_back(nullptr);
        zsize.push_back(0);
        continue;
      }
      held.emplace_back(new Buffer(item, false, "frame_encode", "zstd candidate"));
      zdata.push_back(static_cast<const std::uint8_t*>(held.back()->data()));
      zsize.push_back(static_cast<std::uint32_t>(held.back()->size()));
    }
    ext.data = zdata.data();
    ext.size = zsize.data();
  }
  nnc::ZstdProbe probe;
  py::object frame = encode_into_bytes(
      in.size(), planes, "frame_encode",
      [&](void* dst, std::size_t cap, std::size_t* written, nnc::Error* err) {
        return nnc::frame_encode(dst, cap, written, in.data(), in.size(), params, ext, err,
                                 probe_zstd ? &probe : nullptr);
      });
  if (probe.any) return plan_list(probe.pieces, probe.wanted);
  return frame;
}

// A parsed frame's header and chunk index as a dict.
py::dict info_dict(const nnc::FrameInfo& info) {
  py::dict d;
  d["version"] = info.version;
  d["element"] = element_name(info.element);
  d["big_endian"] = info.big_endian;
  d["coder"] = info.coder == nnc::Coder::rans      ? "rans"
               : info.coder == nnc::Coder::huffman ? "huffman"
                                                   : "auto";
  d["planes"] = info.planes;
  d["precision"] = info.precision;
  d["subblock_log2"] = info.subblock_log2;
  d["checksum"] = info.has_checksum ? py::object(py::int_(info.checksum)) : py::object(py::none());
  d["decoded_len"] = info.decoded_len;
  d["header_len"] = info.header_len;
  d["row_length"] = info.row_length;
  d["row_offsets_at"] = info.row_offsets_at;
  py::list chunks;
  for (const nnc::ChunkRef& r : info.chunks)
    chunks.append(py::make_tuple(r.plane, r.index, mode_name(r.mode), r.offset, r.length,
                                 r.symbols));
  d["chunks"] = chunks;
  py::list values;  // the byte of each constant chunk (0 for the others)
  for (const nnc::ChunkRef& r : info.chunks) values.append(r.value);
  d["values"] = values;
  return d;
}

py::dict frame_info(py::handle src, std::uint64_t max_decoded) {
  Buffer in(src, false, "frame_info", "src");
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(in.data(), in.size(), max_decoded, &info, &err) != nnc::Status::ok)
    raise_error(err, "frame_info");
  return info_dict(info);
}

// Either kind's header, parsed and checked once (against max_decoded and
// the element type the caller decodes to: bytes for any).
nnc::Header parse_header(const Buffer& in, std::uint64_t max_decoded, nnc::Element expected,
                         const char* func) {
  nnc::Header h;
  nnc::Error err;
  if (nnc::read_header(in.data(), in.size(), max_decoded, &h, &err) != nnc::Status::ok ||
      nnc::check_element(h.info, expected, &err) != nnc::Status::ok)
    raise_error(err, func);
  return h;
}

py::dict header(py::handle src, std::uint64_t max_decoded) {
  Buffer in(src, false, "header", "src");
  const nnc::Header h = parse_header(in, max_decoded, nnc::Element::bytes, "header");
  py::dict d;
  if (h.whole) {
    d["kind"] = "zstd";
    d["decoded_len"] = h.info.decoded_len;
    d["element"] = element_name(h.info.element);
    d["big_endian"] = h.info.big_endian;
    d["chunks"] = py::list();
    return d;
  }
  d["kind"] = "chunked";
  for (auto item : info_dict(h.info)) d[item.first] = item.second;
  return d;
}

// The element type and byte order a frame records, its header checked (no
// chunk list built: cheap on frames of thousands of chunks).
py::tuple element_of(py::handle src, std::uint64_t max_decoded) {
  Buffer in(src, false, "element_of", "src");
  const nnc::Header h = parse_header(in, max_decoded, nnc::Element::bytes, "element_of");
  return py::make_tuple(element_name(h.info.element), h.info.big_endian);
}

py::object decode(py::handle src, std::uint64_t max_decoded, const std::string& layout,
                  bool elements, unsigned planes, int threads, const std::string& element,
                  py::object out, bool any_order) {
  const nnc::Layout l = parse_layout(layout, "decode");
  const nnc::Element expected = parse_element(element, "decode");
  Buffer in(src, false, "decode", "src");
  std::unique_ptr<Buffer> target;
  if (!out.is_none()) {
    target.reset(new Buffer(out, true, "decode", "out"));
    max_decoded = std::min<std::uint64_t>(max_decoded, target->size());
  }
  const nnc::Header h = parse_header(in, max_decoded, expected, "decode");
  if (h.info.big_endian && !elements && !any_order)
    throw py::value_error(std::string("nncodecs._core.decode: the frame holds big-endian ") +
                          element_name(h.info.element) +
                          " elements: it decodes to elements only (the weights codec), not "
                          "to planes");
  const std::size_t len = static_cast<std::size_t>(h.info.decoded_len);
  py::object result = out;
  std::uint8_t* dst;
  if (target) {
    if (target->size() != len) {
      nnc::Error e;
      e.status = nnc::Status::corrupt;
      std::snprintf(e.message, sizeof(e.message), "frame decodes to %zu bytes, the output holds %zu",
                    len, target->size());
      raise_error(e, "decode");
    }
    dst = static_cast<std::uint8_t*>(target->data());
  } else {
    py::array_t<std::uint8_t> a = new_output(len);
    dst = a.mutable_data();
    result = a;
  }
  nnc::Error err;
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = nnc::decode(dst, len, in.data(), in.size(), h, l, elements, planes, threads, &err);
  }
  if (st != nnc::Status::ok) raise_error(err, "decode");
  return result;
}

// zstd of pieces (bytes, or None: none) as frame chunks hold them, for the
// GPU encoder's host.
py::list zstd_chunks(const py::list& pieces, int level, int threads) {
  std::vector<std::unique_ptr<Buffer>> held;
  std::vector<const std::uint8_t*> src;
  std::vector<std::size_t> lens;
  for (py::handle item : pieces) {
    if (item.is_none()) {
      src.push_back(nullptr);
      lens.push_back(0);
      continue;
    }
    held.emplace_back(new Buffer(item, false, "zstd_chunks", "piece"));
    src.push_back(static_cast<const std::uint8_t*>(held.back()->data()));
    lens.push_back(held.back()->size());
  }
  std::vector<std::vector<std::uint8_t>> out;
  nnc::Error err;
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = nnc::zstd_chunks(src.data(), lens.data(), src.size(), level, threads, &out, &err);
  }
  if (st != nnc::Status::ok) raise_error(err, "zstd_chunks");
  py::list result;
  for (std::size_t i = 0; i < out.size(); ++i)
    result.append(src[i] ? py::object(py::bytes(reinterpret_cast<const char*>(out[i].data()),
                                                out[i].size()))
                         : py::object(py::none()));
  return result;
}

}  // namespace

void def_frame(py::module_& m) {
  m.def("encode", &encode, py::arg("src"), py::arg("planes") = 1, py::arg("coder") = "rans",
        py::arg("precision") = 11, py::arg("subblock_log2") = 16, py::arg("checksum") = true,
        py::arg("layout") = "none", py::arg("elements") = false, py::arg("threads") = 0,
        py::arg("min_gain_permille") = 0, py::arg("row_length") = 0,
        py::arg("element") = "bytes", py::arg("zstd_level") = 3, py::arg("big_endian") = false,
        "Encode planes (or elements, with the split fused in) in one call: a frame, or for "
        "coder auto the smallest of its zstd trials (zstd chunks, the whole-input kind) at "
        "zstd_level. big_endian (elements of 2+ bytes, given little-endian): record that they "
        "were big-endian, so that decoding swaps them back (a version 4 frame).");
  m.def("header", &header, py::arg("src"), py::arg("max_decoded"),
        "The checked header of either kind: kind 'chunked' (frame_info's fields) or 'zstd' "
        "(the whole-input kind: decoded_len, element, big_endian).");
  m.def("element_of", &element_of, py::arg("src"), py::arg("max_decoded"),
        "(element type, big_endian) a frame of either kind records, its header checked.");
  m.def("decode", &decode, py::arg("src"), py::arg("max_decoded"), py::arg("layout") = "none",
        py::arg("elements") = false, py::arg("planes") = 0, py::arg("threads") = 0,
        py::arg("element") = "bytes", py::arg("out") = py::none(), py::arg("any_order") = false,
        "Decode either kind in one call (its header parsed once) into `out` (a writable "
        "C-contiguous buffer of the decoded size) or a new uint8 array. planes: the element "
        "size of a whole-input zstd frame decoded as elements. A big-endian frame decodes to "
        "elements only, unless any_order (the GPU host, which merges its planes itself).");
  m.def("zstd_chunks", &zstd_chunks, py::arg("pieces"), py::arg("level"), py::arg("threads") = 0,
        "zstd of each piece (None: none) as frame chunks hold it.");
  m.def("frame_bound", &nnc::frame_bound, py::arg("src_len"), py::arg("planes"),
        "Worst-case frame size.");
  m.def("frame_encode", &frame_encode, py::arg("src"), py::arg("planes") = 1,
        py::arg("coder") = "rans", py::arg("precision") = 11, py::arg("subblock_log2") = 16,
        py::arg("checksum") = true, py::arg("layout") = "none", py::arg("elements") = false,
        py::arg("threads") = 0, py::arg("zstd") = py::none(), py::arg("min_gain_permille") = 0,
        py::arg("probe_zstd") = false, py::arg("row_length") = 0, py::arg("element") = "bytes",
        "Encode planes (or elements, with the split fused in) into a frame. With probe_zstd "
        "(coder auto, no candidates): the zstd plan instead, when any chunk is worth a trial. "
        "row_length (elements with a float layout): elements per row, for the row shift of a "
        "version 3 frame with a row section where it pays; 0 for none. element: the element "
        "type the frame records (bytes: none).");
  m.def("frame_info", &frame_info, py::arg("src"), py::arg("max_decoded"),
        "Parse and check a frame's header and chunk index.");
}

}  // namespace nncodecs_py
