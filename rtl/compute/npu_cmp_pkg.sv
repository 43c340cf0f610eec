`default_nettype none

/// Types shared by the compute engine's blocks (`npu_cmp_*`).
package npu_cmp_pkg;
  import npu_isa_pkg::*;

  /// CORE_STATUS.ERR_UNIT: which part of the engine reported the error. 0..2 follow the
  /// ISA's `Unit` enum; 3 is the engine itself (fetch, decode of FINISH or of an undefined
  /// opcode, running past PROG_INSNS, watchdog without a waiting unit, abort).
  localparam logic [1:0] ErrUnitLoad    = 2'd0;
  localparam logic [1:0] ErrUnitCompute = 2'd1;
  localparam logic [1:0] ErrUnitStore   = 2'd2;
  localparam logic [1:0] ErrUnitEngine  = 2'd3;

  // The performance counters (npu_cmp_core perf_o, 64 bits each, cleared at START) are
  // numbered in npu_config_pkg (Perf*, NumPerf), generated from the PERF_* registers of
  // rtl/regs/npu.rdl: their meaning is documented there.

  /// One error report: the first one of a run is kept in the status.
  typedef struct packed {
    logic        valid;
    err_e        code;
    logic [1:0]  unit;
    logic [31:0] pc;    // index of the instruction
    logic [63:0] addr;  // memory address involved (0 when none)
  } err_rep_t;

  localparam err_rep_t NoErr = '{valid: 1'b0, code: ErrNone, unit: 2'd0, pc: 32'd0, addr: 64'd0};

  /// An instruction with its index, as the fetch unit hands it on.
  typedef struct packed {
    logic [31:0]  pc;
    logic [255:0] insn;
  } insn_pc_t;

  /// Requantization of docs/quantization.md 5.2: 48-bit product (computed in 64 bits,
  /// exact for every S up to 63), add half, arithmetic shift, clamp to [lo, hi].
  function automatic logic [7:0] requantize(logic signed [31:0] acc, logic signed [15:0] m,
                                            logic [5:0] s, logic signed [7:0] lo,
                                            logic signed [7:0] hi);
    logic signed [63:0] p, y;
    p = 64'(acc) * 64'(m);
    if (s != 6'd0) y = (p + (64'sd1 <<< (s - 6'd1))) >>> s;
    else y = p;
    if (y < 64'(lo)) return lo;
    if (y > 64'(hi)) return hi;
    return y[7:0];
  endfunction
endpackage

`default_nettype wire
