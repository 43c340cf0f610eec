// The part of the raw Verilator loops (raw_sim_main.cpp, raw_compute_main.cpp) they share:
// the model with the clock toggled from C++ and AXI4-Lite register writes, one at a time.
// No VPI, no public signals, nothing between clock edges but the model.

#ifndef NPU_BENCH_RAW_SIM_H
#define NPU_BENCH_RAW_SIM_H

#include <cstdint>
#include <memory>

#include "Vnpu_sim.h"
#include "verilated.h"

struct RawSim {
    std::unique_ptr<VerilatedContext> ctx{new VerilatedContext};
    std::unique_ptr<Vnpu_sim> top;
    uint64_t cycles = 0;

    RawSim(int argc, char** argv) {
        ctx->commandArgs(argc, argv);
        top.reset(new Vnpu_sim{ctx.get()});
        top->fault_mem_i = 0;
        top->fault_size_i = 0;
    }

    void tick() {
        top->clk_i = 0;
        top->eval();
        top->clk_i = 1;
        top->eval();
        ++cycles;
    }

    // Hold reset for 8 cycles, then release it for one.
    void reset() {
        top->rst_ni = 0;
        for (int i = 0; i < 8; ++i) tick();
        top->rst_ni = 1;
        tick();
    }

    // One AXI4-Lite write: address and data together, then the response.
    void write_reg(uint32_t addr, uint32_t value) {
        top->s_axil_awaddr = addr;
        top->s_axil_awvalid = 1;
        top->s_axil_wdata = value;
        top->s_axil_wstrb = 0xF;
        top->s_axil_wvalid = 1;
        top->s_axil_bready = 1;
        bool aw = false, w = false;
        while (!(aw && w)) {
            top->eval();
            bool aw_fire = top->s_axil_awvalid && top->s_axil_awready;
            bool w_fire = top->s_axil_wvalid && top->s_axil_wready;
            tick();
            if (aw_fire) { aw = true; top->s_axil_awvalid = 0; }
            if (w_fire) { w = true; top->s_axil_wvalid = 0; }
        }
        while (true) {
            top->eval();
            bool b_fire = top->s_axil_bvalid;
            tick();
            if (b_fire) break;
        }
        top->s_axil_bready = 0;
    }
};

#endif  // NPU_BENCH_RAW_SIM_H
