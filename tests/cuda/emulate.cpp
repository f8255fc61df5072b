// The GPU decode kernels under the SIMT emulator, as a shared library the
// tests load with ctypes (tests/gpu_emulator.py): one C entry per kernel,
// taking what a CuPy launch takes.
#include "simt_host.h"
// The kernel source itself (compiled here as host C++).
#include "../../src/nncodecs/gpu/kernels/decode.cu"

extern "C" void emu_rans_decode_chunks(unsigned grid, unsigned block, const nnc_u8* frame,
                                       const RansChunk* chunks, nnc_u32 precision,
                                       nnc_u32 subblock_log2, nnc_u8* planes,
                                       const nnc_u8* row_offsets, nnc_u64 row_length,
                                       int* status) {
  simt::launch(grid, block, [&] {
    rans_decode_chunks(frame, chunks, precision, subblock_log2, planes, row_offsets, row_length,
                       status);
  });
}

extern "C" void emu_rans_decode_merge(unsigned grid, unsigned block, const nnc_u8* frame,
                                      const RansChunk* chunks, nnc_u32 precision,
                                      nnc_u32 subblock_log2, const nnc_u8* external,
                                      const PlaneSource* sources, nnc_u32 k, nnc_u64 n,
                                      nnc_u32 nchunks, nnc_u32 layout, const nnc_u8* row_offsets,
                                      nnc_u64 row_length, int* status, nnc_u8* out) {
  simt::launch(grid, block, [&] {
    rans_decode_merge(frame, chunks, precision, subblock_log2, external, sources, k, n, nchunks,
                      layout, row_offsets, row_length, status, out);
  });
}

extern "C" void emu_merge_elements(unsigned grid, unsigned block, const nnc_u8* frame,
                                   const nnc_u8* planes, const nnc_u8* external,
                                   const PlaneSource* sources, nnc_u32 k, nnc_u64 n,
                                   nnc_u32 chunks, nnc_u32 layout, const nnc_u8* row_offsets,
                                   nnc_u64 row_length, nnc_u32 to_planes, const nnc_u8* fused,
                                   nnc_u8* out) {
  simt::launch(grid, block, [&] {
    merge_elements(frame, planes, external, sources, k, n, chunks, layout, row_offsets,
                   row_length, to_planes, fused, out);
  });
}

extern "C" void emu_crc_chunks(unsigned grid, unsigned block, const nnc_u8* frame,
                               const nnc_u8* planes, const nnc_u8* external,
                               const PlaneSource* sources, nnc_u32 k, nnc_u64 n, nnc_u32 chunks,
                               nnc_u32 layout, const nnc_u8* row_offsets, nnc_u64 row_length,
                               const nnc_u8* elements, nnc_u32* crcs) {
  simt::launch(grid, block, [&] {
    crc_chunks(frame, planes, external, sources, k, n, chunks, layout, row_offsets, row_length,
               elements, crcs);
  });
}
