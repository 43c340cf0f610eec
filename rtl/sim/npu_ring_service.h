// The register ring's server inside the simulator (npu_sim builds only: NPU_SIM_RING).
//
// A lease holder on the server's machine reaches the device's registers through a ring: a
// shared-memory file and two eventfds (layout: npu_ring_abi.h, generated from
// runtime/xrt/hw/ring.py; the protocol in that module's docstring). The worker's Python
// attaches it for the lease (npu_worker_ring_attach) and forgets it at the lease end
// (npu_worker_ring_detach); the main loop serves it here, between time steps, with no
// Python in the way.
//
// The server has a ring of its own (RingSlot.SERVER, attached when the worker starts): the
// register reads, writes and batches of holders that reach the device through gRPC come
// through it in the same way, one request at a time across both rings.
//
// Idle time belongs to this loop. When the Python request loop has nothing to do it calls
// npu_worker_idle_begin(ipc_fd) and waits for an edge of `host_wake_i`. From then on, after
// each time step's evaluation and before time moves on:
//
// - a ring request (kick eventfd) is validated and run: a batch through the register bus
//   master's queue (the one Python uses, npu_regbus_dpi.cpp), a wait by running the clock
//   until the interrupt line rises; the response goes back through the ring;
// - an engine that is busy (`busy_o`) keeps the clock running; the IPC socket and the ring
//   are looked at every kBusySliceSteps steps;
// - an idle device with nothing asked blocks in poll(): simulated time stands still and the
//   process sleeps;
// - a message on the IPC socket toggles `host_wake_i`, which resumes Python (a value-change
//   callback) to serve it. Python and the ring never use the register bus at once: a ring
//   request runs only while Python is idle, and Python is woken only between ring requests.
//
// Nothing in the ring is trusted: the client (another process) may write anything there at
// any time. The request is copied out once and checked field by field; a bad one gets
// BAD_REQUEST and a message, and nothing runs.
//
// While taps are on (a recording or tracing server, lockstep: npuemu.worker.port), every
// ring request is handed over to Python instead of run here: the request is checked as
// always, then Python is woken (host_wake_i) to run it through the worker's device port,
// which answers it (npu_worker_ring_respond) into the ring. So every request reaches the
// model through the one port, and its taps see it, whatever route it came by.
//
// Revocation comes from the server alone: each ring has a third eventfd, *revoke*, that only
// the server and this loop hold (the holder could rewrite the ring's `state` word, so it is
// not trusted for this). Once it is readable the ring is served no more: a request in flight
// is abandoned (a wait at once, a batch at the master's next op boundary) within
// kClockLookSteps cycles, so the lease end's RING_DETACH and reset do not queue behind a
// wait whose holder is gone.
#ifndef NPU_RING_SERVICE_H
#define NPU_RING_SERVICE_H

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "npu_debug.h"  // the debugger's stops: paused wall time, steps that run the clock
#include "npu_ring_abi.h"

#if !defined(NPU_SIM_POLL_MAX_INTERVAL) || !defined(NPU_SIM_NPU_BASE) \
    || !defined(NPU_SIM_DMA_BASE) || !defined(NPU_SIM_FAULT_BASE) \
    || !defined(NPU_SIM_REG_BLOCK_SIZE)
#error "build with -DNPU_SIM_POLL_MAX_INTERVAL, _NPU_BASE, _DMA_BASE, _FAULT_BASE, _REG_BLOCK_SIZE (npuemu.sim.build)"
#endif

extern "C" int npu_regbus_submit(const npu_regbus_op* ops, uint32_t n);
extern "C" uint32_t npu_regbus_collect(npu_regbus_result* out, uint32_t cap);
extern "C" void npu_regbus_cancel();
// Failed assertions (rtl/sim/npu_assert_dpi.cpp).
extern "C" bool npu_assert_describe_unreported(char* out, size_t size, uint64_t period_ps);
extern "C" void npu_worker_assert_mark_reported();
extern "C" uint64_t npu_worker_assert_count();

namespace npu_ring {

constexpr uint32_t kBusySliceSteps = 2 * 2048;       // half periods between looks while busy
constexpr uint32_t kClockLookSteps = 2 * 1024;       // a wait looks at the wall clock this often
constexpr int kOrphanCheckMs = 1000;                 // an idle worker checks on its server
// After a response the loop looks for the next request without sleeping for a while:
// kSpinBeforeSleep, or longer (up to kSpinMax) when that ring's last request came that
// long after the response before it, as a remote holder's do (a gRPC round trip each).
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(100);
constexpr auto kSpinMax = std::chrono::microseconds(2000);

// A ring attached: the current lease's (kLeaseSlot), or the server's own (kServerSlot: the
// register requests of holders that come through gRPC).
struct Slot {
    uint8_t* ring = nullptr;
    int kick_fd = -1;
    int done_fd = -1;
    int revoke_fd = -1;    // the server's only: readable once it has revoked the ring
    bool revoked = false;  // seen: nothing of this ring is served any more
    uint64_t seq = 0;  // the last request sequence number taken (per ring: a new one starts at 0)

    npu_ring_header* header() const { return reinterpret_cast<npu_ring_header*>(ring); }
    template <class T>
    T* at(uint32_t offset) const {
        return reinterpret_cast<T*>(ring + offset);
    }
};

constexpr int kLeaseSlot = NPU_RING_SLOT_LEASE;
constexpr int kServerSlot = NPU_RING_SLOT_SERVER;
constexpr int kSlots = 2;
static_assert(kLeaseSlot < kSlots && kServerSlot < kSlots, "RingSlot in xrt.hw.ring");

// What the worker's Python set up: the rings, and whether it is idle; and the ring request
// handed over to Python (taps on), until Python answers it.
struct Shared {
    Slot slots[kSlots];
    bool idle = false;  // Python waits for host_wake_i: idle time is ours
    int ipc_fd = -1;
    pid_t server = 0;
    bool handover = false;  // ring requests go to Python (npu_worker_ring_handover)
    bool inflight = false;  // a ring request runs here (Python may serve the debugger only)
    bool wake_when_free = false;  // Python kept messages for when no ring request runs
    bool handed = false;    // one is with Python now
    int handed_slot = 0;
    npu_ring_request handed_req{};
    std::vector<npu_regbus_op> handed_ops;
};

inline Shared& shared() {
    static Shared s;
    return s;
}

inline uint64_t load_acquire(const uint64_t* p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

inline void store_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline void signal(int fd) {
    const uint64_t one = 1;
    // A full eventfd (2**64 - 2 unread signals) cannot happen with one request at a time;
    // a client that closed its end changes nothing here.
    [[maybe_unused]] ssize_t n = write(fd, &one, sizeof(one));
}

// The server revoked the ring of slot `index` (its revoke eventfd is readable): mark it so
// once and for all (the eventfd is read, so an idle poll() does not spin on it).
inline void mark_revoked(int index) {
    Slot& slot = shared().slots[index];
    uint64_t count;
    [[maybe_unused]] ssize_t r = read(slot.revoke_fd, &count, sizeof(count));
    slot.revoked = true;
}

// Whether the ring of slot `index` is revoked, looking at its revoke eventfd now.
inline bool revoked_now(int index) {
    Slot& slot = shared().slots[index];
    if (slot.revoked) return true;
    if (slot.revoke_fd < 0) return false;
    pollfd fd = {slot.revoke_fd, POLLIN, 0};
    if (poll(&fd, 1, 0) <= 0) return false;
    mark_revoked(index);
    return true;
}

// Write the response to the ring's request `slot.seq` (its results are in place) and wake
// its client.
inline void write_response(const Slot& slot, uint32_t status, uint32_t n_results,
                           uint64_t cycles, uint32_t outcome, uint64_t waited,
                           const char* message) {
    npu_ring_response resp{};
    resp.status = status;
    resp.n_results = n_results;
    resp.cycles = cycles;
    resp.outcome = outcome;
    resp.waited = waited;
    std::memcpy(slot.at<npu_ring_response>(NPU_RING_RESPONSE_OFFSET), &resp, sizeof(resp));
    char* text = slot.at<char>(NPU_RING_MESSAGE_OFFSET);
    std::snprintf(text, NPU_RING_MESSAGE_BYTES, "%s", message ? message : "");
    slot.header()->cycles = cycles;
    store_release(&slot.header()->resp_seq, slot.seq);
    signal(slot.done_fd);
}

// Serves the ring from the main loop of a model `Top` (npu_sim: busy_o, irq_o, rbm_*,
// host_wake_i).
template <class Top>
class Service {
  public:
    Service(Top* top, uint64_t period_ps) : m_top(top), m_period_ps(period_ps) {
        const char* server = std::getenv("NPU_SERVER_PID");
        shared().server = server ? static_cast<pid_t>(std::strtol(server, nullptr, 10)) : 0;
    }

    // Called after the evaluation of every time step at `now_ps`, before time moves on;
    // returns once time may move on (after blocking, when the device is idle and nothing is
    // asked of it), or true when it woke Python: the caller then evaluates this same time
    // step again (Python's Edge trigger fires there), so a request Python serves starts at
    // the time its previous one ended and an idle device's time stands still.
    bool after_evaluate(uint64_t now_ps) {
        Shared& s = shared();
        if (!s.idle) return false;  // Python serves a request: the device is its own
        m_now_ps = now_ps;
        m_woke = false;
        if (m_inflight != Inflight::kNone) {
            finish_if_done();
            if (m_inflight != Inflight::kNone && ++m_revoke_steps >= kClockLookSteps) {
                m_revoke_steps = 0;
                if (revoked_now(m_slot)) abandon();
                // The debugger's requests are answered while a ring request runs: Python
                // is woken to read the pipe, and keeps any other message for later.
                if (m_inflight != Inflight::kNone && ipc_readable()) {
                    wake_python();
                    return true;
                }
            }
            if (m_inflight != Inflight::kNone) return false;  // still running: take the step
        }
        if (s.wake_when_free) {  // Python kept a message while a ring request ran
            s.wake_when_free = false;
            wake_python();
            return true;
        }
        // An engine runs, or the debugger steps cycles: keep the clock going, look now and then.
        if (m_top->busy_o || npu_debug::wants_clock()) {
            if (++m_busy_steps < kBusySliceSteps) return false;
            m_busy_steps = 0;
            look(0);
            return m_woke;
        }
        // A driver's next request usually follows its last response within microseconds
        // (a remote one's within a gRPC round trip): look without sleeping for a while first
        // (waking a process that slept in poll() costs tens of microseconds on an idle
        // machine), then sleep.
        const auto spin_until = std::max(m_responded_at + m_spin[m_slot],
                                         std::chrono::steady_clock::now() + kSpinBeforeSleep);
        // Spinning for the server's ring (remote holders: a gRPC round trip between
        // requests) gives the CPU to anyone who wants it, the client and the server among
        // them; a local holder's ring keeps it (its next request comes within microseconds).
        const bool yield = m_slot == kServerSlot;
        while (s.idle && m_inflight == Inflight::kNone && !look(0)) {
            if (std::chrono::steady_clock::now() >= spin_until) break;
            if (yield) sched_yield();
        }
        while (s.idle && m_inflight == Inflight::kNone && !m_top->busy_o
               && !npu_debug::wants_clock()) {
            if (!look(kOrphanCheckMs)) check_orphaned();
        }
        return m_woke;
    }

    // The register bus master's kick, for Python's batches too (one owner of the input).
    void kick(uint64_t guard) {
        m_top->rbm_guard_i = guard;
        m_top->rbm_kick_i = !m_top->rbm_kick_i;
    }

  private:
    enum class Inflight { kNone, kAwaitMaster, kBatch, kWait };

    uint64_t cycles() const { return m_now_ps / m_period_ps; }

    void check_orphaned() const {
        if (shared().server != 0 && getppid() != shared().server) {
            std::fprintf(stderr, "npu_sim: the server is gone: stopping\n");
            std::_Exit(0);
        }
    }

    // The ring of the request in flight was revoked: nobody waits for its answer any more.
    // A wait ends at once; a batch's master is told to stop (a poll gives up at its next
    // read) and the batch ends as a cancelled one does, answering into the dead ring.
    void abandon() {
        if (m_inflight == Inflight::kBatch) {
            npu_regbus_cancel();
            return;
        }
        m_inflight = Inflight::kNone;  // a wait, or a batch not yet handed to the master
        shared().inflight = false;
        m_outcome = 0;
        m_waited = 0;
    }

    bool ipc_readable() const {
        pollfd fd = {shared().ipc_fd, POLLIN, 0};
        return poll(&fd, 1, 0) > 0 && (fd.revents & (POLLIN | POLLHUP | POLLERR));
    }

    void wake_python() {
        shared().idle = false;
        m_top->host_wake_i = !m_top->host_wake_i;  // Python's Edge trigger fires
        m_woke = true;
    }

    // Look at the IPC socket and the rings for `timeout_ms`; true if something was started
    // (a ring request) or handed over (Python woken).
    bool look(int timeout_ms) {
        Shared& s = shared();
        pollfd fds[1 + 2 * kSlots] = {{s.ipc_fd, POLLIN, 0}};
        int slot_of[1 + 2 * kSlots] = {-1};
        bool is_revoke[1 + 2 * kSlots] = {false};
        nfds_t n = 1;
        for (int i = 0; i < kSlots; ++i) {
            const Slot& slot = s.slots[i];
            if (slot.ring == nullptr || slot.revoked) continue;
            fds[n] = {slot.kick_fd, POLLIN, 0};
            slot_of[n++] = i;
            if (slot.revoke_fd < 0) continue;
            fds[n] = {slot.revoke_fd, POLLIN, 0};
            is_revoke[n] = true;
            slot_of[n++] = i;
        }
        const int got = poll(fds, n, timeout_ms);
        if (got <= 0) return false;
        for (nfds_t k = 1; k < n; ++k) {  // revocations first: a kick beside one is not served
            if (is_revoke[k] && (fds[k].revents & POLLIN)) mark_revoked(slot_of[k]);
        }
        for (nfds_t k = 1; k < n; ++k) {
            if (is_revoke[k] || !(fds[k].revents & POLLIN) || s.slots[slot_of[k]].revoked) {
                continue;
            }
            uint64_t count;
            [[maybe_unused]] ssize_t r = read(fds[k].fd, &count, sizeof(count));
            if (start_request(slot_of[k])) {  // another ring's kick stays readable
                s.inflight = m_inflight != Inflight::kNone;
                return true;
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            wake_python();
            return true;
        }
        return false;
    }

    void respond(uint32_t status, uint32_t n_results, const char* message) {
        // A failed RTL assertion while the request ran is a device error of that request
        // (rtl/sim/npu_assert_dpi.cpp); the worker resets the device before the next one.
        char fired[NPU_RING_MESSAGE_BYTES];
        if (status == NPU_RING_STATUS_OK
            && npu_assert_describe_unreported(fired, sizeof(fired), m_period_ps)) {
            npu_worker_assert_mark_reported();
            status = NPU_RING_STATUS_DEVICE_ERROR;
            n_results = 0;
            message = fired;
        }
        write_response(shared().slots[m_slot], status, n_results, cycles(), m_outcome, m_waited,
                       message);
        m_responded_at = std::chrono::steady_clock::now();
        m_inflight = Inflight::kNone;
        shared().inflight = false;
        m_outcome = 0;
        m_waited = 0;
    }

    // Taps are on: the request checked goes to Python, which answers it through
    // npu_worker_ring_respond. Python is woken as for a message on the pipe.
    void hand_over(int index, const npu_ring_request& req) {
        Shared& s = shared();
        s.handed = true;
        s.handed_slot = index;
        s.handed_req = req;
        s.handed_ops.assign(m_ops.begin(), m_ops.begin() + (req.kind == NPU_RING_KIND_BATCH
                                                                 ? req.n_ops : 0));
        s.idle = false;
        m_top->host_wake_i = !m_top->host_wake_i;  // Python's Edge trigger fires
        m_woke = true;
    }

    void refuse(const char* fmt, unsigned long long a = 0, unsigned long long b = 0) {
        char message[NPU_RING_MESSAGE_BYTES];
        std::snprintf(message, sizeof(message), fmt, a, b);
        respond(NPU_RING_STATUS_BAD_REQUEST, 0, message);
    }

    // A new request in the ring of slot `index`: check it and start it. False when there
    // is none.
    bool start_request(int index) {
        Slot& slot = shared().slots[index];
        npu_ring_header* h = slot.header();
        if (slot.revoked) return false;
        if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != NPU_RING_STATE_LIVE) return false;
        const uint64_t seq = load_acquire(&h->req_seq);
        if (seq == slot.seq) return false;  // a kick without a request (or a repeated one)
        slot.seq = seq;
        if (index == m_slot) {  // how long after the last response this request came
            const auto gap = std::chrono::steady_clock::now() - m_responded_at;
            m_spin[index] = gap < kSpinMax
                ? std::max<std::chrono::steady_clock::duration>(kSpinBeforeSleep, gap * 5 / 4)
                : std::chrono::steady_clock::duration(kSpinBeforeSleep);
        }
        m_slot = index;
        npu_ring_request req;
        std::memcpy(&req, slot.at<npu_ring_request>(NPU_RING_REQUEST_OFFSET), sizeof(req));
        if (req.kind == NPU_RING_KIND_WAIT_IRQ) {
            if (req.max_cycles == 0 || req.max_cycles > NPU_RING_MAX_CYCLES) {
                refuse("max_cycles %llu is not within 1..2**40", req.max_cycles);
                return true;
            }
            if (req.wall_ms == 0 || req.wall_ms > NPU_RING_MAX_WALL_MS) {
                refuse("wall_ms %llu is not within 1..%llu", req.wall_ms, NPU_RING_MAX_WALL_MS);
                return true;
            }
            // After a failed assertion the worker resets the device first (npuemu.worker).
            if (shared().handover || npu_worker_assert_count() != 0) {
                hand_over(index, req);
                return true;
            }
            m_wait_start = cycles();
            m_wait_max = req.max_cycles;
            m_wait_deadline = std::chrono::steady_clock::now()
                              + std::chrono::milliseconds(req.wall_ms);
            m_wait_paused = npu_debug::paused_ns();
            m_clock_steps = 0;
            m_revoke_steps = 0;
            m_inflight = Inflight::kWait;
            finish_if_done();  // the line may be high already
            return true;
        }
        if (req.kind != NPU_RING_KIND_BATCH) {
            refuse("unknown request kind %llu", req.kind);
            return true;
        }
        if (req.n_ops == 0 || req.n_ops > NPU_RING_MAX_OPS) {
            refuse("n_ops %llu is not within 1..%llu", req.n_ops, NPU_RING_MAX_OPS);
            return true;
        }
        m_ops.resize(req.n_ops);
        std::memcpy(m_ops.data(), slot.at<npu_regbus_op>(NPU_RING_OPS_OFFSET),
                    req.n_ops * sizeof(npu_regbus_op));
        // A bound no correct batch reaches (as the Python harness computes it).
        uint64_t guard = 256ull * req.n_ops + 4096;
        for (uint32_t i = 0; i < req.n_ops; ++i) {
            npu_regbus_op& op = m_ops[i];
            if (op.kind > 3) {
                refuse("op %llu: unknown kind %llu", i, op.kind);
                return true;
            }
            // The server's rules (npuemu.server.errors.check_register): a register of the
            // npu, dma or fault block, 4-byte aligned.
            const bool in_npu = op.addr >= NPU_SIM_NPU_BASE
                                && op.addr - NPU_SIM_NPU_BASE < NPU_SIM_REG_BLOCK_SIZE;
            const bool in_dma = op.addr >= NPU_SIM_DMA_BASE
                                && op.addr - NPU_SIM_DMA_BASE < NPU_SIM_REG_BLOCK_SIZE;
            const bool in_fault = op.addr >= NPU_SIM_FAULT_BASE
                                  && op.addr - NPU_SIM_FAULT_BASE < NPU_SIM_REG_BLOCK_SIZE;
            if ((op.addr & 3) != 0 || !(in_npu || in_dma || in_fault)) {
                refuse("op %llu: register address %#llx is not an aligned register of the "
                       "npu, dma or fault block", i, op.addr);
                return true;
            }
            if (op.kind == 3) {
                if (op.max_cycles == 0) op.max_cycles = NPU_RING_DEFAULT_POLL_CYCLES;
                if (op.max_cycles > NPU_RING_MAX_CYCLES) {
                    refuse("op %llu: poll max_cycles %llu is over 2**40", i, op.max_cycles);
                    return true;
                }
                guard += op.max_cycles + NPU_SIM_POLL_MAX_INTERVAL;
            }
        }
        if (shared().handover || npu_worker_assert_count() != 0) {
            hand_over(index, req);
            return true;
        }
        m_n_ops = req.n_ops;
        m_guard = guard;
        m_revoke_steps = 0;
        // A batch Python's path cancelled (its caller went away) ends at the master's next
        // op boundary: this one starts after it.
        m_inflight = Inflight::kAwaitMaster;
        finish_if_done();
        return true;
    }

    void submit_batch() {
        if (npu_regbus_submit(m_ops.data(), m_n_ops) != 0) {
            respond(NPU_RING_STATUS_MASTER_HUNG, 0, "the register bus master is still busy");
            return;
        }
        m_seen_busy = false;
        kick(m_guard);
        m_inflight = Inflight::kBatch;
    }

    void finish_if_done() {
        if (m_inflight == Inflight::kAwaitMaster) {
            if (!m_top->rbm_busy_o) submit_batch();
            return;
        }
        if (m_inflight == Inflight::kWait) {
            const uint64_t waited = cycles() - m_wait_start;
            uint32_t outcome = 0;
            if (m_top->irq_o) {
                outcome = NPU_WAIT_OUTCOME_INTERRUPT;
            } else if (waited >= m_wait_max) {
                outcome = NPU_WAIT_OUTCOME_CYCLE_LIMIT;
            } else if (++m_clock_steps >= kClockLookSteps) {
                m_clock_steps = 0;
                // Wall time the debugger held the device stopped does not count.
                const auto paused = std::chrono::nanoseconds(npu_debug::paused_ns() - m_wait_paused);
                if (std::chrono::steady_clock::now() - paused >= m_wait_deadline)
                    outcome = NPU_WAIT_OUTCOME_DEADLINE;
            }
            if (outcome != 0) {
                m_outcome = outcome;
                m_waited = waited;
                respond(NPU_RING_STATUS_OK, 0, nullptr);
            }
            return;
        }
        // kBatch: the master is busy from the edge after the kick until the batch ends;
        // rbm_wait_o falls with it, or earlier when the batch overran its guard.
        if (m_top->rbm_busy_o) m_seen_busy = true;
        if (!m_seen_busy || m_top->rbm_wait_o) return;
        if (m_top->rbm_busy_o) {  // the guard ended the wait: the master hangs
            npu_regbus_cancel();
            respond(NPU_RING_STATUS_MASTER_HUNG, 0, "the register bus master overran its guard");
            return;
        }
        const uint32_t n = npu_regbus_collect(
            shared().slots[m_slot].at<npu_regbus_result>(NPU_RING_RESULTS_OFFSET), m_n_ops);
        respond(NPU_RING_STATUS_OK, n < m_n_ops ? n : m_n_ops, nullptr);
    }

    Top* m_top;
    uint64_t m_period_ps;
    uint64_t m_now_ps = 0;
    uint32_t m_busy_steps = 0;
    bool m_woke = false;  // this look resumed Python
    Inflight m_inflight = Inflight::kNone;
    int m_slot = kLeaseSlot;  // the ring of the request in flight (or of the last one)
    std::chrono::steady_clock::time_point m_responded_at{};  // the last response
    std::chrono::steady_clock::duration m_spin[kSlots] = {kSpinBeforeSleep, kSpinBeforeSleep};
    std::vector<npu_regbus_op> m_ops;
    uint32_t m_n_ops = 0;
    uint64_t m_guard = 0;
    bool m_seen_busy = false;
    uint64_t m_wait_start = 0;
    uint64_t m_wait_max = 0;
    std::chrono::steady_clock::time_point m_wait_deadline{};
    uint64_t m_wait_paused = 0;  // npu_debug::paused_ns() when the wait started
    uint32_t m_clock_steps = 0;
    uint32_t m_revoke_steps = 0;  // steps since the in-flight ring's revoke fd was looked at
    uint32_t m_outcome = 0;
    uint64_t m_waited = 0;
};

}  // namespace npu_ring

// ---------------------------------------------------------------- Python's entry points
// (ctypes from the worker, through the executable's dynamic symbols: npu_worker_*)

// Serve the ring in shared-memory file `mem_fd` with its eventfds in slot `slot`
// (npu_ring::kLeaseSlot: the current lease's; kServerSlot: the server's own): `kick` and
// `done` shared with the ring's client, `revoke` with the server alone. Takes the four
// descriptors (closes them at detach, or at once on failure). Returns 0, or -errno.
extern "C" __attribute__((visibility("default"))) int npu_worker_ring_attach(int slot,
                                                                             int mem_fd,
                                                                             int kick_fd,
                                                                             int done_fd,
                                                                             int revoke_fd) {
    int error = 0;
    void* p = MAP_FAILED;
    if (slot < 0 || slot >= npu_ring::kSlots) {
        error = EINVAL;
    } else if (npu_ring::shared().slots[slot].ring != nullptr) {
        error = EBUSY;
    } else {
        p = mmap(nullptr, NPU_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
        if (p == MAP_FAILED) {
            error = errno;
        } else {
            const auto* h = static_cast<const npu_ring_header*>(p);
            if (h->magic != NPU_RING_MAGIC || h->version != NPU_RING_VERSION) {
                munmap(p, NPU_RING_BYTES);
                error = EPROTO;
            }
        }
    }
    close(mem_fd);
    if (error != 0) {
        close(kick_fd);
        close(done_fd);
        close(revoke_fd);
        return -error;
    }
    npu_ring::Slot& s = npu_ring::shared().slots[slot];
    s = npu_ring::Slot{};
    s.ring = static_cast<uint8_t*>(p);
    s.kick_fd = kick_fd;
    s.done_fd = done_fd;
    s.revoke_fd = revoke_fd;
    return 0;
}

// Forget the ring of slot `slot` (for the lease's: the lease ended, the server revoked it).
extern "C" __attribute__((visibility("default"))) void npu_worker_ring_detach(int slot) {
    if (slot < 0 || slot >= npu_ring::kSlots) return;
    npu_ring::Slot& s = npu_ring::shared().slots[slot];
    if (s.ring == nullptr) return;
    munmap(s.ring, NPU_RING_BYTES);
    close(s.kick_fd);
    close(s.done_fd);
    close(s.revoke_fd);
    s = npu_ring::Slot{};
}

// Python's request loop has nothing to do: it waits for an edge of host_wake_i, which
// toggles when the IPC socket `ipc_fd` has something to read.
extern "C" __attribute__((visibility("default"))) void npu_worker_idle_begin(int ipc_fd) {
    npu_ring::shared().idle = true;
    npu_ring::shared().ipc_fd = ipc_fd;
}

// Whether a ring request runs (Python, woken for its pipe, may then answer the debugger
// only); and, when it keeps a message for later (`wake` 1), to be woken once none runs.
extern "C" __attribute__((visibility("default"))) int npu_worker_ring_inflight() {
    return npu_ring::shared().inflight ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) void npu_worker_idle_wake(int wake) {
    npu_ring::shared().wake_when_free = wake != 0;
}

// Taps on (`on` 1): every ring request is handed over to Python (see the top of this file).
extern "C" __attribute__((visibility("default"))) void npu_worker_ring_handover(int on) {
    npu_ring::shared().handover = on != 0;
}

// The ring request handed over, if one waits for Python's answer: 1 and `info` = (slot,
// kind, n_ops, max_cycles, wall_ms); its operations at npu_worker_ring_ops(). Else 0.
extern "C" __attribute__((visibility("default"))) int npu_worker_ring_pending(uint64_t* info) {
    const npu_ring::Shared& s = npu_ring::shared();
    if (!s.handed) return 0;
    info[0] = static_cast<uint64_t>(s.handed_slot);
    info[1] = s.handed_req.kind;
    info[2] = s.handed_req.kind == NPU_RING_KIND_BATCH ? s.handed_req.n_ops : 0;
    info[3] = s.handed_req.max_cycles;
    info[4] = s.handed_req.wall_ms;
    return 1;
}

extern "C" __attribute__((visibility("default"))) const void* npu_worker_ring_ops() {
    return npu_ring::shared().handed_ops.data();
}

// Python's answer to the request handed over: `n_results` REGBUS_RESULT records (a batch;
// at most the request's ops), or a wait's outcome; a status other than OK with `message`.
extern "C" __attribute__((visibility("default"))) void npu_worker_ring_respond(
    uint32_t status, uint32_t n_results, const char* results, uint32_t outcome, uint64_t waited,
    const char* message, uint64_t cycles) {
    npu_ring::Shared& s = npu_ring::shared();
    if (!s.handed) return;
    s.handed = false;
    const npu_ring::Slot& slot = s.slots[s.handed_slot];
    if (slot.ring == nullptr) return;  // detached meanwhile
    const uint32_t n = std::min<uint32_t>(n_results, static_cast<uint32_t>(s.handed_ops.size()));
    if (n != 0 && results != nullptr)
        std::memcpy(slot.at<npu_regbus_result>(NPU_RING_RESULTS_OFFSET), results,
                    n * sizeof(npu_regbus_result));
    npu_ring::write_response(slot, status, n, cycles, outcome, waited, message);
}

// Whether the server revoked the ring of `slot` (a request handed over stops then).
extern "C" __attribute__((visibility("default"))) int npu_worker_ring_revoked(int slot) {
    if (slot < 0 || slot >= npu_ring::kSlots || npu_ring::shared().slots[slot].ring == nullptr)
        return 1;
    return npu_ring::revoked_now(slot) ? 1 : 0;
}

#endif  // NPU_RING_SERVICE_H
