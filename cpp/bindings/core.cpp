// pybind11 binding of the kernels: nncodecs._core. Checks buffers, releases
// the GIL around every kernel and turns a Status into a Python exception.
// The only C++ file that knows Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../src/coders.h"
#include "nncodecs/entropy.h"
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

// An element type by its name (nnc::kElements, the one table).
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

// Raise the Python exception for a failed frame call: CorruptDataError for
// bad encoded bytes, ValueError for bad arguments.
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

py::object frame_encode(py::handle src, unsigned planes, const std::string& coder,
                        unsigned precision, unsigned subblock_log2, bool checksum,
                        const std::string& layout, bool elements, int threads, py::object zstd,
                        unsigned min_gain_permille, bool probe_zstd, std::uint64_t row_length,
                        const std::string& element) {
  nnc::EncodeParams params;
  params.element = parse_element(element, "frame_encode");
  params.coder = parse_coder(coder);
  params.planes = planes;
  params.precision = precision;
  params.subblock_log2 = subblock_log2;
  params.checksum = checksum;
  params.layout = parse_layout(layout, "frame_encode");
  params.elements = elements;
  params.threads = threads;
  params.min_gain_permille = min_gain_permille;
  params.row_length = row_length;
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
  const std::size_t bound = nnc::frame_bound(in.size(), planes ? planes : 1);
  // Encode straight into a new bytes object, then shrink it in place
  // (`out` owns the only reference until then, as _PyBytes_Resize needs).
  PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(bound));
  if (raw == nullptr) throw py::error_already_set();
  py::bytes out = py::reinterpret_steal<py::bytes>(raw);
  nnc::Error err;
  std::size_t written = 0;
  nnc::Status st;
  nnc::ZstdProbe probe;
  {
    py::gil_scoped_release release;
    st = nnc::frame_encode(PyBytes_AS_STRING(raw), bound, &written, in.data(), in.size(), params,
                           ext, &err, probe_zstd ? &probe : nullptr);
  }
  if (st != nnc::Status::ok) raise_error(err, "frame_encode");
  if (probe.any) return plan_list(probe.pieces, probe.wanted);
  if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(written)) != 0) {
    out.release();
    throw py::error_already_set();
  }
  out.release();
  return py::reinterpret_steal<py::bytes>(raw);
}

py::dict frame_info(py::handle src, std::uint64_t max_decoded) {
  Buffer in(src, false, "frame_info", "src");
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(in.data(), in.size(), max_decoded, &info, &err) != nnc::Status::ok)
    raise_error(err, "frame_info");
  py::dict d;
  d["version"] = info.version;
  d["element"] = element_name(info.element);
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

// The little a decoder needs before it allocates: (decoded length, planes,
// number of zstd chunks, element type), with the same checks as frame_info,
// and the element type checked against `element` (bytes: any).
py::tuple frame_summary(py::handle src, std::uint64_t max_decoded, const std::string& element) {
  const nnc::Element expected = parse_element(element, "frame_summary");
  Buffer in(src, false, "frame_summary", "src");
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(in.data(), in.size(), max_decoded, &info, &err) != nnc::Status::ok ||
      nnc::check_element(info, expected, &err) != nnc::Status::ok)
    raise_error(err, "frame_summary");
  std::size_t zstd = 0;
  for (const nnc::ChunkRef& r : info.chunks) zstd += r.mode == nnc::ChunkMode::zstd;
  return py::make_tuple(info.decoded_len, info.planes, zstd, element_name(info.element));
}

void frame_decode(py::handle dst, py::handle src, std::uint64_t max_decoded,
                  const std::string& layout, bool elements, py::object zstd_decoded, int threads) {
  nnc::Layout l = parse_layout(layout, "frame_decode");
  Buffer out(dst, true, "frame_decode", "dst"), in(src, false, "frame_decode", "src");
  std::unique_ptr<Buffer> ext;
  if (!zstd_decoded.is_none()) ext.reset(new Buffer(zstd_decoded, false, "frame_decode", "zstd"));
  nnc::Error err;
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = nnc::frame_decode(out.data(), out.size(), in.data(), in.size(), max_decoded, l, elements,
                           ext ? static_cast<const std::uint8_t*>(ext->data()) : nullptr,
                           ext ? ext->size() : 0, threads, &err);
  }
  if (st != nnc::Status::ok) raise_error(err, "frame_decode");
}

// Decode into a new uint8 array sized from the header: one call for the
// common case (no zstd chunks, which Python decodes first); None when the
// frame has zstd chunks. Saves a summary call and an allocation round trip
// per tensor, which is most of a bias's decoding time. NumPy allocates it:
// its allocator asks for transparent huge pages on large arrays, which halves
// the time of a decode into fresh memory here (faulting in 4 KiB pages ran
// at about 3 GB/s).
// Outputs of frame_decode_new of 1 MiB or more come from, and go back to, a
// small cache of blocks: a tensor decoded after another was dropped (a model
// streamed tensor by tensor through the numcodecs codecs) then lands in
// memory the kernel has already mapped and zeroed. Fresh pages cost the
// kernel's page clearing, about 30% of the time to decode a 1 GiB model here
// (outputs of 32 MiB and more always get fresh pages from glibc). A block
// (sizes are whole huge pages) is reused for a request that wastes at most a
// quarter of the request plus one huge page of it; at most kBlocks blocks and
// kMaxBytes in all are kept, the oldest let go first. Blocks held by live
// arrays are never in the cache; output_cache_clear() frees what it holds.
class OutputCache {
 public:
  static constexpr std::size_t kMinBytes = std::size_t(1) << 20;
  static constexpr std::size_t kMaxBytes = std::size_t(128) << 20;
  static constexpr std::size_t kBlocks = 4;
  static constexpr std::size_t kAlign = std::size_t(1) << 21;  // a huge page

  struct Block {
    void* data;
    std::size_t size;
  };

  // A block of at least `bytes` (a cached one when one fits), or null.
  Block take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::size_t best = blocks_.size();
      for (std::size_t i = 0; i < blocks_.size(); ++i)
        if (blocks_[i].size >= bytes && blocks_[i].size <= bytes + bytes / 4 + kAlign &&
            (best == blocks_.size() || blocks_[i].size < blocks_[best].size))
          best = i;
      if (best != blocks_.size()) {
        const Block b = blocks_[best];
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
        held_ -= b.size;
        return b;
      }
    }
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    return {std::aligned_alloc(kAlign, size), size};
  }

  // A block whose array is gone: kept when it is large enough and fits.
  void give(Block b) {
    std::vector<Block> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (b.size < kMinBytes || b.size > kMaxBytes) {
        drop.push_back(b);
      } else {
        while (!blocks_.empty() && (blocks_.size() >= kBlocks || held_ + b.size > kMaxBytes)) {
          drop.push_back(blocks_.front());
          held_ -= blocks_.front().size;
          blocks_.erase(blocks_.begin());
        }
        blocks_.push_back(b);
        held_ += b.size;
      }
    }
    for (const Block& d : drop) std::free(d.data);
  }

  void clear() {
    std::vector<Block> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop.swap(blocks_);
      held_ = 0;
    }
    for (const Block& d : drop) std::free(d.data);
  }

  py::tuple stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return py::make_tuple(blocks_.size(), held_);
  }

 private:
  std::mutex mu_;
  std::vector<Block> blocks_;  // oldest first
  std::size_t held_ = 0;
};

OutputCache& output_cache() {
  static OutputCache* cache = new OutputCache();  // outlives every array (never destroyed)
  return *cache;
}

// A new uint8 array of `bytes`: from the output cache at 1 MiB or more (the
// block goes back to it with the array), else NumPy's own.
py::array_t<std::uint8_t> new_output(std::size_t bytes) {
  if (bytes < OutputCache::kMinBytes) return py::array_t<std::uint8_t>(static_cast<py::ssize_t>(bytes));
  OutputCache::Block b = output_cache().take(bytes);
  if (b.data == nullptr) throw std::bad_alloc();
  auto* owned = new OutputCache::Block(b);
  py::capsule owner(owned, [](void* p) {
    auto* block = static_cast<OutputCache::Block*>(p);
    output_cache().give(*block);
    delete block;
  });
  return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(bytes)}, {1},
                                   static_cast<std::uint8_t*>(b.data), owner);
}

py::object frame_decode_new(py::handle src, std::uint64_t max_decoded, const std::string& layout,
                            bool elements, int threads, const std::string& element) {
  nnc::Layout l = parse_layout(layout, "frame_decode_new");
  const nnc::Element expected = parse_element(element, "frame_decode_new");
  Buffer in(src, false, "frame_decode_new", "src");
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(in.data(), in.size(), max_decoded, &info, &err) != nnc::Status::ok ||
      nnc::check_element(info, expected, &err) != nnc::Status::ok)
    raise_error(err, "frame_decode_new");
  for (const nnc::ChunkRef& r : info.chunks)
    if (r.mode == nnc::ChunkMode::zstd) return py::none();
  py::array_t<std::uint8_t> out = new_output(static_cast<std::size_t>(info.decoded_len));
  std::uint8_t* dst = out.mutable_data();
  nnc::Status st;
  {
    py::gil_scoped_release release;
    st = nnc::frame_decode(dst, info.decoded_len, in.data(), in.size(), max_decoded, l, elements,
                           nullptr, 0, threads, &err);
  }
  if (st != nnc::Status::ok) raise_error(err, "frame_decode_new");
  return out;
}

// ---- the GPU encoder's host: the CPU encoder's decisions, from statistics ----

// A C-contiguous uint32 array of `rows` x 256 counts.
py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast> counts_array(
    py::handle obj, std::size_t rows, const char* func, const char* what) {
  auto a = py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a || static_cast<std::size_t>(a.size()) != rows * 256)
    throw py::value_error(std::string("nncodecs._core.") + func + ": " + what + " must hold " +
                          std::to_string(rows) + " x 256 counts");
  return a;
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
    nnc::detail::rans_normalize(cnt.data() + 256 * i, precision, freqs.mutable_data() + 256 * i);
    at.push_back(tables.size());
    nnc::detail::rans_write_table(freqs.data() + 256 * i, precision, &tables);
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
  m.def("frame_index", &frame_index, py::arg("src"), py::arg("max_decoded"),
        py::arg("total_len") = 0,
        "A frame's header and its chunk index as arrays (modes, values, offsets, lengths).");
  m.def("crc32c_join", &crc32c_join, py::arg("crcs"), py::arg("lengths"),
        "CRC32C of pieces joined in order, from their CRCs and lengths.");
  m.def("frame_summary", &frame_summary, py::arg("src"), py::arg("max_decoded"),
        py::arg("element") = "bytes",
        "(decoded length, planes, zstd chunks, element type) of a checked frame; "
        "CorruptDataError when it states an element type other than `element` (bytes: any).");
  m.def("frame_decode_new", &frame_decode_new, py::arg("src"), py::arg("max_decoded"),
        py::arg("layout") = "none", py::arg("elements") = false, py::arg("threads") = 0,
        py::arg("element") = "bytes",
        "Decode a frame into a new uint8 array; None when it has zstd chunks (decode those "
        "first, then frame_decode).");
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
  m.def(
      "output_cache_clear", [] { output_cache().clear(); },
      "Free the blocks the output cache holds (outputs of frame_decode_new of 1 MiB or more "
      "go back to it when their arrays are gone).");
  m.def(
      "output_cache_stats", [] { return output_cache().stats(); },
      "(blocks, bytes) the output cache holds now.");
  m.def("frame_decode", &frame_decode, py::arg("dst"), py::arg("src"), py::arg("max_decoded"),
        py::arg("layout") = "none", py::arg("elements") = false,
        py::arg("zstd_decoded") = py::none(), py::arg("threads") = 0,
        "Decode a frame into dst (planes, or elements with the merge fused in).");
  m.def(
      "_set_rans_variant",
      [](const std::string& name) {
        const int v = name == "auto" ? 0 : name == "scalar" ? 1 : name == "avx2" ? 2
                      : name == "avx512" ? 3 : -1;
        if (!nnc::detail::set_rans_variant(v))
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
          if (nnc::detail::set_rans_variant(std::string(name) == "avx2" ? 2 : 3)) out.append(name);
        nnc::detail::set_rans_variant(0);
        return out;
      },
      "rANS variants (encoder and decoder) this CPU runs.");
  m.def(
      "crc32c",
      [](py::handle data, std::uint32_t crc) {
        Buffer b(data, false, "crc32c", "data");
        py::gil_scoped_release release;
        return nnc::crc32c(crc, b.data(), b.size());
      },
      py::arg("data"), py::arg("crc") = 0, "CRC32C (Castagnoli) of data, continuing crc.");
  m.def("_set_crc_narrow", &nnc::crc32c_set_narrow, py::arg("narrow"),
        "Testing: True keeps CRC32C to the crc32-instruction kernel (no VPCLMULQDQ folding).");
  m.def("crc32c_combine", &nnc::crc32c_combine, py::arg("crc_a"), py::arg("crc_b"),
        py::arg("len_b"), "CRC32C of A||B from the CRCs of A and B.");
}
