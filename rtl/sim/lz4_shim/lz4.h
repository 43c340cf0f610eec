/* The two LZ4 functions Verilator's FST writer (fstcpp) calls, declared as in LZ4's own
 * stable API (lz4.h, v1.9). Used only where the LZ4 runtime library (liblz4.so.1, present
 * on Debian as a dependency of systemd and apt) is installed without its development
 * package: npuemu.sim.build adds this folder to the include and library paths of traced
 * models when /usr/include/lz4.h is missing. */
#ifndef NPU_EMU_LZ4_SHIM_H
#define NPU_EMU_LZ4_SHIM_H
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char *src, char *dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif
