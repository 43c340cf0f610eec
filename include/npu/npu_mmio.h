/*
 * npu_mmio: the registers and host-visible memory of one NPU, for C drivers, with two
 * back ends chosen when the program is built:
 *
 *   -DNPU_MMIO_BOARD  the board: /dev/mem (root, or CAP_SYS_RAWIO), every register access
 *                     one 32-bit volatile load or store, host-visible memory (udma) mapped
 *                     at its physical address;
 *   -DNPU_MMIO_EMU    the emulator: the device a `npu-emu attach URL -- PROGRAM` leased for
 *                     the program, its registers through the lease's register ring (the
 *                     device's simulator serves it directly: no server, no Python in the
 *                     way) and udma through the same shared memory the simulator uses.
 *
 * The same driver code builds for both (examples/c/dma_copy.c; `make c-example`). Addresses
 * are physical, as on the bus: a register is NPU_BASE/DMA_BASE + its offset (the generated
 * headers in include/npu/ name them); udma bytes are at npu_udma(dev) + (address -
 * npu_udma_base(dev)).
 *
 * Functions return 0 (or a documented positive value) on success and a negative NPU_E*
 * code on failure; npu_strerror() names it, npu_last_error() says more.
 */
#ifndef NPU_MMIO_H
#define NPU_MMIO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npu_dev npu_dev;

enum {
    NPU_OK = 0,
    NPU_EOPEN = -1,     /* the device could not be opened (no /dev/mem, not under attach) */
    NPU_EBUS = -2,      /* the bus answered an error (SLVERR or DECERR) */
    NPU_ETIMEOUT = -3,  /* a poll or a wait gave up */
    NPU_EREVOKED = -4,  /* emulator: the lease ended, the ring is gone */
    NPU_EPROTO = -5,    /* emulator: the simulator refused the request or did not answer */
    NPU_EINVAL = -6,    /* an argument out of range */
};

/* The device: target "buyi" or "zg330" (NULL: $NPU_TARGET, else buyi). */
int npu_open(npu_dev **dev, const char *target);
void npu_close(npu_dev *dev);

int npu_read32(npu_dev *dev, uint64_t addr, uint32_t *value);
int npu_write32(npu_dev *dev, uint64_t addr, uint32_t value);

/* Read `addr` until (value & mask) == expected, for at most `timeout_us` of device time
 * (simulated time on the emulator: the clock's cycles, so a loaded machine cannot make it
 * spuriously time out; wall time on a board). NPU_ETIMEOUT with *last the last value. */
int npu_poll32(npu_dev *dev, uint64_t addr, uint32_t mask, uint32_t expected,
               uint64_t timeout_us, uint32_t *last);

/* Wait for the NPU's interrupt line for at most `timeout_ms` (wall time): 1 when it is
 * high, 0 on a timeout. On a board without an interrupt route to user space this polls
 * the NPU's and the DMA's INT_STATUS. */
int npu_wait_irq(npu_dev *dev, uint32_t timeout_ms);

/* Host-visible memory (udma): its mapping, physical base and size. */
volatile uint8_t *npu_udma(npu_dev *dev);
uint64_t npu_udma_base(const npu_dev *dev);
uint64_t npu_udma_size(const npu_dev *dev);

/* The target's register block bases and its plddr base. */
uint64_t npu_npu_base(const npu_dev *dev);
uint64_t npu_dma_base(const npu_dev *dev);
uint64_t npu_plddr_base(const npu_dev *dev);

const char *npu_strerror(int err);
const char *npu_last_error(const npu_dev *dev);

#ifdef __cplusplus
}
#endif

#endif /* NPU_MMIO_H */
