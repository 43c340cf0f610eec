// Lockstep trace buffer (docs/verification.md "Lockstep"): the DPI-C side of
// rtl/sim/npu_cmp_lockstep.sv. The RTL calls in once per launch start and end, per retired
// instruction and per AXI address, data beat and write response of the compute engine's
// master; this file turns those into three flat record arrays that Python
// (npuemu.sim.lockstep) copies out in one call per launch (ctypes), so no Python runs per
// cycle, beat or instruction. Read beats are kept only for the first read of each 16-byte
// granule in a launch (the golden model needs each byte's value before the launch wrote
// it; later reads of a granule the launch did not write carry nothing new) and for every
// beat answered with an error.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <deque>
#include <unordered_set>
#include <vector>
#include "svdpi.h"

namespace {

enum EventKind : uint32_t { kStart = 1, kRetire = 2, kEnd = 3, kWiped = 4 };
enum BeatKind : uint32_t { kRead = 0, kWrite = 1, kWriteResp = 2 };

// Layouts mirrored by numpy dtypes in emulator/npuemu/sim/lockstep.py.
struct Event {
    uint32_t kind;   // EventKind
    uint32_t unit;   // kRetire, kEnd: the unit (kEnd: 3 = engine)
    uint32_t pc;     // kRetire: the instruction index; kEnd: the error's; kStart: PROG_INSNS
    uint32_t code;   // kEnd: the error code (0: none); kStart: the launch's index
    uint64_t cycle;  // the engine's clock cycle
    uint64_t addr;   // kStart: PROG_ADDR
    uint64_t mark;   // beats recorded before this event (orders events and beats)
};
struct Beat {
    uint64_t addr;     // the beat's address (kWriteResp: the burst's first)
    uint32_t pc;       // kWrite, kWriteResp: the STORE's index
    uint16_t strb;     // kWrite: byte strobes; kWriteResp: the burst's beats
    uint8_t kind;      // BeatKind
    uint8_t resp;      // AXI response (kRead, kWriteResp)
    uint8_t data[16];  // kRead, kWrite
};
static_assert(sizeof(Event) == 40 && sizeof(Beat) == 32, "records must match lockstep.py");

struct Burst {
    uint64_t addr;
    uint32_t beats;
};

struct Trace {
    bool enabled = false;
    std::vector<Event> events;
    std::vector<Beat> beats;
    std::vector<uint64_t> bases;           // 16 per kStart event
    std::deque<Burst> reads[2];            // per read ID bit 0: fetch, LOAD
    std::deque<Burst> writes, responses;   // AW bursts awaiting W beats, then their B
    std::deque<Beat> early;                // W beats ahead of their AW (AXI allows it)
    std::unordered_set<uint64_t> seen;     // granules read this launch
    uint32_t launches = 0;
    uint64_t ends = 0;                     // kEnd events buffered
};

Trace& trace() {
    static Trace t;
    return t;
}

}  // namespace

// A device server's worker is told by its configuration (npu_sim_main.cpp's hand-out,
// npuemu.worker.config: a "lockstep=1" line); a test run of a model by NPU_EMU_LOCKSTEP.
extern "C" const char* npu_worker_config() __attribute__((weak));

extern "C" {

svBit npu_ls_enabled() {
    const char* config = npu_worker_config ? npu_worker_config() : nullptr;
    if (config != nullptr && config[0] != '\0') {
        const std::string text = std::string("\n") + config + "\n";
        trace().enabled = text.find("\nlockstep=1\n") != std::string::npos;
    } else {
        const char* v = std::getenv("NPU_EMU_LOCKSTEP");
        trace().enabled = v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
    }
    return trace().enabled ? 1 : 0;
}

void npu_ls_start(unsigned long long prog_addr, unsigned insns, const svBitVecVal* bases,
                  unsigned long long cycle) {
    Trace& t = trace();
    t.events.push_back({kStart, 0, insns, t.launches++, cycle, prog_addr, t.beats.size()});
    const auto* b = reinterpret_cast<const uint64_t*>(bases);
    t.bases.insert(t.bases.end(), b, b + 16);
    for (auto& q : t.reads) q.clear();
    t.writes.clear();
    t.responses.clear();
    t.early.clear();
    t.seen.clear();
}

void npu_ls_retire(unsigned unit, unsigned pc, unsigned long long cycle) {
    trace().events.push_back({kRetire, unit, pc, 0, cycle, 0, trace().beats.size()});
}

void npu_ls_ar(unsigned id, unsigned long long addr, unsigned len) {
    trace().reads[id & 1].push_back({addr, len + 1});
}

void npu_ls_r(unsigned id, const svBitVecVal* data, unsigned resp) {
    Trace& t = trace();
    auto& q = t.reads[id & 1];
    if (q.empty()) return;  // a beat without its address: the comparison will miss it
    Burst& b = q.front();
    uint64_t addr = b.addr;
    b.addr += 16;
    if (--b.beats == 0) q.pop_front();
    if (resp == 0 && !t.seen.insert(addr).second) return;
    Beat beat{addr, 0, 0, kRead, static_cast<uint8_t>(resp), {}};
    std::memcpy(beat.data, data, 16);
    t.beats.push_back(beat);
}

// The next W beat's address, from the oldest AW burst not yet filled.
static void place(Trace& t, Beat beat) {
    Burst& b = t.writes.front();
    beat.addr = b.addr;
    t.beats.push_back(beat);
    b.addr += 16;
    if (--b.beats == 0) t.writes.pop_front();
}

void npu_ls_aw(unsigned long long addr, unsigned len) {
    Trace& t = trace();
    t.writes.push_back({addr, len + 1});
    t.responses.push_back({addr, len + 1});
    while (!t.early.empty() && !t.writes.empty()) {
        place(t, t.early.front());
        t.early.pop_front();
    }
}

void npu_ls_w(unsigned pc, const svBitVecVal* data, unsigned strb) {
    Trace& t = trace();
    Beat beat{0, pc, static_cast<uint16_t>(strb), kWrite, 0, {}};
    std::memcpy(beat.data, data, 16);
    if (t.writes.empty() || !t.early.empty())
        t.early.push_back(beat);
    else
        place(t, beat);
}

void npu_ls_b(unsigned pc, unsigned resp) {
    Trace& t = trace();
    if (t.responses.empty()) return;
    Burst b = t.responses.front();
    t.responses.pop_front();
    if (resp != 0)
        t.beats.push_back({b.addr, pc, static_cast<uint16_t>(b.beats), kWriteResp,
                           static_cast<uint8_t>(resp), {}});
}

void npu_ls_end(unsigned err, unsigned code, unsigned unit, unsigned pc,
                unsigned long long cycle) {
    ++trace().ends;
    trace().events.push_back({kEnd, unit, pc, err ? code : 0u, cycle, 0, trace().beats.size()});
}

void npu_ls_wiped() { trace().events.push_back({kWiped, 0, 0, 0, 0, 0, trace().beats.size()}); }

// Python's side (ctypes): sizes (events, beats, base words, launch ends), then one copy of
// everything, which empties the buffers.
// Whether the trace records: the RTL asks once at time zero, Python may ask before that.
__attribute__((visibility("default"))) int npu_ls_on() { return npu_ls_enabled(); }

__attribute__((visibility("default"))) void npu_ls_sizes(uint64_t* out) {
    out[0] = trace().events.size();
    out[1] = trace().beats.size();
    out[2] = trace().bases.size();
    out[3] = trace().ends;
}

__attribute__((visibility("default"))) void npu_ls_take(void* events, void* beats,
                                                        void* bases) {
    Trace& t = trace();
    std::memcpy(events, t.events.data(), t.events.size() * sizeof(Event));
    std::memcpy(beats, t.beats.data(), t.beats.size() * sizeof(Beat));
    std::memcpy(bases, t.bases.data(), t.bases.size() * sizeof(uint64_t));
    t.events.clear();
    t.beats.clear();
    t.bases.clear();
    t.ends = 0;
}

}  // extern "C"
