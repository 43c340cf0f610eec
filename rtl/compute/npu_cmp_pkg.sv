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

  /// Performance counters (npu_cmp_core perf_o), each 64 bits, cleared at START.
  localparam int unsigned PerfRunCycles    = 0;   // cycles from START to the end
  localparam int unsigned PerfBusyLoad     = 1;   // cycles the unit holds an instruction
  localparam int unsigned PerfBusyCompute  = 2;
  localparam int unsigned PerfBusyStore    = 3;
  localparam int unsigned PerfWaitLoad     = 4;   // of those, cycles waiting for a token
  localparam int unsigned PerfWaitCompute  = 5;
  localparam int unsigned PerfWaitStore    = 6;
  localparam int unsigned PerfGemmRows     = 7;   // MAC-array rows computed (B*B MACs each)
  localparam int unsigned PerfBytesRead    = 8;   // bytes LOAD read
  localparam int unsigned PerfBytesWritten = 9;   // bytes STORE wrote
  localparam int unsigned PerfRetiredLoad  = 10;  // instructions retired per unit
  localparam int unsigned PerfRetiredCompute = 11;
  localparam int unsigned PerfRetiredStore = 12;
  localparam int unsigned NumPerf          = 13;

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
