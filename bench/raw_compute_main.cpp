// Minimal raw Verilator harness for `npu_sim` running a compute-engine program: the speed
// reference for the cocotb harness (bench/bench_compute.py).
//
//   npu_sim_raw_compute WRITES_FILE [+npu_mem_udma=PATH +npu_mem_plddr=PATH]
//   npu_sim_raw_compute --idle CYCLES [plusargs]
// WRITES_FILE holds the launch sequence, one "ADDR VALUE" register write per line (the
// last one is CORE_CTRL.START). The program and its data are already in the memory files.
// Prints: "cycles=<n> seconds=<s> cycles_per_second=<r> cpu_seconds=<c>" (from START to
// the interrupt; CPU time of this process, for figures on a shared machine).
// With --idle, the model runs CYCLES clock cycles after reset and the buffer wipe with
// nothing to do (the engine idle), and prints the same line for them.

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "raw_sim.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s WRITES_FILE [plusargs]\n", argv[0]);
        return 1;
    }
    const bool idle = std::strcmp(argv[1], "--idle") == 0;
    if (idle && argc < 3) {
        std::fprintf(stderr, "usage: %s --idle CYCLES [plusargs]\n", argv[0]);
        return 1;
    }
    std::vector<std::pair<uint32_t, uint32_t>> writes;
    if (idle) {
        // no launch
    } else if (FILE* f = std::fopen(argv[1], "r")) {
        unsigned long a, v;
        while (std::fscanf(f, "%lu %lu", &a, &v) == 2) writes.emplace_back(a, v);
        std::fclose(f);
    }
    if (writes.empty() && !idle) {
        std::fprintf(stderr, "no register writes in %s\n", argv[1]);
        return 1;
    }
    RawSim sim(argc, argv);
    auto& t = *sim.top;
    sim.reset();
    // After reset the engine zeroes its buffers (busy_o high) and ignores START until done.
    while (t.busy_o) sim.tick();
    if (idle) {
        const uint64_t n = std::strtoull(argv[2], nullptr, 10);
        auto start = std::chrono::steady_clock::now();
        std::clock_t cpu0 = std::clock();
        for (uint64_t i = 0; i < n; ++i) sim.tick();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
        std::printf("cycles=%llu seconds=%.4f cycles_per_second=%.0f cpu_seconds=%.4f\n",
                    static_cast<unsigned long long>(n), seconds, n / seconds, cpu);
        t.final();
        return 0;
    }
    for (size_t i = 0; i + 1 < writes.size(); ++i) sim.write_reg(writes[i].first, writes[i].second);
    auto start = std::chrono::steady_clock::now();
    std::clock_t cpu0 = std::clock();
    uint64_t start_cycles = sim.cycles;
    sim.write_reg(writes.back().first, writes.back().second);  // START
    while (!t.irq_o) {
        if (sim.cycles - start_cycles > 100000000ull) {
            std::fprintf(stderr, "no interrupt after %llu cycles\n",
                         static_cast<unsigned long long>(sim.cycles - start_cycles));
            return 2;
        }
        sim.tick();
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    uint64_t cycles = sim.cycles - start_cycles;
    std::printf("cycles=%llu seconds=%.4f cycles_per_second=%.0f cpu_seconds=%.4f\n",
                static_cast<unsigned long long>(cycles), seconds, cycles / seconds, cpu);
    t.final();
    return 0;
}
