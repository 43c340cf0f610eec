/*
 * Register read latency of a C driver on include/npu/npu_mmio.h: N reads of npu.MAGIC,
 * each timed; prints the median and the 99th percentile in microseconds. bench_registers.py
 * builds it with -DNPU_MMIO_EMU and runs it under `npu-emu attach`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "npu/npu_mmio.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 1) n = 1;
    npu_dev *dev = NULL;
    int err = npu_open(&dev, NULL);
    if (err < 0) {
        fprintf(stderr, "npu_open: %s (%s)\n", npu_strerror(err), npu_last_error(dev));
        return 1;
    }
    double *us = malloc(sizeof(double) * (size_t)n);
    uint32_t v;
    for (int i = 0; i < 100; i++) npu_read32(dev, npu_npu_base(dev), &v); /* warm up */
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        err = npu_read32(dev, npu_npu_base(dev), &v);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (err < 0) {
            fprintf(stderr, "read: %s (%s)\n", npu_strerror(err), npu_last_error(dev));
            return 1;
        }
        us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    qsort(us, (size_t)n, sizeof(double), cmp);
    printf("%d reads: p50 %.1f us p99 %.1f us\n", n, us[n / 2], us[(int)(n * 0.99)]);
    free(us);
    npu_close(dev);
    return 0;
}
