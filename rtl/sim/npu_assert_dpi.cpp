// Failed assertions (rtl/include/npu_assert.svh calls npu_assert_fail through
// rtl/common/npu_assert_pkg.sv): each is recorded here, the first kMaxRecords in full, so
// that the device worker (npuemu.worker) can fail the request that caused it with the
// assertion's name and cycle, and tests can see which assertion fired
// (npuemu.sim.assertions reads them through ctypes: the npu_worker_* symbols are exported).

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "svdpi.h"
#include "verilated.h"

namespace {

struct Record {
    std::string name, scope, message;
    uint64_t time_ps;
};

constexpr size_t kMaxRecords = 64;
std::vector<Record> g_records;
uint64_t g_count = 0;     // every failure since the last clear, recorded or not
uint64_t g_reported = 0;  // of which a request's reply already named (the ring service's)
std::string g_text;    // the text npu_worker_assert_record returned last

}  // namespace

extern "C" void npu_assert_fail(const char* name, const char* scope, const char* msg,
                                uint64_t time_ps) {
    ++g_count;
    if (g_records.size() < kMaxRecords)
        g_records.push_back(Record{name ? name : "", scope ? scope : "", msg ? msg : "", time_ps});
}

// Failures since the last clear.
extern "C" __attribute__((visibility("default"))) uint64_t npu_worker_assert_count() {
    return g_count;
}

// Record `i` (0 = the first failure) as "time_ps\tname\tscope\tmessage"; nullptr past the
// recorded ones. Valid until the next call.
extern "C" __attribute__((visibility("default"))) const char* npu_worker_assert_record(
    uint64_t i) {
    if (i >= g_records.size()) return nullptr;
    const Record& r = g_records[i];
    g_text = std::to_string(r.time_ps) + "\t" + r.name + "\t" + r.scope + "\t" + r.message;
    return g_text.c_str();
}

// Failures no reply has named yet.
extern "C" __attribute__((visibility("default"))) uint64_t npu_worker_assert_unreported() {
    return g_count - g_reported;
}

// Every failure so far has been named in a reply (the device still needs its reset).
extern "C" __attribute__((visibility("default"))) void npu_worker_assert_mark_reported() {
    g_reported = g_count;
}

// Forget every failure (a device reset, a new lease), Verilator's error count too: failures
// handled as device errors do not make the simulator's exit status a failure.
extern "C" __attribute__((visibility("default"))) void npu_worker_assert_clear() {
    g_records.clear();
    g_count = 0;
    g_reported = 0;
    Verilated::threadContextp()->errorCount(0);
    Verilated::threadContextp()->gotError(false);
}

// The first failure not yet reported, as one line for a reply (at most `size` bytes with
// its terminator), cycles counted with `period_ps`; false when there is none.
extern "C" bool npu_assert_describe_unreported(char* out, size_t size, uint64_t period_ps) {
    if (g_count == g_reported || size == 0) return false;
    const size_t first = g_reported < g_records.size() ? g_reported : g_records.size() - 1;
    const Record& r = g_records[first];
    const uint64_t more = g_count - g_reported - 1;
    std::snprintf(out, size, "assertion %s failed at cycle %llu (%s): %s%s", r.name.c_str(),
                  static_cast<unsigned long long>(r.time_ps / (period_ps ? period_ps : 1)),
                  r.scope.c_str(), r.message.c_str(),
                  more ? " (and more failures after it)" : "");
    return true;
}
