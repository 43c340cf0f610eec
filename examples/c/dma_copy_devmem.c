/*
 * Copy a buffer into PL DDR and back with the NPU's DMA engine, from Linux user space on a
 * board, through /dev/mem (root, or CAP_SYS_RAWIO; the kernel must allow /dev/mem access
 * to these ranges). The same sequence as docs/hardware.md and the runtime's driver.
 *
 *   gcc -O2 -Wall -Wextra -I include examples/c/dma_copy_devmem.c -o dma_copy
 *   sudo ./dma_copy 65536
 *
 * Register offsets, field masks and the bases come from the generated headers
 * (include/npu/, `make regs`): nothing here is typed by hand. Every register access is one
 * 32-bit volatile load or store: the generated structs are packed, so their members are
 * only used through offsetof(), never dereferenced (a packed member may be accessed
 * bytewise by the compiler).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "npu/dma_csr.h"
#include "npu/npu_csr.h"
#include "npu/npu_targets.h"

#define REG(name) offsetof(dma_csr_t, name)
#define DONE_OR_ERROR (DMA_CSR__INT_STATUS__DONE_bm | DMA_CSR__INT_STATUS__ERROR_bm)

static volatile uint8_t *map(int fd, uint64_t base, size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
    if (p == MAP_FAILED) {
        fprintf(stderr, "mmap of %#llx (+%zu B) failed: %s\n", (unsigned long long)base, size,
                strerror(errno));
        exit(1);
    }
    return (volatile uint8_t *)p;
}

static uint32_t rd(volatile uint8_t *block, size_t off) {
    return *(volatile uint32_t *)(block + off);
}

static void wr(volatile uint8_t *block, size_t off, uint32_t value) {
    *(volatile uint32_t *)(block + off) = value;
}

/* One 1-D transfer: program, start, wait for DONE or ERROR (polling STATUS), acknowledge. */
static int dma_copy(volatile uint8_t *dma, uint64_t src, uint64_t dst, uint32_t bytes) {
    wr(dma, REG(SRC_LO), (uint32_t)src);
    wr(dma, REG(SRC_HI), (uint32_t)(src >> 32));
    wr(dma, REG(DST_LO), (uint32_t)dst);
    wr(dma, REG(DST_HI), (uint32_t)(dst >> 32));
    wr(dma, REG(ROW_BYTES), bytes);
    wr(dma, REG(ROWS), 1);
    wr(dma, REG(SRC_STRIDE), 0);
    wr(dma, REG(DST_STRIDE), 0);
    wr(dma, REG(INT_STATUS), DONE_OR_ERROR); /* write 1 to clear earlier events */
    wr(dma, REG(INT_ENABLE), DONE_OR_ERROR);
    wr(dma, REG(CTRL), DMA_CSR__CTRL__START_bm);

    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    uint32_t status;
    for (;;) {
        status = rd(dma, REG(STATUS));
        if (status & (DMA_CSR__STATUS__DONE_bm | DMA_CSR__STATUS__ERROR_bm)) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 5) {
            fprintf(stderr, "DMA did not finish within 5 s (STATUS %#x)\n", status);
            return -1;
        }
    }
    wr(dma, REG(INT_STATUS), DONE_OR_ERROR);
    if (status & DMA_CSR__STATUS__ERROR_bm) {
        unsigned code = (status & DMA_CSR__STATUS__ERR_CODE_bm) >> DMA_CSR__STATUS__ERR_CODE_bp;
        uint64_t at = ((uint64_t)rd(dma, REG(ERR_ADDR_HI)) << 32) | rd(dma, REG(ERR_ADDR_LO));
        fprintf(stderr, "DMA error %u at %#llx\n", code, (unsigned long long)at);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    uint32_t bytes = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 4096;
    if (bytes == 0 || bytes > BUYI_UDMA_SIZE / 2) {
        fprintf(stderr, "size must be 1..%llu bytes\n", BUYI_UDMA_SIZE / 2);
        return 2;
    }
    int fd = open("/dev/mem", O_RDWR | O_SYNC);
    if (fd < 0) {
        perror("/dev/mem");
        return 1;
    }
    volatile uint8_t *npu = map(fd, BUYI_NPU_BASE, BUYI_REG_BLOCK_SIZE);
    volatile uint8_t *dma = map(fd, BUYI_DMA_BASE, BUYI_REG_BLOCK_SIZE);
    volatile uint8_t *udma = map(fd, BUYI_UDMA_BASE, BUYI_UDMA_SIZE);

    uint32_t magic = rd(npu, offsetof(npu_csr_t, MAGIC));
    if (magic != NPU_CSR__MAGIC__VALUE_reset) {
        fprintf(stderr, "no NPU at %#llx: MAGIC reads %#x\n", BUYI_NPU_BASE, magic);
        return 1;
    }
    /* udma's first half holds the source, its second half receives the copy back. */
    volatile uint8_t *out = udma, *back = udma + BUYI_UDMA_SIZE / 2;
    for (uint32_t i = 0; i < bytes; i++) {
        out[i] = (uint8_t)(i * 7 + 1);
        back[i] = 0;
    }
    if (dma_copy(dma, BUYI_UDMA_BASE, BUYI_PLDDR_BASE, bytes) ||
        dma_copy(dma, BUYI_PLDDR_BASE, BUYI_UDMA_BASE + BUYI_UDMA_SIZE / 2, bytes))
        return 1;
    for (uint32_t i = 0; i < bytes; i++) {
        if (back[i] != out[i]) {
            fprintf(stderr, "byte %u differs: %#x != %#x\n", i, back[i], out[i]);
            return 1;
        }
    }
    printf("%u bytes to plddr and back: ok\n", bytes);
    close(fd);
    return 0;
}
