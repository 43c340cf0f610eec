// The debugger's stop unit inside the simulator (npu_sim builds only: NPU_SIM_RING).
//
// Breakpoints are compared here, in the main loop (npu_sim_main.cpp), once per clock cycle
// on signals the model makes public for it (rtl/sim/cocotb.vlt: the register link's checker
// after the arbiter, the compute engine's decode stage, the DMA core's state) and on
// npu_sim's ports: no Python runs per cycle, and with nothing armed the check is one test.
//
// A cycle is looked at in its low half (after the falling edge, clk_i 0): the flops hold
// what the rising edge stored and the handshakes show what the next rising edge takes. A
// hit stops the device there, before that edge: a register access stops with its address
// handshake about to happen (the access has not taken effect), an instruction stops in
// decode before it is dispatched, a DMA transfer stops as its checks begin.
//
// Stopping is Python's: a hit toggles `host_wake_i` and the time step is evaluated again,
// so the worker's request loop (npuemu.worker.debug) wakes inside that evaluation and serves
// the debugger's requests on its pipe, blocking, until it resumes the device
// (npu_worker_debug_resume). The model is not advanced meanwhile: simulated time stands
// still, so the engine's watchdog and every wait counted in cycles are paused; the wall
// time spent stopped is counted (npu_debug::paused_ns) so that the ring's waits, whose
// deadline is on the wall clock, are extended by it.
#ifndef NPU_DEBUG_H
#define NPU_DEBUG_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "verilated.h"
#include "verilated_syms.h"

namespace npu_debug {

// Breakpoint kinds (xrt.hw.debug.BreakKind has the same numbers).
enum Kind : uint32_t {
    kCycle = 1,    // value: the cycle
    kReg = 2,      // value: the register's bus address; arg: 1 read, 2 write, 3 either
    kIrq = 3,      // the interrupt line rises
    kInsn = 4,     // value: the instruction's index in the program, entering decode
    kDma = 5,      // value: the transfer's index, counted from the breakpoint's arming
    kDmaAddr = 6,  // value: a transfer's source or destination address
};

// Why the device stopped (xrt.hw.debug.StopReason).
enum Reason : uint32_t { kRunning = 0, kBreakpoint = 1, kStep = 2 };

// Step kinds (npu_worker_debug_resume).
enum Step : uint32_t { kContinue = 0, kStepCycles = 1, kStepInsns = 2 };

struct Break {
    uint32_t id;
    uint32_t kind;
    uint64_t value;
    uint64_t arg;
    uint64_t hits;
    uint64_t seen;  // kDma: transfers started since it was armed
};

// A public signal of the model, found by its scope's last name and its own.
struct Signal {
    const VerilatedVar* var = nullptr;

    bool find(const char* scope_suffix, const char* name) {
        const auto* scopes = Verilated::threadContextp()->scopeNameMap();
        if (scopes == nullptr) return false;
        const size_t n = std::strlen(scope_suffix);
        size_t best = SIZE_MAX;
        for (const auto& [scope_name, scope] : *scopes) {
            const size_t len = std::strlen(scope_name);
            if (len < n || std::strcmp(scope_name + len - n, scope_suffix) != 0) continue;
            const VerilatedVar* v = scope->varFind(name);
            if (v != nullptr && len < best) {  // the outermost instance of that name
                var = v;
                best = len;
            }
        }
        return var != nullptr;
    }

    // The value's low 64 bits.
    uint64_t u64() const {
        const uint32_t size = var->entSize();
        const void* p = var->datap();
        if (size == 1) return *static_cast<const CData*>(p);
        if (size == 2) return *static_cast<const SData*>(p);
        if (size == 4) return *static_cast<const IData*>(p);
        if (size == 8) return *static_cast<const QData*>(p);
        return static_cast<const EData*>(p)[0] | (uint64_t{static_cast<const EData*>(p)[1]} << 32);
    }

    // 32-bit word `i` of a wide value (0 is the lowest).
    uint32_t word(uint32_t i) const {
        if (var->entSize() <= 4) return i == 0 ? static_cast<uint32_t>(u64()) : 0;
        if (var->entSize() == 8) return static_cast<uint32_t>(u64() >> (32 * i));
        return i < var->entSize() / 4 ? static_cast<const EData*>(var->datap())[i] : 0;
    }
};

// The engine's words of state (npu_worker_debug_state; xrt.hw.debug.EngineState's order).
constexpr int kStateWords = 16;
constexpr int kInsnWords = 8;  // a 256-bit instruction

// npu_sim's ports the unit reads (and the wake line it toggles).
struct Ports {
    const CData* clk;
    CData* host_wake;
    const CData* irq;
    const CData* busy;
};

class Unit {
  public:
    Unit(Ports ports, uint64_t period_ps) : m_top(ports), m_period_ps(period_ps) {}

    // Find the signals (once); false for a model built without them (rtl/sim/cocotb.vlt).
    bool ready() {
        if (m_found) return true;
        m_found = m_awvalid.find(".u_check_axil", "awvalid")
                  && m_awready.find(".u_check_axil", "awready")
                  && m_awaddr.find(".u_check_axil", "awaddr")
                  && m_arvalid.find(".u_check_axil", "arvalid")
                  && m_arready.find(".u_check_axil", "arready")
                  && m_araddr.find(".u_check_axil", "araddr")
                  && m_have.find(".u_decode", "have_q") && m_cur.find(".u_decode", "cur_q")
                  && m_units.find("u_npu.u_core", "u_busy")
                  && m_queues.find("u_npu.u_core", "q_valid")
                  && m_dma_state.find(".u_dma.u_core", "state_q")
                  && m_dma_src.find(".u_dma.u_core", "src_q")
                  && m_dma_dst.find(".u_dma.u_core", "dst_q");
        return m_found;
    }

    // Called after every evaluation of a time step at `now_ps`, before the register ring's
    // service; true when it stopped the device (the caller evaluates the step again, in
    // which Python wakes and serves the stop).
    bool after_evaluate(uint64_t now_ps) {
        if (!m_active || m_stopped || *m_top.clk != 0) return false;
        const uint64_t cycle = now_ps / m_period_ps;
        if (cycle == m_last_cycle) return false;  // looked at already (a deadline's step)
        m_last_cycle = cycle;
        const bool hit = look(cycle);
        if (!hit) return false;
        m_stopped = true;
        m_stop_cycle = cycle;
        m_stopped_at = std::chrono::steady_clock::now();
        *m_top.host_wake = !*m_top.host_wake;  // Python's Edge trigger fires
        return true;
    }

    // --- Python's requests (npu_worker_debug_*) ---
    int arm(uint32_t kind, uint64_t value, uint64_t arg) {
        if (!ready()) return -2;
        if (kind < kCycle || kind > kDmaAddr) return -1;
        if (kind == kReg && (arg < 1 || arg > 3)) return -1;
        m_breaks.push_back(Break{++m_next_id, kind, value, arg, 0, 0});
        sample_prev();
        update_active();
        return static_cast<int>(m_next_id);
    }

    int remove(uint32_t id) {  // 0: all of them
        const size_t before = m_breaks.size();
        m_breaks.erase(std::remove_if(m_breaks.begin(), m_breaks.end(),
                                      [id](const Break& b) { return id == 0 || b.id == id; }),
                       m_breaks.end());
        update_active();
        return m_breaks.size() < before || id == 0 ? 0 : -1;
    }

    const std::vector<Break>& breaks() const { return m_breaks; }

    bool stopped() const { return m_stopped; }

    // Resume: continue, or step `n` cycles or instructions (then stop again).
    int resume(uint32_t step, uint64_t n) {
        if (step > kStepInsns || (step != kContinue && n == 0)) return -1;
        if (step != kContinue && !ready()) return -2;
        m_step = step;
        m_step_left = n;
        m_step_target = Verilated::threadContextp()->time() / m_period_ps + n;
        if (m_stopped) {
            m_paused_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - m_stopped_at).count());
        }
        m_stopped = false;
        m_reason = kRunning;
        m_hit = 0;
        update_active();
        return 0;
    }

    // Every breakpoint gone, the device running (a lease ended).
    void clear() {
        if (m_stopped) resume(kContinue, 0);
        m_breaks.clear();
        m_step = kContinue;
        update_active();
    }

    // [stopped, reason, hit id, cycle, decode valid, pc, unit busy, queues non-empty,
    //  dma state, dma src, dma dst, irq, busy, paused ms, breakpoints, step left]
    void state(uint64_t* out, uint32_t* insn) {
        std::memset(out, 0, sizeof(uint64_t) * kStateWords);
        std::memset(insn, 0, sizeof(uint32_t) * kInsnWords);
        out[0] = m_stopped;
        out[1] = m_reason;
        out[2] = m_hit;
        out[3] = m_stopped ? m_stop_cycle : Verilated::threadContextp()->time() / m_period_ps;
        out[11] = *m_top.irq;
        out[12] = *m_top.busy;
        out[13] = m_paused_ns / 1000000;
        out[14] = m_breaks.size();
        out[15] = m_step == kContinue ? 0 : m_step_left;
        if (!ready()) return;
        out[4] = m_have.u64() & 1;
        out[5] = m_cur.word(kInsnWords);  // insn_pc_t: the pc above the 256-bit instruction
        out[6] = m_units.u64();
        out[7] = m_queues.u64();
        out[8] = m_dma_state.u64();
        out[9] = m_dma_src.u64();
        out[10] = m_dma_dst.u64();
        for (uint32_t i = 0; i < kInsnWords; ++i) insn[i] = m_cur.word(i);
    }

    uint64_t paused_ns() const { return m_paused_ns; }

    // The clock must run on an idle device: a step of cycles is pending.
    bool wants_clock() const { return !m_stopped && m_step == kStepCycles; }

  private:
    void update_active() {
        m_active = m_found && (!m_breaks.empty() || m_step != kContinue);
    }

    // The previous cycle's values the edge-sensitive kinds compare with.
    void sample_prev() {
        m_prev_irq = *m_top.irq;
        m_prev_have = m_have.u64() & 1;
        m_prev_pc = m_cur.word(kInsnWords);
        m_prev_dma = m_dma_state.u64();
    }

    bool stop_on(uint32_t reason, uint32_t hit) {
        m_reason = reason;
        m_hit = hit;
        return true;
    }

    bool look(uint64_t cycle) {
        const bool irq = *m_top.irq;
        const bool have = m_have.u64() & 1;
        const uint32_t pc = m_cur.word(kInsnWords);
        const uint64_t dma = m_dma_state.u64();
        const bool new_insn = have && (!m_prev_have || pc != m_prev_pc);
        const bool dma_start = dma == 1 && m_prev_dma == 0;  // StIdle -> StCheck
        const bool irq_rise = irq && !m_prev_irq;
        m_prev_irq = irq;
        m_prev_have = have;
        m_prev_pc = pc;
        m_prev_dma = dma;
        uint32_t hit = 0;
        for (Break& b : m_breaks) {
            bool now = false;
            switch (b.kind) {
            case kCycle: now = b.hits == 0 && cycle >= b.value; break;
            case kReg:
                now = ((b.arg & 2) && m_awvalid.u64() && m_awready.u64()
                       && m_awaddr.u64() == b.value)
                      || ((b.arg & 1) && m_arvalid.u64() && m_arready.u64()
                          && m_araddr.u64() == b.value);
                break;
            case kIrq: now = irq_rise; break;
            case kInsn: now = new_insn && pc == b.value; break;
            case kDma: now = dma_start && b.seen++ == b.value; break;
            case kDmaAddr:
                now = dma_start && (m_dma_src.u64() == b.value || m_dma_dst.u64() == b.value);
                break;
            default: break;
            }
            if (now) {
                ++b.hits;
                if (hit == 0) hit = b.id;
            }
        }
        if (hit != 0) {
            m_step = kContinue;
            update_active();
            return stop_on(kBreakpoint, hit);
        }
        if (m_step == kStepCycles && cycle >= m_step_target) {
            m_step = kContinue;
            m_step_left = 0;
            update_active();
            return stop_on(kStep, 0);
        }
        if (m_step == kStepInsns && new_insn && --m_step_left == 0) {
            m_step = kContinue;
            update_active();
            return stop_on(kStep, 0);
        }
        return false;
    }

    Ports m_top;
    uint64_t m_period_ps;
    bool m_found = false;
    bool m_active = false;  // anything armed: look at each cycle
    bool m_stopped = false;
    uint32_t m_reason = kRunning;
    uint32_t m_hit = 0;
    uint64_t m_stop_cycle = 0;
    uint64_t m_last_cycle = UINT64_MAX;
    std::chrono::steady_clock::time_point m_stopped_at{};
    uint64_t m_paused_ns = 0;
    std::vector<Break> m_breaks;
    uint32_t m_next_id = 0;
    uint32_t m_step = kContinue;
    uint64_t m_step_left = 0;
    uint64_t m_step_target = 0;
    bool m_prev_irq = false, m_prev_have = false;
    uint32_t m_prev_pc = 0;
    uint64_t m_prev_dma = 0;
    Signal m_awvalid, m_awready, m_awaddr, m_arvalid, m_arready, m_araddr;
    Signal m_have, m_cur, m_units, m_queues, m_dma_state, m_dma_src, m_dma_dst;
};

// The main loop's unit (set in main), for Python's entry points and the ring's service.
inline Unit*& unit() {
    static Unit* u = nullptr;
    return u;
}

// The wall time the device has spent stopped (the ring's wall-clock deadlines move by it).
inline uint64_t paused_ns() { return unit() ? unit()->paused_ns() : 0; }

// A step of cycles is pending: the clock runs even though the device is idle.
inline bool wants_clock() { return unit() && unit()->wants_clock(); }

}  // namespace npu_debug

// ---------------------------------------------------------------- Python's entry points
// (ctypes from npuemu.worker.debug; negative returns: -1 a bad argument, -2 a model built
// without the debug signals, -3 no main loop)

extern "C" __attribute__((visibility("default"))) int npu_worker_debug_arm(uint32_t kind,
                                                                           uint64_t value,
                                                                           uint64_t arg) {
    return npu_debug::unit() ? npu_debug::unit()->arm(kind, value, arg) : -3;
}

extern "C" __attribute__((visibility("default"))) int npu_worker_debug_remove(uint32_t id) {
    return npu_debug::unit() ? npu_debug::unit()->remove(id) : -3;
}

// Breakpoint `index` as (id, kind, value, arg, hits) into `out`; 0, or -1 past the last.
extern "C" __attribute__((visibility("default"))) int npu_worker_debug_break(uint32_t index,
                                                                             uint64_t* out) {
    if (!npu_debug::unit() || index >= npu_debug::unit()->breaks().size()) return -1;
    const npu_debug::Break& b = npu_debug::unit()->breaks()[index];
    out[0] = b.id;
    out[1] = b.kind;
    out[2] = b.value;
    out[3] = b.arg;
    out[4] = b.hits;
    return 0;
}

extern "C" __attribute__((visibility("default"))) int npu_worker_debug_resume(uint32_t step,
                                                                              uint64_t n) {
    return npu_debug::unit() ? npu_debug::unit()->resume(step, n) : -3;
}

extern "C" __attribute__((visibility("default"))) void npu_worker_debug_clear() {
    if (npu_debug::unit()) npu_debug::unit()->clear();
}

// kStateWords words of state and the instruction in decode (kInsnWords words, low first).
extern "C" __attribute__((visibility("default"))) int npu_worker_debug_state(uint64_t* out,
                                                                             uint32_t* insn) {
    if (!npu_debug::unit()) return -3;
    npu_debug::unit()->state(out, insn);
    return 0;
}

#endif  // NPU_DEBUG_H
