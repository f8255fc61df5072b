// The GPU encoder's and decoder's host on the module: the CPU encoder's
// decisions from statistics (plan_chunks, settle_rans, the row shift's),
// rANS tables, a frame's head for chunks coded on the device, and a frame's
// index as arrays for the decoder's tables.
#include <string>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "nncodecs/coders.h"
#include "nncodecs/frame_steps.h"

namespace nncodecs_py {
namespace {


// A frame's header and chunk index as arrays (the GPU decoder's host lays
// out its kernels' tables from them with NumPy, without a Python object a
// chunk): modes, payload offsets and lengths, constant values, plane-major.
// With total_len: src is the first bytes of a frame that long (a frame on a
// device); None when they do not hold its header and index (ask again with
// more), the frame's error once they are the whole frame.
py::object frame_index(py::handle src, std::uint64_t max_decoded, std::size_t total_len) {
  Buffer in(src, false, "frame_index", "src");
  nnc::FrameInfo info;
  nnc::Error err;
  if (total_len && total_len < in.size())
    throw py::value_error("nncodecs._core.frame_index: a prefix longer than the frame");
  const bool prefix = total_len > in.size();
  if (nnc::frame_info(in.data(), in.size(), max_decoded, &info, &err,
                      prefix ? total_len : 0) != nnc::Status::ok) {
    if (prefix) return py::none();
    raise_error(err, "frame_index");
  }
  const auto count = static_cast<py::ssize_t>(info.chunks.size());
  py::array_t<std::uint8_t> modes(count), values(count);
  py::array_t<std::uint64_t> offsets(count), lengths(count);
  for (py::ssize_t i = 0; i < count; ++i) {
    const nnc::ChunkRef& r = info.chunks[static_cast<std::size_t>(i)];
    modes.mutable_data()[i] = static_cast<std::uint8_t>(r.mode);
    values.mutable_data()[i] = r.value;
    offsets.mutable_data()[i] = r.offset;
    lengths.mutable_data()[i] = r.length;
  }
  py::dict d;
  d["planes"] = info.planes;
  d["element"] = element_name(info.element);
  d["big_endian"] = info.big_endian;
  d["decoded_len"] = info.decoded_len;
  d["precision"] = info.precision;
  d["subblock_log2"] = info.subblock_log2;
  d["checksum"] = info.has_checksum ? py::object(py::int_(info.checksum)) : py::object(py::none());
  d["row_length"] = info.row_length;
  d["row_offsets_at"] = info.row_offsets_at;
  d["modes"] = modes;
  d["values"] = values;
  d["offsets"] = offsets;
  d["lengths"] = lengths;
  return d;
}

// CRC32C of the pieces joined in order, from each piece's CRC and length.
std::uint32_t crc32c_join(py::handle crcs, py::handle lengths) {
  auto c = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(crcs);
  auto l = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(lengths);
  if (!c || !l || c.size() != l.size())
    throw py::value_error("nncodecs._core.crc32c_join: one length a CRC");
  return nnc::crc32c_join(c.data(), l.data(), static_cast<std::size_t>(c.size()));
}

nnc::EncodeParams chunk_params(const std::string& coder, unsigned precision,
                               unsigned subblock_log2, unsigned min_gain_permille) {
  nnc::EncodeParams p;
  p.coder = parse_coder(coder);
  p.precision = precision;
  p.subblock_log2 = subblock_log2;
  p.min_gain_permille = min_gain_permille;
  return p;
}

// Per chunk: what plan_chunk decides (kind: 0 raw, 1 constant, 4 zstd, all
// final; 16 + 1 (try rANS) + 2 (try Huffman) to code) and a constant's byte.
py::tuple plan_chunks(py::handle counts, py::handle samples, const std::vector<std::uint64_t>& lengths,
                      const std::vector<std::int64_t>& zstd_lens, const std::string& coder,
                      unsigned precision, unsigned subblock_log2, unsigned min_gain_permille) {
  const std::size_t c = lengths.size();
  if (zstd_lens.size() != c)
    throw py::value_error("nncodecs._core.plan_chunks: one zstd length (or -1) a chunk");
  auto cnt = counts_array(counts, c, "plan_chunks", "counts");
  auto smp = counts_array(samples, c, "plan_chunks", "samples");
  const nnc::EncodeParams params = chunk_params(coder, precision, subblock_log2, min_gain_permille);
  std::string k(c, '\0'), v(c, '\0');
  for (std::size_t i = 0; i < c; ++i) {
    const std::size_t m = static_cast<std::size_t>(lengths[i]);
    const bool uniform = m >= nnc::kEstimateFrom && nnc::sample_is_raw(smp.data() + 256 * i);
    const bool has_zstd = zstd_lens[i] >= 0;
    const nnc::ChunkPlan plan = nnc::plan_chunk(uniform ? nullptr : cnt.data() + 256 * i, m,
                                                params, has_zstd,
                                                has_zstd ? std::uint32_t(zstd_lens[i]) : 0u);
    k[i] = static_cast<char>(plan.try_rans || plan.try_huff
                                 ? 16 + (plan.try_rans ? 1 : 0) + (plan.try_huff ? 2 : 0)
                                 : static_cast<int>(plan.mode));
    v[i] = static_cast<char>(plan.value);
  }
  return py::make_tuple(py::bytes(k), py::bytes(v));
}

// Per chunk coded with rANS only: the mode settle_chunk keeps (rans, raw or zstd).
py::bytes settle_rans(const std::vector<std::uint64_t>& lengths,
                      const std::vector<std::uint64_t>& rans_lens,
                      const std::vector<std::int64_t>& zstd_lens, const std::string& coder,
                      unsigned min_gain_permille) {
  const std::size_t c = lengths.size();
  if (rans_lens.size() != c || zstd_lens.size() != c)
    throw py::value_error("nncodecs._core.settle_rans: one rANS and zstd length a chunk");
  const nnc::EncodeParams params = chunk_params(coder, 11, 16, min_gain_permille);
  nnc::ChunkPlan plan;
  plan.try_rans = true;
  std::string out(c, '\0');
  for (std::size_t i = 0; i < c; ++i) {
    const bool has_zstd = zstd_lens[i] >= 0;
    out[i] = static_cast<char>(nnc::settle_chunk(plan, lengths[i], params, rans_lens[i],
                                                 ~std::size_t(0), has_zstd,
                                                 has_zstd ? std::uint32_t(zstd_lens[i]) : 0u));
  }
  return py::bytes(out);
}

// rANS tables of chunks from their counts: (normalised frequencies, rows x
// 256 uint32; the tables' bytes, concatenated; where each begins).
py::tuple rans_tables(py::handle counts, std::size_t rows, unsigned precision) {
  if (precision < 10 || precision > 12)
    throw py::value_error("nncodecs._core.rans_tables: precision must be 10..12");
  auto cnt = counts_array(counts, rows, "rans_tables", "counts");
  py::array_t<std::uint32_t> freqs(static_cast<py::ssize_t>(rows * 256));
  std::vector<std::uint8_t> tables;
  std::vector<std::uint64_t> at;
  for (std::size_t i = 0; i < rows; ++i) {
    int present = 0;
    for (int s = 0; s < 256; ++s) present += cnt.data()[256 * i + s] != 0;
    if (present < 2)
      throw py::value_error("nncodecs._core.rans_tables: a rANS chunk needs two symbols or more");
    nnc::rans_normalize(cnt.data() + 256 * i, precision, freqs.mutable_data() + 256 * i);
    at.push_back(tables.size());
    nnc::rans_write_table(freqs.data() + 256 * i, precision, &tables);
  }
  at.push_back(tables.size());
  return py::make_tuple(freqs, py::bytes(reinterpret_cast<const char*>(tables.data()), tables.size()),
                        at);
}

// A frame's header and index, for the GPU encoder: modes, values and
// lengths a (plane, chunk) in index order.
py::bytes frame_head(std::size_t src_len, unsigned planes, const std::string& coder,
                     unsigned precision, unsigned subblock_log2, bool checksum, std::uint32_t crc,
                     std::uint64_t row_length, py::bytes row_offsets, py::bytes modes,
                     py::bytes values, const std::vector<std::uint64_t>& lengths,
                     const std::string& element) {
  nnc::EncodeParams params = chunk_params(coder, precision, subblock_log2, 0);
  params.planes = planes;
  params.checksum = checksum;
  params.element = parse_element(element, "frame_head");
  const unsigned width = nnc::kElements[static_cast<unsigned>(params.element)].width;
  if (width != 0 && width != planes)
    throw py::value_error("nncodecs._core.frame_head: element type " + element + " is " +
                          std::to_string(width) + " bytes, not " + std::to_string(planes) +
                          " planes");
  nnc::Error err;
  if (planes < 1 || planes > 255 || src_len % planes)
    throw py::value_error("nncodecs._core.frame_head: bad plane count for the length");
  const std::string m = modes, v = values, offsets = row_offsets;
  const std::size_t n = src_len / planes;
  const std::size_t count = std::size_t(planes) * ((n + nnc::kChunkSymbols - 1) >> nnc::kChunkLog2);
  if (m.size() != count || v.size() != count || lengths.size() != count)
    throw py::value_error("nncodecs._core.frame_head: " + std::to_string(count) +
                          " chunks need as many modes, values and lengths");
  if (row_length && offsets.size() != (n + row_length - 1) / row_length)
    throw py::value_error("nncodecs._core.frame_head: one row offset a row");
  std::vector<nnc::ChunkEntry> entries(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto mode = static_cast<unsigned char>(m[i]);
    if (mode > 4) throw py::value_error("nncodecs._core.frame_head: unknown chunk mode");
    entries[i] = {static_cast<nnc::ChunkMode>(mode), static_cast<std::uint8_t>(v[i]), lengths[i]};
  }
  std::vector<std::uint8_t> head;
  nnc::frame_head(&head, params, src_len, crc, row_length,
                  reinterpret_cast<const std::uint8_t*>(offsets.data()),
                  row_length ? offsets.size() : 0, entries.data(), count);
  return py::bytes(reinterpret_cast<const char*>(head.data()), head.size());
}

}  // namespace

void def_gpu_host(py::module_& m) {
  m.def("frame_index", &frame_index, py::arg("src"), py::arg("max_decoded"),
        py::arg("total_len") = 0,
        "A frame's header and its chunk index as arrays (modes, values, offsets, lengths).");
  m.def("crc32c_join", &crc32c_join, py::arg("crcs"), py::arg("lengths"),
        "CRC32C of pieces joined in order, from their CRCs and lengths.");
  m.def(
      "layout_code",
      [](const std::string& name) { return static_cast<int>(parse_layout(name, "layout_code")); },
      py::arg("name"), "nnc::Layout's number for a layout name (the GPU kernels take it).");
  m.def(
      "element_types",
      [] {
        py::list out;
        for (const nnc::ElementInfo& e : nnc::kElements)
          out.append(py::make_tuple(e.name, e.width));
        return out;
      },
      "The element types a version 3 frame records, indexed by code: (name, width in bytes; "
      "0: any).");
  m.def("plan_chunks", &plan_chunks, py::arg("counts"), py::arg("samples"), py::arg("lengths"),
        py::arg("zstd_lens"), py::arg("coder"), py::arg("precision"), py::arg("subblock_log2"),
        py::arg("min_gain_permille"),
        "The CPU encoder's first decision for each chunk, from its histogram and its sample's "
        "(the GPU encoder's host): (kinds, values) as bytes.");
  m.def("settle_rans", &settle_rans, py::arg("lengths"), py::arg("rans_lens"),
        py::arg("zstd_lens"), py::arg("coder"), py::arg("min_gain_permille"),
        "Modes the CPU encoder keeps for chunks coded with rANS only, from the sizes.");
  m.def("rans_tables", &rans_tables, py::arg("counts"), py::arg("rows"), py::arg("precision"),
        "Normalised rANS frequencies and table bytes of chunks, from their counts.");
  m.def(
      "row_shift_pays",
      [](py::handle plain, py::handle shifted, std::size_t groups, std::uint64_t n,
         std::uint64_t row_length) {
        auto p = counts_array(plain, groups, "row_shift_pays", "plain");
        auto s = counts_array(shifted, groups, "row_shift_pays", "shifted");
        return nnc::row_shift_pays(p.data(), s.data(), groups, n, row_length);
      },
      py::arg("plain"), py::arg("shifted"), py::arg("groups"), py::arg("n"),
      py::arg("row_length"),
      "The row shift's decision (version 2) from per-group counts of sampled exponents.");
  m.def("frame_head", &frame_head, py::arg("src_len"), py::arg("planes"), py::arg("coder"),
        py::arg("precision"), py::arg("subblock_log2"), py::arg("checksum"), py::arg("crc"),
        py::arg("row_length"), py::arg("row_offsets"), py::arg("modes"), py::arg("values"),
        py::arg("lengths"), py::arg("element") = "bytes",
        "A frame's header and chunk index for chunks encoded elsewhere.");
  m.def(
      "row_shift_field",
      [](const std::string& layout, bool elements, std::uint64_t n,
         std::uint64_t row_length) -> py::object {
        unsigned shift = 0, bits = 0;
        if (!nnc::row_shift_field(parse_layout(layout, "row_shift_field"), elements, n,
                                  row_length, &shift, &bits))
          return py::none();
        return py::make_tuple(shift, bits);
      },
      py::arg("layout"), py::arg("elements"), py::arg("n"), py::arg("row_length"),
      "Whether the encoder tries a row shift here: (lowest bit, width) of the exponent field "
      "it shifts, or None.");
}

}  // namespace nncodecs_py
