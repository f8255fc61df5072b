// The GPU kernels (decode and encode) under the SIMT emulator, as a shared library the
// tests load with ctypes (tests/gpu_emulator.py): one C entry per kernel,
// taking what a CuPy launch takes.
#include "simt_host.h"
// The kernel source itself (compiled here as host C++).
#include "../../src/nncodecs/gpu/kernels/decode.cu"
#include "../../src/nncodecs/gpu/kernels/encode.cu"

extern "C" void emu_rans_decode_chunks(unsigned grid, unsigned block, const FrameDesc* descs,
                                       const RansChunk* chunks, const nnc_u8* frames,
                                       const nnc_u8* rows, int* status, nnc_u8* planes) {
  simt::launch(grid, block, [&] { rans_decode_chunks(descs, chunks, frames, rows, status, planes); });
}

extern "C" void emu_rans_decode_merge(unsigned grid, unsigned block, const FrameDesc* descs,
                                      const RansChunk* chunks, const nnc_u8* frames,
                                      const nnc_u8* rows, int* status, const nnc_u8* external,
                                      const PlaneSource* sources, nnc_u8* out) {
  simt::launch(grid, block, [&] {
    rans_decode_merge(descs, chunks, frames, rows, status, external, sources, out);
  });
}

extern "C" void emu_merge_chunks(unsigned grid, unsigned block, const FrameDesc* descs,
                                 const MergeTask* tasks, const nnc_u8* frames,
                                 const nnc_u8* planes, const nnc_u8* external,
                                 const PlaneSource* sources, const nnc_u8* rows, nnc_u8* out) {
  simt::launch(grid, block, [&] {
    merge_chunks(descs, tasks, frames, planes, external, sources, rows, out);
  });
}

extern "C" void emu_crc_chunks(unsigned grid, unsigned block, const FrameDesc* descs,
                               const CrcTask* tasks, const nnc_u8* frames, const nnc_u8* planes,
                               const nnc_u8* external, const PlaneSource* sources,
                               const nnc_u8* rows, const nnc_u8* elements, nnc_u32* crcs) {
  simt::launch(grid, block, [&] {
    crc_chunks(descs, tasks, frames, planes, external, sources, rows, elements, crcs);
  });
}

extern "C" void emu_row_stats(unsigned grid, unsigned block, const EncodeDesc* descs,
                              const EncodeTask* tasks, const nnc_u8* input, nnc_u8* offsets,
                              nnc_u32* plain, nnc_u32* shifted) {
  simt::launch(grid, block, [&] { row_stats(descs, tasks, input, offsets, plain, shifted); });
}

extern "C" void emu_split_planes(unsigned grid, unsigned block, const EncodeDesc* descs,
                                 const EncodeTask* tasks, const nnc_u8* input,
                                 const nnc_u8* rows, nnc_u8* planes) {
  simt::launch(grid, block, [&] { split_planes(descs, tasks, input, rows, planes); });
}

extern "C" void emu_chunk_stats(unsigned grid, unsigned block, const EncodeDesc* descs,
                                const EncodeTask* tasks, const nnc_u8* planes, nnc_u32 probe,
                                nnc_u32* counts, nnc_u32* samples, nnc_u32* wants_zstd) {
  simt::launch(grid, block, [&] {
    chunk_stats(descs, tasks, planes, probe, counts, samples, wants_zstd);
  });
}

extern "C" void emu_rans_encode_chunks(unsigned grid, unsigned block, const nnc_u8* planes,
                                       const EncodeChunk* chunks, const nnc_u32* freqs,
                                       nnc_u32 precision, nnc_u32 subblock_log2, nnc_u8* words,
                                       nnc_u32* states, nnc_u32* nwords) {
  simt::launch(grid, block, [&] {
    rans_encode_chunks(planes, chunks, freqs, precision, subblock_log2, words, states, nwords);
  });
}

extern "C" void emu_assemble_frame(unsigned grid, unsigned block, const FramePiece* pieces,
                                   const nnc_u8* planes, const nnc_u8* host, const nnc_u8* tables,
                                   const nnc_u8* words, const nnc_u32* states,
                                   const nnc_u32* nwords, nnc_u32 subblock_log2, nnc_u8* frame) {
  simt::launch(grid, block, [&] {
    assemble_frame(pieces, planes, host, tables, words, states, nwords, subblock_log2, frame);
  });
}
