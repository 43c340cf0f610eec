// Waveform windows on demand, compiled into traced models only (built with --trace-fst).
//
// The simulation worker (Python, in the same process) calls these through ctypes:
//   npu_trace_start(path, clock, stop_ps, scopes)
//                                          open an FST file and dump on every edge of
//                                          `clock` (a VPI name such as "npu_sim.clk_o"),
//                                          up to simulated time `stop_ps` (0: no limit),
//                                          only the signals under the comma-separated
//                                          hierarchical `scopes` ("" or null: all);
//   npu_trace_stop()                        close the file (no-op when none is open);
//   npu_trace_active()                      1 while a file is open;
//   npu_trace_first_ps()/npu_trace_last_ps() the first and last dumped times.
// Dumping happens in a VPI value-change callback on the clock: after the simulator has
// settled the time step, in C++, with no Python per edge. Without a window the callback is
// not registered and the model runs as fast as an untraced one (minus Verilator's activity
// bookkeeping).

#include <verilated.h>
#include <verilated_fst_c.h>
#include <verilated_vpi.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

VerilatedFstC* g_tfp = nullptr;
vpiHandle g_cb = nullptr;
uint64_t g_stop_ps = 0;
uint64_t g_first_ps = 0;
uint64_t g_last_ps = 0;
bool g_dumped = false;

uint64_t now_ps() {
    s_vpi_time t;
    t.type = vpiSimTime;
    vpi_get_time(nullptr, &t);
    return (static_cast<uint64_t>(t.high) << 32) | t.low;
}

void close_trace() {
    if (g_cb != nullptr) {
        vpi_remove_cb(g_cb);
        g_cb = nullptr;
    }
    if (g_tfp != nullptr) {
        g_tfp->close();
        // Verilator keeps the model connected to a trace object for the run: a fresh one is
        // made per window and the old one is not deleted (cocotb's main does the same).
        g_tfp = nullptr;
    }
}

PLI_INT32 on_clock_edge(p_cb_data) {
    if (g_tfp == nullptr) return 0;
    const uint64_t now = now_ps();
    if (!g_dumped) {
        g_first_ps = now;
        g_dumped = true;
    }
    g_tfp->dump(now);
    g_last_ps = now;
    if (g_stop_ps != 0 && now >= g_stop_ps) close_trace();
    return 0;
}

}  // namespace

extern "C" int npu_trace_start(const char* path, const char* clock, uint64_t stop_ps,
                               const char* scopes) {
    if (g_tfp != nullptr) return -1;  // a window is already open
    vpiHandle clk = vpi_handle_by_name(const_cast<PLI_BYTE8*>(clock), nullptr);
    if (clk == nullptr) return -2;
    auto* tfp = new VerilatedFstC;
    // Verilator's $dumpvars filter: a signal is dumped when a scope is a whole-component
    // prefix of its name (a scope can also name one signal). Set before open(), where the
    // signals are declared.
    std::string rest = scopes != nullptr ? scopes : "";
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string scope = rest.substr(0, comma);
        if (!scope.empty()) tfp->dumpvars(99, scope);
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    Verilated::threadContextp()->trace(tfp, 99);
    tfp->open(path);
    if (!tfp->isOpen()) return -3;
    g_tfp = tfp;
    g_stop_ps = stop_ps;
    g_dumped = false;
    g_first_ps = g_last_ps = now_ps();
    static s_vpi_time time_kind = {vpiSuppressTime, 0, 0, 0.0};
    static s_vpi_value value_kind = {vpiSuppressVal, {nullptr}};
    s_cb_data cb = {};
    cb.reason = cbValueChange;
    cb.cb_rtn = on_clock_edge;
    cb.obj = clk;
    cb.time = &time_kind;
    cb.value = &value_kind;
    g_cb = vpi_register_cb(&cb);
    if (g_cb == nullptr) {
        close_trace();
        return -4;
    }
    g_tfp->dump(g_first_ps);  // the state at the start of the window
    g_dumped = true;
    return 0;
}

extern "C" void npu_trace_stop(void) { close_trace(); }

extern "C" int npu_trace_active(void) { return g_tfp != nullptr ? 1 : 0; }

extern "C" uint64_t npu_trace_first_ps(void) { return g_first_ps; }

extern "C" uint64_t npu_trace_last_ps(void) { return g_last_ps; }
