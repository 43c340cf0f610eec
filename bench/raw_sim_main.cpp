// Minimal raw Verilator harness for `npu_sim`: the speed reference for the cocotb harness.
//
// It does in C++ what the cocotb harness does in Python: reset, program one DMA transfer
// over AXI4-Lite, toggle the clock until the interrupt, and report simulated cycles per
// wall second. No VPI, no public signals, nothing between clock edges but the model.
//
//   npu_sim_raw [BYTES] [+npu_mem_udma=PATH +npu_mem_plddr=PATH]
// prints one line: "cycles=<n> seconds=<s> cycles_per_second=<r> bytes=<BYTES>".

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "raw_sim.h"

namespace {

// Register offsets: the generated map (runtime/xrt/_generated/regmap_dma.py) is the
// source; bench/bench_dma.py passes them in as -D defines.
constexpr uint32_t kDmaBase = DMA_BASE;
constexpr uint64_t kUdmaBase = UDMA_BASE;
constexpr uint64_t kPlddrBase = PLDDR_BASE;

}  // namespace

int main(int argc, char** argv) {
    uint64_t bytes = 16ull << 20;
    if (argc > 1 && argv[1][0] != '+') bytes = std::strtoull(argv[1], nullptr, 0);
    RawSim sim(argc, argv);
    auto& t = *sim.top;
    sim.reset();

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
