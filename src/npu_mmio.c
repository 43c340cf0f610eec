/*
 * npu_mmio: registers and host-visible memory of one NPU for C drivers (include/npu/npu_mmio.h).
 * Build with -DNPU_MMIO_BOARD (/dev/mem on a board) or -DNPU_MMIO_EMU (the emulator's
 * register ring, under `npu-emu attach`). C11, Linux.
 */
#define _GNU_SOURCE
#include "npu/npu_mmio.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "npu/dma_csr.h"
#include "npu/npu_csr.h"
#include "npu/npu_ring_abi.h"
#include "npu/npu_targets.h"

#if defined(NPU_MMIO_BOARD) == defined(NPU_MMIO_EMU)
#error "build with exactly one of -DNPU_MMIO_BOARD and -DNPU_MMIO_EMU"
#endif

struct npu_dev {
    uint64_t npu_base, dma_base, reg_block, udma_base, udma_size, plddr_base;
    volatile uint8_t *udma;
    char error[256];
#ifdef NPU_MMIO_BOARD
    int mem_fd;
    volatile uint8_t *npu, *dma;
#else
    uint8_t *ring;
    int kick_fd, done_fd;
#endif
};

static int fail(npu_dev *d, int code, const char *fmt, ...) {
    if (d != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->error, sizeof(d->error), fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *npu_strerror(int err) {
    switch (err) {
        case NPU_OK: return "ok";
        case NPU_EOPEN: return "the device could not be opened";
        case NPU_EBUS: return "the bus answered an error (SLVERR or DECERR)";
        case NPU_ETIMEOUT: return "timed out";
        case NPU_EREVOKED: return "the lease ended: the register ring is gone";
        case NPU_EPROTO: return "the device's simulator refused the request or did not answer";
        case NPU_EINVAL: return "an argument is out of range";
        default: return "unknown error";
    }
}

const char *npu_last_error(const npu_dev *dev) { return dev ? dev->error : ""; }
volatile uint8_t *npu_udma(npu_dev *dev) { return dev->udma; }
uint64_t npu_udma_base(const npu_dev *dev) { return dev->udma_base; }
uint64_t npu_udma_size(const npu_dev *dev) { return dev->udma_size; }
uint64_t npu_npu_base(const npu_dev *dev) { return dev->npu_base; }
uint64_t npu_dma_base(const npu_dev *dev) { return dev->dma_base; }
uint64_t npu_plddr_base(const npu_dev *dev) { return dev->plddr_base; }

static int set_target(npu_dev *d, const char *target) {
    if (target == NULL) target = getenv("NPU_TARGET");
    if (target == NULL || strcmp(target, "buyi") == 0) {
        d->npu_base = BUYI_NPU_BASE, d->dma_base = BUYI_DMA_BASE;
        d->reg_block = BUYI_REG_BLOCK_SIZE, d->plddr_base = BUYI_PLDDR_BASE;
        d->udma_base = BUYI_UDMA_BASE, d->udma_size = BUYI_UDMA_SIZE;
        return NPU_OK;
    }
    if (strcmp(target, "zg330") == 0) {
        d->npu_base = ZG330_NPU_BASE, d->dma_base = ZG330_DMA_BASE;
        d->reg_block = ZG330_REG_BLOCK_SIZE, d->plddr_base = ZG330_PLDDR_BASE;
        d->udma_base = ZG330_UDMA_BASE, d->udma_size = ZG330_UDMA_SIZE;
        return NPU_OK;
    }
    return fail(d, NPU_EINVAL, "unknown target '%s' (buyi, zg330)", target);
}

#ifdef NPU_MMIO_BOARD
/* ---------------------------------------------------------------- the board: /dev/mem */

static uint64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static volatile uint8_t *map_phys(npu_dev *d, uint64_t base, uint64_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, d->mem_fd, (off_t)base);
    if (p == MAP_FAILED) {
        fail(d, NPU_EOPEN, "mmap of %#llx (+%llu B) failed: %s", (unsigned long long)base,
             (unsigned long long)size, strerror(errno));
        return NULL;
    }
    return (volatile uint8_t *)p;
}

int npu_open(npu_dev **out, const char *target) {
    npu_dev *d = calloc(1, sizeof(*d));
    if (d == NULL) return NPU_EOPEN;
    *out = d;
    if (set_target(d, target) != NPU_OK) return NPU_EINVAL;
    d->mem_fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
    if (d->mem_fd < 0) return fail(d, NPU_EOPEN, "/dev/mem: %s", strerror(errno));
    d->npu = map_phys(d, d->npu_base, d->reg_block);
    d->dma = map_phys(d, d->dma_base, d->reg_block);
    d->udma = map_phys(d, d->udma_base, d->udma_size);
    if (d->npu == NULL || d->dma == NULL || d->udma == NULL) return NPU_EOPEN;
    return NPU_OK;
}

void npu_close(npu_dev *d) {
    if (d == NULL) return;
    if (d->npu) munmap((void *)d->npu, d->reg_block);
    if (d->dma) munmap((void *)d->dma, d->reg_block);
    if (d->udma) munmap((void *)d->udma, d->udma_size);
    if (d->mem_fd > 0) close(d->mem_fd);
    free(d);
}

static volatile uint32_t *reg(npu_dev *d, uint64_t addr) {
    if ((addr & 3) == 0 && addr >= d->npu_base && addr - d->npu_base < d->reg_block)
        return (volatile uint32_t *)(d->npu + (addr - d->npu_base));
    if ((addr & 3) == 0 && addr >= d->dma_base && addr - d->dma_base < d->reg_block)
        return (volatile uint32_t *)(d->dma + (addr - d->dma_base));
    return NULL;
}

int npu_read32(npu_dev *d, uint64_t addr, uint32_t *value) {
    volatile uint32_t *r = reg(d, addr);
    if (r == NULL) return fail(d, NPU_EINVAL, "%#llx is no register", (unsigned long long)addr);
    *value = *r;
    return NPU_OK;
}

int npu_write32(npu_dev *d, uint64_t addr, uint32_t value) {
    volatile uint32_t *r = reg(d, addr);
    if (r == NULL) return fail(d, NPU_EINVAL, "%#llx is no register", (unsigned long long)addr);
    *r = value;
    return NPU_OK;
}

int npu_poll32(npu_dev *d, uint64_t addr, uint32_t mask, uint32_t expected, uint64_t timeout_us,
               uint32_t *last) {
    const uint64_t start = now_us();
    for (;;) {
        int err = npu_read32(d, addr, last);
        if (err != NPU_OK) return err;
        if ((*last & mask) == expected) return NPU_OK;
        if (now_us() - start > timeout_us)
            return fail(d, NPU_ETIMEOUT, "poll of %#llx gave up", (unsigned long long)addr);
    }
}

int npu_wait_irq(npu_dev *d, uint32_t timeout_ms) {
    const uint64_t start = now_us();
    for (;;) {
        uint32_t npu_status, dma_status;
        int err = npu_read32(d, d->npu_base + offsetof(npu_csr_t, INT_STATUS), &npu_status);
        if (err == NPU_OK)
            err = npu_read32(d, d->dma_base + offsetof(dma_csr_t, INT_STATUS), &dma_status);
        if (err != NPU_OK) return err;
        if (npu_status | dma_status) return 1;
        if (now_us() - start > (uint64_t)timeout_ms * 1000u) return 0;
    }
}

#else
/* ---------------------------------------------------------------- the emulator's ring */

#define CYCLES_PER_US (1000000u / NPU_CLOCK_PERIOD_PS)
#define SPIN_CHECKS 2000 /* looks at the response before sleeping on the done eventfd */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ volatile("" ::: "memory");
#endif
}

static struct npu_ring_header *header(npu_dev *d) { return (struct npu_ring_header *)d->ring; }

static int env_fds(npu_dev *d, const char *name, int *fds, int count) {
    const char *text = getenv(name);
    if (text == NULL)
        return fail(d, NPU_EOPEN, "$%s is not set: run this program under `npu-emu attach URL -- ...`",
                    name);
    for (int i = 0; i < count; i++) {
        char *end;
        long v = strtol(text, &end, 10);
        if (end == text || v < 0 || v > 1 << 20 || (i + 1 < count && *end != ','))
            return fail(d, NPU_EOPEN, "$%s='%s' is not %d descriptor numbers", name,
                        getenv(name), count);
        fds[i] = (int)v;
        text = end + 1;
    }
    return NPU_OK;
}

int npu_open(npu_dev **out, const char *target) {
    npu_dev *d = calloc(1, sizeof(*d));
    if (d == NULL) return NPU_EOPEN;
    *out = d;
    d->kick_fd = d->done_fd = -1;
    if (set_target(d, target) != NPU_OK) return NPU_EINVAL;
    int ring[3], udma;
    int err = env_fds(d, "NPU_EMU_RING_FDS", ring, 3);
    if (err == NPU_OK) err = env_fds(d, "NPU_EMU_UDMA_FD", &udma, 1);
    if (err != NPU_OK) return err;
    void *p = mmap(NULL, NPU_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, ring[0], 0);
    if (p == MAP_FAILED) return fail(d, NPU_EOPEN, "cannot map the register ring: %s", strerror(errno));
    d->ring = p;
    d->kick_fd = ring[1];
    d->done_fd = ring[2];
    const struct npu_ring_header *h = header(d);
    if (h->magic != NPU_RING_MAGIC || h->version != NPU_RING_VERSION)
        return fail(d, NPU_EOPEN, "not a register ring of version %u", NPU_RING_VERSION);
    p = mmap(NULL, d->udma_size, PROT_READ | PROT_WRITE, MAP_SHARED, udma, 0);
    if (p == MAP_FAILED) return fail(d, NPU_EOPEN, "cannot map udma: %s", strerror(errno));
    d->udma = p;
    return NPU_OK;
}

void npu_close(npu_dev *d) {
    if (d == NULL) return;
    if (d->ring) munmap(d->ring, NPU_RING_BYTES);
    if (d->udma) munmap((void *)d->udma, d->udma_size);
    free(d);
}

/* Hand the request written over, wait for its response (spinning briefly, then sleeping on
 * the done eventfd); check the response's status. */
static int exchange(npu_dev *d, uint32_t timeout_ms) {
    struct npu_ring_header *h = header(d);
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != NPU_RING_STATE_LIVE)
        return fail(d, NPU_EREVOKED, "the register ring was revoked (the lease ended)");
    const uint64_t seq = __atomic_load_n(&h->req_seq, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&h->req_seq, seq, __ATOMIC_RELEASE);
    const uint64_t one = 1;
    if (write(d->kick_fd, &one, sizeof(one)) != sizeof(one))
        return fail(d, NPU_EPROTO, "cannot kick the simulator: %s", strerror(errno));
    for (int spin = 0; __atomic_load_n(&h->resp_seq, __ATOMIC_ACQUIRE) != seq; spin++) {
        if (spin < SPIN_CHECKS) {
            cpu_relax();
            continue;
        }
        struct pollfd p = {d->done_fd, POLLIN, 0};
        int got = poll(&p, 1, (int)timeout_ms);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return fail(d, NPU_EPROTO, "the device's simulator did not answer within %u ms",
                        timeout_ms);
        uint64_t count;
        if (read(d->done_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
            return fail(d, NPU_EPROTO, "done eventfd: %s", strerror(errno));
        if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != NPU_RING_STATE_LIVE)
            return fail(d, NPU_EREVOKED, "the register ring was revoked (the lease ended)");
    }
    const struct npu_ring_response *r =
        (const struct npu_ring_response *)(d->ring + NPU_RING_RESPONSE_OFFSET);
    if (r->status != NPU_RING_STATUS_OK)
        return fail(d, NPU_EPROTO, "the simulator refused the request: %.200s",
                    (const char *)(d->ring + NPU_RING_MESSAGE_OFFSET));
    return NPU_OK;
}

/* One register operation through the ring; its result in *res. */
static int one_op(npu_dev *d, uint32_t kind, uint64_t addr, uint32_t value, uint32_t mask,
                  uint32_t expected, uint64_t max_cycles, struct npu_regbus_result *res) {
    if (addr > 0xFFFFFFFFu) return fail(d, NPU_EINVAL, "%#llx is no register", (unsigned long long)addr);
    struct npu_regbus_op op = {kind, (uint32_t)addr, value, mask, expected, 0, max_cycles};
    memcpy(d->ring + NPU_RING_OPS_OFFSET, &op, sizeof(op));
    struct npu_ring_request req = {NPU_RING_KIND_BATCH, 1, 0, 0, 0};
    memcpy(d->ring + NPU_RING_REQUEST_OFFSET, &req, sizeof(req));
    const uint32_t timeout_ms = 30000u + (uint32_t)(max_cycles * 1000u / NPU_MIN_SIM_CYCLES_PER_S);
    int err = exchange(d, timeout_ms);
    if (err != NPU_OK) return err;
    memcpy(res, d->ring + NPU_RING_RESULTS_OFFSET, sizeof(*res));
    if (res->status == NPU_REGISTER_STATUS_OK) return NPU_OK;
    if (res->status == NPU_REGISTER_STATUS_POLL_TIMEOUT)
        return fail(d, NPU_ETIMEOUT, "poll of %#llx gave up", (unsigned long long)addr);
    return fail(d, NPU_EBUS, "%#llx answered %s", (unsigned long long)addr,
                res->status == NPU_REGISTER_STATUS_SLVERR ? "SLVERR" : "DECERR");
}

int npu_read32(npu_dev *d, uint64_t addr, uint32_t *value) {
    struct npu_regbus_result res;
    int err = one_op(d, 0, addr, 0, 0, 0, 0, &res);
    *value = res.value;
    return err;
}

int npu_write32(npu_dev *d, uint64_t addr, uint32_t value) {
    struct npu_regbus_result res;
    return one_op(d, 1, addr, value, 0xFFFFFFFFu, 0, 0, &res);
}

int npu_poll32(npu_dev *d, uint64_t addr, uint32_t mask, uint32_t expected, uint64_t timeout_us,
               uint32_t *last) {
    uint64_t cycles = timeout_us * CYCLES_PER_US;
    if (cycles == 0) cycles = 1;
    if (cycles > NPU_RING_MAX_CYCLES) return fail(d, NPU_EINVAL, "timeout_us is over 2**40 cycles");
    struct npu_regbus_result res;
    int err = one_op(d, 3, addr, 0, mask, expected, cycles, &res);
    *last = res.value;
    return err;
}

int npu_wait_irq(npu_dev *d, uint32_t timeout_ms) {
    if (timeout_ms == 0) timeout_ms = 1;
    if (timeout_ms > NPU_RING_MAX_WALL_MS) timeout_ms = NPU_RING_MAX_WALL_MS;
    struct npu_ring_request req = {NPU_RING_KIND_WAIT_IRQ, 0, NPU_RING_MAX_CYCLES, timeout_ms, 0};
    memcpy(d->ring + NPU_RING_REQUEST_OFFSET, &req, sizeof(req));
    int err = exchange(d, timeout_ms + 30000u);
    if (err != NPU_OK) return err;
    const struct npu_ring_response *r =
        (const struct npu_ring_response *)(d->ring + NPU_RING_RESPONSE_OFFSET);
    return r->outcome == NPU_WAIT_OUTCOME_INTERRUPT ? 1 : 0;
}
#endif
