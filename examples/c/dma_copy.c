/*
 * Copy a buffer into PL DDR and back with the NPU's DMA engine: the driver sequence of
 * docs/hardware.md, written once against include/npu/npu_mmio.h and built for two places:
 *
 *   make c-example          # build/c/npu_dma_example     (a board: /dev/mem, as root)
 *                           # build/c/npu_dma_example_emu (the emulator: register ring)
 *   sudo build/c/npu_dma_example 65536
 *   npu-emu attach -d grpc://127.0.0.1:50051 -- build/c/npu_dma_example_emu 65536
 *
 * Register offsets, field masks and the bases come from the generated headers
 * (include/npu/, `make regs`): nothing here is typed by hand. The generated structs are
 * packed, so their members are only used through offsetof(), never dereferenced.
 *
 * `--crash-mid-dma` starts a transfer and aborts without waiting for it (tests: the next
 * lease must find the device clean).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/dma_csr.h"
#include "npu/npu_csr.h"
#include "npu/npu_mmio.h"

#define DMA_REG(dev, name) (npu_dma_base(dev) + offsetof(dma_csr_t, name))
#define DONE_OR_ERROR (DMA_CSR__INT_STATUS__DONE_bm | DMA_CSR__INT_STATUS__ERROR_bm)

#define CHECK(call)                                                                        \
    do {                                                                                   \
        int err_ = (call);                                                                 \
        if (err_ < 0) {                                                                    \
            fprintf(stderr, "%s: %s (%s)\n", #call, npu_strerror(err_), npu_last_error(dev)); \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)

/* Program one 1-D transfer and start it. */
static int dma_start(npu_dev *dev, uint64_t src, uint64_t dst, uint32_t bytes) {
    CHECK(npu_write32(dev, DMA_REG(dev, SRC_LO), (uint32_t)src));
    CHECK(npu_write32(dev, DMA_REG(dev, SRC_HI), (uint32_t)(src >> 32)));
    CHECK(npu_write32(dev, DMA_REG(dev, DST_LO), (uint32_t)dst));
    CHECK(npu_write32(dev, DMA_REG(dev, DST_HI), (uint32_t)(dst >> 32)));
    CHECK(npu_write32(dev, DMA_REG(dev, ROW_BYTES), bytes));
    CHECK(npu_write32(dev, DMA_REG(dev, ROWS), 1));
    CHECK(npu_write32(dev, DMA_REG(dev, SRC_STRIDE), 0));
    CHECK(npu_write32(dev, DMA_REG(dev, DST_STRIDE), 0));
    CHECK(npu_write32(dev, DMA_REG(dev, INT_STATUS), DONE_OR_ERROR)); /* clear old events */
    CHECK(npu_write32(dev, DMA_REG(dev, INT_ENABLE), DONE_OR_ERROR));
    CHECK(npu_write32(dev, DMA_REG(dev, CTRL), DMA_CSR__CTRL__START_bm));
    return 0;
}

/* One transfer: start it, wait for its interrupt, check STATUS, acknowledge. */
static int dma_copy(npu_dev *dev, uint64_t src, uint64_t dst, uint32_t bytes) {
    if (dma_start(dev, src, dst, bytes) != 0) return -1;
    int got = npu_wait_irq(dev, 10000);
    CHECK(got);
    if (got == 0) {
        fprintf(stderr, "no DMA interrupt within 10 s\n");
        return -1;
    }
    uint32_t status;
    CHECK(npu_read32(dev, DMA_REG(dev, STATUS), &status));
    CHECK(npu_write32(dev, DMA_REG(dev, INT_STATUS), DONE_OR_ERROR));
    if (status & DMA_CSR__STATUS__ERROR_bm) {
        uint32_t lo, hi;
        CHECK(npu_read32(dev, DMA_REG(dev, ERR_ADDR_LO), &lo));
        CHECK(npu_read32(dev, DMA_REG(dev, ERR_ADDR_HI), &hi));
        unsigned code = (status & DMA_CSR__STATUS__ERR_CODE_bm) >> DMA_CSR__STATUS__ERR_CODE_bp;
        fprintf(stderr, "DMA error %u at %#llx\n", code,
                (unsigned long long)(((uint64_t)hi << 32) | lo));
        return -1;
    }
    return 0;
}

static int run(npu_dev *dev, uint32_t bytes, int crash) {
    uint32_t magic;
    CHECK(npu_read32(dev, npu_npu_base(dev) + offsetof(npu_csr_t, MAGIC), &magic));
    if (magic != NPU_CSR__MAGIC__VALUE_reset) {
        fprintf(stderr, "no NPU: MAGIC reads %#x\n", magic);
        return -1;
    }
    /* udma's first half holds the source, its second half receives the copy back. */
    const uint64_t half = npu_udma_size(dev) / 2;
    volatile uint8_t *out = npu_udma(dev), *back = npu_udma(dev) + half;
    for (uint32_t i = 0; i < bytes; i++) {
        out[i] = (uint8_t)(i * 7 + 1);
        back[i] = 0;
    }
    if (crash) {
        if (dma_start(dev, npu_udma_base(dev), npu_plddr_base(dev), bytes) != 0) return -1;
        fprintf(stderr, "crashing with the DMA running\n");
        abort();
    }
    if (dma_copy(dev, npu_udma_base(dev), npu_plddr_base(dev), bytes) ||
        dma_copy(dev, npu_plddr_base(dev), npu_udma_base(dev) + half, bytes))
        return -1;
    for (uint32_t i = 0; i < bytes; i++) {
        if (back[i] != out[i]) {
            fprintf(stderr, "byte %u differs: %#x != %#x\n", i, back[i], out[i]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int crash = argc > 1 && strcmp(argv[1], "--crash-mid-dma") == 0;
    uint32_t bytes = argc > 1 + crash ? (uint32_t)strtoul(argv[1 + crash], NULL, 0) : 4096;
    npu_dev *dev = NULL;
    int err = npu_open(&dev, NULL);
    if (err < 0) {
        fprintf(stderr, "npu_open: %s (%s)\n", npu_strerror(err), npu_last_error(dev));
        npu_close(dev);
        return 1;
    }
    if (bytes == 0 || bytes > npu_udma_size(dev) / 2) {
        fprintf(stderr, "size must be 1..%llu bytes\n", (unsigned long long)npu_udma_size(dev) / 2);
        npu_close(dev);
        return 2;
    }
    int failed = run(dev, bytes, crash);
    npu_close(dev);
    if (failed) return 1;
    printf("%u bytes to plddr and back: ok\n", bytes);
    return 0;
}
