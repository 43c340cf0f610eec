// The cocotb harness model's main loop (npu_sim built by npuemu.sim.build, in place of
// cocotb's share/lib/verilator/verilator.cpp).
//
// It does what cocotb's loop does per time step (the same VPI calls in the same order:
// value-change callbacks after every evaluation, ReadWriteSynch, ReadOnlySynch, NextSimTime,
// then the timed callbacks of the next time), with two differences:
//
// - The clock is driven here: `clk_i` rises at odd and falls at even multiples of half
//   of NPU_SIM_CLOCK_PERIOD_PS (ps; the model is built with --timescale 1ps/1ps), as the
//   `forever #(ClockPeriodPs/2)` oscillator did that the model had before. Without
//   --timing there is no delay scheduler and no coroutine to resume per half period; a
//   time step that is a clock edge and a cocotb deadline at once toggles the clock in the
//   step's first evaluation, before cocotb's writes of that step are applied, as before.
// - A quiet time step skips the VPI calls that provably do nothing. A step is quiet when
//   no callback ran in the step before (so Python queued no write and registered no
//   NextSimTime callback, which only a callback can do) and no ReadWriteSynch,
//   ReadOnlySynch or NextSimTime callback is current. It then evaluates once, runs the
//   value-change callbacks once (when any are registered: cocotb's RisingEdge/FallingEdge),
//   and calls the timed callbacks only when the next cocotb deadline is the new time. If a
//   value-change callback fires, the step continues as a careful one: every call of
//   cocotb's loop, in its order. A careful step is also what follows any step in which a
//   callback ran, so semantics are those of cocotb's loop.
//
// Arguments as cocotb's main: --trace (dump every time step to --trace-file, dump.fst),
// --trace-flush; plusargs go to the model.
//
// As a device worker of `npu-emu serve` (NPU_WORKER_HANDOUT names the server's hand-out
// socket), main's first act is to make the process non-dumpable and tie it to the server
// (parent-death signal); then it connects to the hand-out socket, where the server checks
// the connecting process's pid (SO_PEERCRED) against the worker it started and only then
// sends the IPC socket and the memory files (SCM_RIGHTS). So nothing secret is inherited
// across exec, and nothing the process holds is reachable through /proc by another process
// of the same user at any time (npuemu.server.worker_process, docs/emulator.md).

#include <cerrno>
#include <cstddef>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
using TraceFile = VerilatedFstC;
#else
#include <verilated_vcd_c.h>
using TraceFile = VerilatedVcdC;
#endif
#endif

#ifndef NPU_SIM_CLOCK_PERIOD_PS
#error "build with -DNPU_SIM_CLOCK_PERIOD_PS=<clock period in ps> (npuemu.sim.build does)"
#endif
static_assert(NPU_SIM_CLOCK_PERIOD_PS % 2 == 0, "the clock period must be an even number of ps");

#ifdef NPU_SIM_RING
#include "npu_ring_service.h"  // the register ring, served between time steps (npu_sim)
#endif
#ifdef NPU_SIM_SAVABLE
#include "npu_model_state.h"  // device checkpoints (the model is built with --savable)
#include "verilated_syms.h"  // VerilatedVar: the wake line's copy inside npu_sim
#endif

extern "C" void vlog_startup_routines_bootstrap(void);  // cocotb's VPI library

namespace {

constexpr uint64_t kHalfPeriodPs = NPU_SIM_CLOCK_PERIOD_PS / 2;

#if VM_TRACE
TraceFile* g_trace = nullptr;
#endif

// Set when any VPI callback ran: the next step must be careful.
bool g_callback_ran = false;

bool call_cbs(uint32_t reason) {
    const bool called = VerilatedVpi::callCbs(reason);
    g_callback_ran |= called;
    return called;
}

// Value-change callbacks until none fires (they may write signals); true if any fired.
bool settle_value_callbacks() {
    if (!VerilatedVpi::hasCbs(cbValueChange)) return false;
    const bool called = VerilatedVpi::callValueCbs();
    if (called) {
        g_callback_ran = true;
        while (VerilatedVpi::callValueCbs()) {
        }
    }
    return called;
}

[[noreturn]] void handout_failed(const char* what) {
    std::fprintf(stderr, "Error: npu_sim worker hand-out: %s: %s\n", what, std::strerror(errno));
    std::exit(3);
}

// Before anything else: non-dumpable (unless NPU_EMU_DEBUGGABLE asks otherwise), killed
// with the server. Only as a worker: a test or bench run of the model stays debuggable.
void guard_worker() {
    const char* debuggable = std::getenv("NPU_EMU_DEBUGGABLE");
    if (debuggable == nullptr || std::string(debuggable).empty() || std::string(debuggable) == "0")
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    const char* server = std::getenv("NPU_SERVER_PID");
    if (server != nullptr && getppid() != static_cast<pid_t>(std::strtol(server, nullptr, 10)))
        std::exit(0);  // the server died before the signal was armed
}

// What the server handed out: the worker's pipe and descriptor channel, and the worker's
// configuration (npuemu.worker.config.WorkerConfig: "key=value" lines). Python reads them
// through npu_worker_fd and npu_worker_config.
int g_ipc_fd = -1;
int g_fdchan_fd = -1;
std::string g_worker_config;

// Connect to the server's hand-out socket (an abstract name: "@..." in `name`) and take the
// descriptors it sends with their roles ("ipc", "fdchan", "mem:NAME": the first line of
// the message) and the worker's configuration (the lines after it). Each memory becomes a
// plusarg.
std::vector<std::string> receive_handout(const std::string& name) {
    const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) handout_failed("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (name.size() < 2 || name[0] != '@' || name.size() > sizeof(addr.sun_path)) {
        errno = EINVAL;
        handout_failed("NPU_WORKER_HANDOUT must be an abstract socket name (@...)");
    }
    std::memcpy(addr.sun_path + 1, name.data() + 1, name.size() - 1);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (connect(sock, reinterpret_cast<sockaddr*>(&addr), len) != 0) handout_failed("connect");
    constexpr int kMaxFds = 8;
    char text[4096] = {};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    iovec iov{text, sizeof(text) - 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (got <= 0) handout_failed(got == 0 ? "the server refused this process" : "recvmsg");
    if ((msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
        errno = EMSGSIZE;
        handout_failed("the hand-out was truncated");
    }
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            fds.push_back(fd);
        }
    }
    close(sock);
    const std::string message(text, static_cast<size_t>(got));
    const size_t line_end = message.find('\n');
    g_worker_config = line_end == std::string::npos ? "" : message.substr(line_end + 1);
    std::istringstream roles(message.substr(0, line_end));
    std::vector<std::string> plusargs;
    size_t i = 0;
    for (std::string role; roles >> role; ++i) {
        if (i >= fds.size()) {
            errno = EPROTO;
            handout_failed("fewer descriptors than roles");
        }
        if (role == "ipc") {
            g_ipc_fd = fds[i];
        } else if (role == "fdchan") {
            g_fdchan_fd = fds[i];
        } else if (role.rfind("mem:", 0) == 0) {
            plusargs.push_back("+npu_mem_" + role.substr(4) + "=/proc/self/fd/" + std::to_string(fds[i]));
        } else {
            errno = EPROTO;
            handout_failed(("unknown role " + role).c_str());
        }
    }
    return plusargs;
}

void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (g_trace != nullptr) g_trace->close();  // not deleted: the model keeps a pointer
#endif
}

#ifdef NPU_SIM_RING
npu_ring::Service<Vtop>* g_ring_service = nullptr;
#endif

class Loop {
  public:
    explicit Loop(Vtop* top) : m_top(top), m_ctx(Verilated::threadContextp()) {}

    void run(bool trace_flush) {
        m_top->clk_i = 0;
        bool careful = true;  // cbStartOfSimulation ran Python
        while (!Verilated::gotFinish()) {
            g_callback_ran = false;
            careful = evaluate(careful);
#ifdef NPU_SIM_RING
            // A breakpoint hit stops the device here: the step is evaluated again, Python
            // wakes in it and serves the debugger until it resumes (npu_debug.h).
            while (npu_debug::unit()->after_evaluate(m_ctx->time())) careful = evaluate(true);
            // Idle time is the ring service's: it may block here (nothing asked, engines
            // idle), start a ring request, or wake Python, whose trigger fires in this same
            // time step evaluated again (npu_ring_service.h).
            while (g_ring_service->after_evaluate(m_ctx->time())) careful = evaluate(true);
#endif
#if VM_TRACE
            if (g_trace != nullptr) {
                g_trace->dump(m_ctx->time());
                if (trace_flush) g_trace->flush();
            }
#else
            (void)trace_flush;
#endif
            advance(careful);
            // After any callback (Python may have queued writes or registered a
            // NextSimTime callback, neither of which the VPI API shows) or with a
            // synchronisation callback current, the next step takes every call.
            careful = g_callback_ran || VerilatedVpi::hasCbs(cbReadWriteSynch)
                      || VerilatedVpi::hasCbs(cbReadOnlySynch)
                      || VerilatedVpi::hasCbs(cbNextSimTime);
        }
    }

  private:
    // All evaluations of the current time step; returns whether it turned careful.
    bool evaluate(bool careful) {
        const uint64_t now = m_ctx->time();
        if (now == m_next_edge) {
            m_top->clk_i = static_cast<CData>((now / kHalfPeriodPs) & 1U);
            m_next_edge += kHalfPeriodPs;
        }
        if (!careful) {
            m_top->eval_step();
            VerilatedVpi::clearEvalNeeded();
            if (!settle_value_callbacks()) {
                m_top->eval_end_step();
                return false;
            }
            // A callback fired: go on as cocotb's loop would after this first settle.
            if (VerilatedVpi::evalNeeded()) evaluate_careful_inner();
            finish_careful();
            return true;
        }
        evaluate_careful_inner();
        finish_careful();
        return true;
    }

    // cocotb's inner loop: evaluate until no VPI write asks for another evaluation.
    void evaluate_careful_inner() {
        do {
            m_top->eval_step();
            VerilatedVpi::clearEvalNeeded();
            VerilatedVpi::doInertialPuts();
            settle_value_callbacks();
        } while (VerilatedVpi::evalNeeded());
    }

    // The rest of a careful step: ReadWriteSynch (which may write and so evaluate again),
    // then the end of the step and ReadOnlySynch.
    void finish_careful() {
        while (true) {
            call_cbs(cbReadWriteSynch);
            VerilatedVpi::doInertialPuts();
            settle_value_callbacks();
            if (!VerilatedVpi::evalNeeded()) break;
            evaluate_careful_inner();
        }
        m_top->eval_end_step();
        call_cbs(cbReadOnlySynch);
    }

    // Move to the next time (a clock edge or a cocotb deadline, whichever is first) and run
    // the callbacks due there. After a quiet step no NextSimTime callback can be pending
    // and no timed one is current: only a deadline reached calls them.
    void advance(bool careful) {
        const uint64_t deadline = VerilatedVpi::cbNextDeadline();
        const uint64_t next = deadline < m_next_edge ? deadline : m_next_edge;
        m_ctx->time(next);
        if (careful) {
            call_cbs(cbNextSimTime);
            settle_value_callbacks();
        }
        if (careful || deadline <= next) {
            call_cbs(cbAfterDelay);  // cocotb's timers (VerilatedVpi::callTimedCbs)
            settle_value_callbacks();
        }
    }

    Vtop* m_top;
    VerilatedContext* m_ctx;
    uint64_t m_next_edge = kHalfPeriodPs;
};

}  // namespace

#ifdef NPU_SIM_SAVABLE
namespace {
Vtop* g_top = nullptr;
std::vector<uint8_t> g_pristine;        // the state every lease starts from (pristine_save)
std::vector<size_t> g_context_offsets;  // its context records, found once in the boot state
std::string g_state_error;              // why the last restore was refused

// What the model's serialisation holds besides the device: the simulation context (time,
// error counts, flags: Verilator writes it per module) and the main loop's wake line to
// Python. Neither is device state: a save writes them in a fixed form (equal states give
// equal bytes, whatever the simulation's time; the context block as a marker that
// npu_model_state.h finds) and a restore keeps the live ones (time runs on).
class HarnessState {
  public:
    explicit HarnessState(Vtop* top)
        : m_top(top), m_ctx(Verilated::threadContextp()), m_inner(inner_wake()),
          m_wake(top->host_wake_i), m_inner_wake(m_inner ? *m_inner : 0) {
        std::memcpy(m_saved, m_ctx->serialized1Ptr(), sizeof(m_saved));
    }
    void canonical() {
        npu_state::fill_marker(m_ctx->serialized1Ptr());
        m_top->host_wake_i = 0;
        if (m_inner) *m_inner = 0;
    }
    ~HarnessState() {
        std::memcpy(m_ctx->serialized1Ptr(), m_saved, sizeof(m_saved));
        m_top->host_wake_i = m_wake;
        if (m_inner) *m_inner = m_inner_wake;
    }

  private:
    // npu_sim's own copy of the wake line (its ports are public for cocotb: rtl/sim/cocotb.vlt).
    static CData* inner_wake() {
        const VerilatedScope* scope = Verilated::threadContextp()->scopeFind("npu_sim");
        VerilatedVar* var = scope ? scope->varFind("host_wake_i") : nullptr;
        return var ? static_cast<CData*>(var->datap()) : nullptr;
    }

    Vtop* m_top;
    VerilatedContext* m_ctx;
    CData* m_inner;
    CData m_wake;
    CData m_inner_wake;
    alignas(8) unsigned char m_saved[VerilatedContext::serialized1Size()];
};

// A state is saved or restored between time steps, in the low half of a clock cycle (clk_i
// 0 in the saved state and now, so no edge is made or lost). Python sees to both.
int state_point() {
    if (g_top == nullptr) return -ENODEV;
    return g_top->clk_i != 0 ? -EAGAIN : 0;
}

void save_into(std::vector<uint8_t>& out) {
    HarnessState harness(g_top);
    harness.canonical();
    npu_state::BytesSave os(out);
    os << *g_top;
}

void restore_from(const uint8_t* data, size_t size) {
    HarnessState harness(g_top);  // put back when this returns
    npu_state::BytesRestore os(data, size);
    os >> *g_top;
}
}  // namespace

// Device checkpoints and lease ends (npuemu.server.checkpoint, npuemu.worker.sim_main): the
// model's whole state, every flop and SRAM (registers, the engines, their buffers, the
// ZG330 OCM). The memories behind DPI (udma, plddr) are files the server handles itself;
// the model holds no reference to them (their table slots are parameters: npu_mem_dpi.cpp).

// The model's state into a new file at `path` (0600; an existing file is an error).
extern "C" __attribute__((visibility("default"))) int npu_worker_model_save(const char* path) {
    if (const int bad = state_point(); bad != 0) return bad;
    std::vector<uint8_t> state;
    save_into(state);
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -errno;
    size_t done = 0;
    while (done < state.size()) {
        const ssize_t n = write(fd, state.data() + done, state.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            close(fd);
            return -err;
        }
        done += static_cast<size_t>(n);
    }
    return close(fd) == 0 ? 0 : -errno;
}

// Restore a state of `size` bytes (a checkpoint's) after `sanitise_state` made it safe:
// -EINVAL, with npu_worker_model_error() saying why, for one that is not this model's.
extern "C" __attribute__((visibility("default"))) int npu_worker_model_restore(
    const uint8_t* data, size_t size) {
    if (const int bad = state_point(); bad != 0) return bad;
    if (g_pristine.empty()) return -ENODATA;
    g_state_error.clear();
    const std::vector<uint8_t> safe =
        npu_state::sanitise_state(g_pristine, g_context_offsets, data, size, g_state_error);
    if (safe.empty()) return -EINVAL;
    restore_from(safe.data(), safe.size());
    return 0;
}

extern "C" __attribute__((visibility("default"))) const char* npu_worker_model_error() {
    return g_state_error.c_str();
}

// The state now becomes the one every lease starts from (at boot; after a warm start).
extern "C" __attribute__((visibility("default"))) int npu_worker_pristine_save() {
    if (const int bad = state_point(); bad != 0) return bad;
    save_into(g_pristine);
    if (g_context_offsets.empty()) g_context_offsets = npu_state::context_offsets(g_pristine);
    return g_context_offsets.empty() ? -ENOTRECOVERABLE : 0;
}

// Back to that state: every flop and SRAM as they were (a lease has ended).
extern "C" __attribute__((visibility("default"))) int npu_worker_pristine_restore() {
    if (const int bad = state_point(); bad != 0) return bad;
    if (g_pristine.empty()) return -ENODATA;
    restore_from(g_pristine.data(), g_pristine.size());
    return 0;
}

// The size of this model's saved state (a checkpoint's model section is about as big).
extern "C" __attribute__((visibility("default"))) unsigned long long npu_worker_state_bytes() {
    return g_pristine.size();
}
#endif

#ifdef NPU_SIM_RING
// The register bus master's kick (Python's batches): the ring service owns that input, so
// both of its users toggle it through one place.
extern "C" __attribute__((visibility("default"))) int npu_regbus_start(unsigned long long guard) {
    if (g_ring_service == nullptr) return -1;
    g_ring_service->kick(guard);
    return 0;
}
#endif

// The worker's configuration text and its handed-out descriptors (npuemu.worker.mainloop).
extern "C" __attribute__((visibility("default"))) const char* npu_worker_config() {
    return g_worker_config.c_str();
}

extern "C" __attribute__((visibility("default"))) int npu_worker_fd(const char* role) {
    const std::string r = role ? role : "";
    return r == "ipc" ? g_ipc_fd : r == "fdchan" ? g_fdchan_fd : -1;
}

int main(int argc, char** argv) {
    const char* handout = std::getenv("NPU_WORKER_HANDOUT");
    if (handout != nullptr) guard_worker();  // first: nothing runs before it
    std::vector<std::string> extra;
    if (handout != nullptr) extra = receive_handout(handout);
    std::vector<char*> args(argv, argv + argc);
    for (std::string& plusarg : extra) args.push_back(plusarg.data());
    args.push_back(nullptr);
    argc = static_cast<int>(args.size()) - 1;
    argv = args.data();

    const char* trace_path = VM_TRACE_FST ? "dump.fst" : "dump.vcd";
    bool trace_on = false;
    bool trace_flush = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--trace") {
            trace_on = true;
        } else if (arg == "--trace-flush") {
            trace_flush = true;
        } else if (arg == "--trace-file" && i + 1 < argc) {
            trace_path = argv[++i];
        }
    }
#if !VM_TRACE
    if (trace_on) {
        std::fprintf(stderr, "Error: --trace needs a model built with waves (WAVES=1)\n");
        return 2;
    }
#endif

    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);  // cocotb probes with calls that may fail
    // A failed assertion (rtl/include/npu_assert.svh) never aborts the process. In a device
    // worker it is a device error, not the end of the simulation: npu_assert_dpi.cpp records
    // it and the worker fails the request that caused it with 11014 (npuemu.worker). In a
    // test or bench run the first one ends the simulation (Verilator's $stop), so the test
    // fails; +verilator+error+limit+N lets a test see N of them.
    Verilated::fatalOnError(false);
    if (handout != nullptr) Verilated::threadContextp()->errorLimit(1 << 30);
    if (Verilated::threadContextp()->timeprecision() != -12) {
        std::fprintf(stderr, "Error: npu_sim_main.cpp needs a model built with 1ps precision\n");
        return 2;
    }
#if VM_TRACE
    Verilated::traceEverOn(true);
    if (trace_on) {
        g_trace = new TraceFile;
        top->trace(g_trace, 99);
        g_trace->open(trace_path);
    }
#endif

#ifdef NPU_SIM_SAVABLE
    g_top = top.get();
#endif
#ifdef NPU_SIM_RING
    npu_ring::Service<Vtop> ring_service(top.get(), NPU_SIM_CLOCK_PERIOD_PS);
    g_ring_service = &ring_service;
    npu_debug::Unit debug_unit({&top->clk_i, &top->host_wake_i, &top->irq_o, &top->busy_o},
                               NPU_SIM_CLOCK_PERIOD_PS);
    npu_debug::unit() = &debug_unit;
#endif
    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void*) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    Loop(top.get()).run(trace_flush);

#if VM_COVERAGE
    // Coverage builds (make coverage; npuemu.sim.coverage): a file of this process's own in
    // the folder NPU_EMU_COVERAGE names (a server's workers get no plusargs), else where
    // +verilator+coverage+file+ says. A worker told to QUIT gets here; one killed does not.
    // Written before final and the end of cocotb: a device server kills a worker that has
    // not exited one second after QUIT.
    // A pid is reused over a long run: the first free number after it names the file.
    const char* cov_dir = std::getenv("NPU_EMU_COVERAGE");
    if (cov_dir != nullptr && *cov_dir != '\0') {
        const std::string stem = std::string(cov_dir) + "/npu_sim-" + std::to_string(getpid());
        std::string path;
        for (int n = 0; path.empty() || access(path.c_str(), F_OK) == 0; ++n)
            path = stem + "-" + std::to_string(n) + ".dat";
        VerilatedCov::write(path);
    } else {
        VerilatedCov::write();
    }
#endif
    top->final();
    wrap_up();
    return Verilated::threadContextp()->errorCount() > 0 ? 1 : 0;
}
