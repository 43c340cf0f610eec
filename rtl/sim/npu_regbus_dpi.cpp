// Command queue of the register bus master (npu_regbus_master.sv): the harness hands a
// whole batch of register operations over in one call (Python, through ctypes, in the
// simulator's own process), the SystemVerilog master takes them one by one and reports
// each result here, and the harness collects all results once the master's busy line
// falls. No Python runs between bus transactions.
//
// The simulator is single-threaded and Python only touches the queue while simulated time
// stands still (between triggers), so no locking is needed. The Python entry points are
// exported from the executable (-Wl,--export-dynamic-symbol=npu_regbus_*, see build.py).

#include <cstdint>
#include <cstring>
#include <vector>

#include "npu_ring_abi.h"  // npu_regbus_op, npu_regbus_result (generated from xrt.hw.ring)
#include "svdpi.h"

namespace {

using RegbusOp = npu_regbus_op;
using RegbusResult = npu_regbus_result;

struct Queue {
    std::vector<RegbusOp> ops;
    std::vector<RegbusResult> results;
    size_t next = 0;
    bool stopped = false;    // a failed result ends the batch
    bool cancelled = false;  // the harness gave up on the batch: end it soon
};

Queue q;

}  // namespace

// ---------------------------------------------------------------- Python side
extern "C" __attribute__((visibility("default"))) int npu_regbus_submit(const RegbusOp* ops,
                                                                         uint32_t n) {
    if (q.next < q.ops.size() && !q.stopped) return -1;  // a batch is still running
    q.ops.assign(ops, ops + n);
    q.results.clear();
    q.results.reserve(n);
    q.next = 0;
    q.stopped = false;
    q.cancelled = false;
    return 0;
}

// The harness's caller went away: hand out no more operations, and let a poll in progress
// give up at its next read (the master then drops its busy line soon).
extern "C" __attribute__((visibility("default"))) void npu_regbus_cancel() {
    q.stopped = true;
    q.cancelled = true;
}

// Copy up to `cap` results of the last batch into `out`; return how many there are.
extern "C" __attribute__((visibility("default"))) uint32_t npu_regbus_collect(RegbusResult* out,
                                                                               uint32_t cap) {
    const size_t n = q.results.size() < cap ? q.results.size() : cap;
    if (n) std::memcpy(out, q.results.data(), n * sizeof(RegbusResult));
    return static_cast<uint32_t>(q.results.size());
}

// ---------------------------------------------------------------- SystemVerilog side
extern "C" svBit npu_regbus_next(unsigned int* kind, unsigned int* addr, unsigned int* value,
                                 unsigned int* mask, unsigned int* expected,
                                 unsigned long long* max_cycles) {
    if (q.stopped || q.next >= q.ops.size()) return 0;
    const RegbusOp& op = q.ops[q.next++];
    *kind = op.kind;
    *addr = op.addr;
    *value = op.value;
    *mask = op.mask;
    *expected = op.expected;
    *max_cycles = op.max_cycles;
    return 1;
}

extern "C" svBit npu_regbus_cancelled() { return q.cancelled ? 1 : 0; }

extern "C" void npu_regbus_done(unsigned int status, unsigned int value,
                                unsigned long long cycles, svBit failed) {
    q.results.push_back(RegbusResult{status, value, cycles});
    if (failed) q.stopped = true;
}
