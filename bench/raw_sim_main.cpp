// Minimal raw Verilator harness for `npu_sim`: the speed reference for the cocotb harness.
//
// It does in C++ what the cocotb harness does in Python: reset, program one DMA transfer
// over AXI4-Lite, toggle the clock until the interrupt, and report simulated cycles per
// wall second. No VPI, no public signals, nothing between clock edges but the model.
//
//   npu_sim_raw [BYTES] [+npu_mem_udma=PATH +npu_mem_plddr=PATH]
// prints one line: "cycles=<n> seconds=<s> cycles_per_second=<r> bytes=<BYTES>".
//
//   npu_sim_raw regbus ADDR BATCH BATCHES IDLE [+plusargs]
// runs BATCHES batches of BATCH reads of register ADDR through the register bus master
// (npu_regbus_master and its DPI-C queue, as the harness hands them over), then IDLE
// cycles with nothing to do; prints "cycles=<n> seconds=<s> cpu_seconds=<s> reads=<n>
// idle_cycles=<n> idle_seconds=<s> idle_cpu_seconds=<s>" (CPU time: the machine is shared).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "npu_ring_abi.h"
#include "raw_sim.h"

// The register bus master's queue (rtl/sim/npu_regbus_dpi.cpp): the entry points the
// harness calls through ctypes, with the layouts generated from xrt.hw.ring.
using RegbusOp = npu_regbus_op;
using RegbusResult = npu_regbus_result;
constexpr uint32_t kRegStatusOk = 1;  // the wire's RegisterStatus.OK
extern "C" int npu_regbus_submit(const RegbusOp* ops, uint32_t n);
extern "C" uint32_t npu_regbus_collect(RegbusResult* out, uint32_t cap);

namespace {

// Register offsets: the generated map (runtime/xrt/_generated/regmap_dma.py) is the
// source; bench/bench_dma.py passes them in as -D defines.
constexpr uint32_t kDmaBase = DMA_BASE;
constexpr uint64_t kUdmaBase = UDMA_BASE;
constexpr uint64_t kPlddrBase = PLDDR_BASE;

}  // namespace

// Batches of register reads through the register bus master, then idle cycles: the cost
// of a register access against that of a cycle with nothing to do.
int run_regbus(RawSim& sim, uint32_t addr, uint32_t batch, uint32_t batches, uint64_t idle_cycles) {
    auto& t = *sim.top;
    std::vector<RegbusOp> ops(batch, RegbusOp{0, addr, 0, 0xFFFFFFFFu, 0, 0, 0});
    std::vector<RegbusResult> results(batch);
    uint64_t reads = 0;
    std::clock_t cpu0 = std::clock();
    auto start = std::chrono::steady_clock::now();
    uint64_t start_cycles = sim.cycles;
    for (uint32_t b = 0; b < batches; ++b) {
        if (npu_regbus_submit(ops.data(), batch) != 0) {
            std::fprintf(stderr, "the master refused a batch\n");
            return 2;
        }
        t.rbm_kick_i = !t.rbm_kick_i;
        sim.tick();
        while (t.rbm_busy_o) sim.tick();
        uint32_t n = npu_regbus_collect(results.data(), batch);
        for (uint32_t i = 0; i < n; ++i) reads += results[i].status == kRegStatusOk;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    uint64_t cycles = sim.cycles - start_cycles;
    cpu0 = std::clock();
    start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < idle_cycles; ++i) sim.tick();
    double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double idle_cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    std::printf("cycles=%llu seconds=%.6f cpu_seconds=%.6f reads=%llu idle_cycles=%llu "
                "idle_seconds=%.6f idle_cpu_seconds=%.6f\n",
                static_cast<unsigned long long>(cycles), seconds, cpu,
                static_cast<unsigned long long>(reads),
                static_cast<unsigned long long>(idle_cycles), idle, idle_cpu);
    t.final();
    return reads == uint64_t(batch) * batches ? 0 : 3;
}

int main(int argc, char** argv) {
    uint64_t bytes = 16ull << 20;
    if (argc > 1 && argv[1][0] != '+' && std::string(argv[1]) != "regbus")
        bytes = std::strtoull(argv[1], nullptr, 0);
    RawSim sim(argc, argv);
    auto& t = *sim.top;
    t.rbm_kick_i = 0;
    t.rbm_guard_i = ~0ull;
    sim.reset();
    if (argc > 5 && std::string(argv[1]) == "regbus") {
        return run_regbus(sim, static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 0)),
                          static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 0)),
                          static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0)),
                          std::strtoull(argv[5], nullptr, 0));
    }

    sim.write_reg(kDmaBase + DMA_SRC_LO, static_cast<uint32_t>(kUdmaBase));
    sim.write_reg(kDmaBase + DMA_SRC_HI, static_cast<uint32_t>(kUdmaBase >> 32));
    sim.write_reg(kDmaBase + DMA_DST_LO, static_cast<uint32_t>(kPlddrBase));
    sim.write_reg(kDmaBase + DMA_DST_HI, static_cast<uint32_t>(kPlddrBase >> 32));
    sim.write_reg(kDmaBase + DMA_ROW_BYTES, static_cast<uint32_t>(bytes));
    sim.write_reg(kDmaBase + DMA_ROWS, 1);
    sim.write_reg(kDmaBase + DMA_INT_ENABLE, 3);

    auto start = std::chrono::steady_clock::now();
    uint64_t start_cycles = sim.cycles;
    sim.write_reg(kDmaBase + DMA_CTRL, 1);  // START
    while (!t.irq_o) {
        if (sim.cycles - start_cycles > 100 * bytes) {
            std::fprintf(stderr, "no interrupt after %llu cycles\n",
                         static_cast<unsigned long long>(sim.cycles - start_cycles));
            return 2;
        }
        sim.tick();
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    uint64_t cycles = sim.cycles - start_cycles;
    std::printf("cycles=%llu seconds=%.4f cycles_per_second=%.0f bytes=%llu\n",
                static_cast<unsigned long long>(cycles), seconds, cycles / seconds,
                static_cast<unsigned long long>(bytes));
    t.final();
    return 0;
}
