`default_nettype none

/// Decode, check and in-order dispatch. Each instruction is checked completely before it
/// is dispatched (docs/isa.md "Checked before it starts": reserved bits, enum values,
/// counts, token flags, bounds, alignment, memory windows for the BASE values of this
/// launch, buffer rows), so the units never see an illegal instruction and no burst of a
/// bad LOAD or STORE is ever issued. The first failing check stops dispatch and reports
/// the error with the instruction's index. FINISH waits until every unit is idle.
module npu_cmp_decode #(
  parameter int unsigned Block = 16,           /// B
  parameter int unsigned InpRows = 8192,       /// INP buffer rows
  parameter int unsigned WgtRows = 1024,       /// WGT buffer rows
  parameter int unsigned AccRows = 4096,       /// ACC buffer rows
  parameter int unsigned PrmRows = 256,        /// PRM buffer rows
  parameter int unsigned LutTables = 4,        /// 256-entry lookup tables
  parameter logic [63:0] Mem0Base = 64'h0,     /// memory window 0 base
  parameter logic [63:0] Mem0Size = 64'h0,     /// memory window 0 size (0 = absent)
  parameter logic [63:0] Mem1Base = 64'h0,     /// memory window 1 base
  parameter logic [63:0] Mem1Size = 64'h0,     /// memory window 1 size
  parameter logic [63:0] Mem2Base = 64'h0,     /// memory window 2 base
  parameter logic [63:0] Mem2Size = 64'h0      /// memory window 2 size
) (
  input  wire                   clk_i,          /// clock
  input  wire                   rst_ni,         /// asynchronous reset, active low
  input  wire                   start_i,        /// a program starts (one cycle)
  input  wire                   stop_i,         /// an error or abort: dispatch nothing more
  input  wire  [63:0]           prog_addr_i,    /// PROG_ADDR
  input  wire  [31:0]           prog_insns_i,   /// PROG_INSNS
  input  wire  [15:0][63:0]     base_i,         /// BASE[0..15]
  // From fetch.
  input  wire                   in_valid_i,
  input  npu_cmp_pkg::insn_pc_t in_data_i,
  input  wire  [1:0]            in_err_i,       /// fetch outcome (npu_cmp_fetch out_err_o)
  output logic                  in_ready_o,
  input  wire                   exhausted_i,    /// fetch handed on the whole program
  // To the unit queues (0 LOAD, 1 COMPUTE, 2 STORE).
  output logic [2:0]            q_valid_o,
  input  wire  [2:0]            q_ready_i,
  output npu_cmp_pkg::insn_pc_t q_data_o,
  input  wire                   idle_i,         /// every queue empty, every unit idle
  // Outcome.
  output logic                  finish_o,       /// FINISH reached with every unit idle (one cycle)
  output npu_cmp_pkg::err_rep_t err_o,          /// a check failed (valid while it holds)
  output logic                  finished_o,     /// FINISH was dispatched in this run
  output logic [31:0]           pc_o            /// index of the instruction in decode
);
  import npu_isa_pkg::*;
  import npu_cmp_pkg::*;

  localparam int unsigned LutRows = LutTables * 256 / Block;

  initial begin
    if (Block != 16) $fatal(1, "npu_cmp_decode: Block must be 16 (one bus beat), got %0d", Block);
  end

  // ---------------------------------------------------------------- checks
  function automatic logic in_mem(logic [64:0] lo, logic [64:0] hi);  // [lo, hi) in one window
    return (Mem0Size != 0 && lo >= 65'(Mem0Base) && hi <= 65'(Mem0Base) + 65'(Mem0Size))
        || (Mem1Size != 0 && lo >= 65'(Mem1Base) && hi <= 65'(Mem1Base) + 65'(Mem1Size))
        || (Mem2Size != 0 && lo >= 65'(Mem2Base) && hi <= 65'(Mem2Base) + 65'(Mem2Size));
  endfunction

  // Bytes spanned by a tile: first byte of the last element + element bytes.
  function automatic logic [64:0] span(logic [9:0] x, logic [9:0] y, logic [9:0] z,
                                       logic [15:0] xs, logic [27:0] ys, logic [27:0] zs,
                                       int unsigned elem);
    return 65'(x - 10'd1) * 65'(xs) + 65'(y - 10'd1) * 65'(ys) + 65'(z - 10'd1) * 65'(zs)
         + 65'(elem);
  endfunction

  function automatic int unsigned buffer_rows(buffer_e b);
    unique case (b)
      BufferInp: return InpRows;
      BufferWgt: return WgtRows;
      BufferAcc: return AccRows;
      BufferPrm: return PrmRows;
      default:   return LutRows;
    endcase
  endfunction

  // Rows reached by base + i0*s0 + i1*s1 + i2*s2 all lie in [0, rows).
  function automatic logic rows_ok(logic [15:0] base, logic [9:0] n0, logic [9:0] n1,
                                   logic [9:0] n2, logic [15:0] s0, logic [15:0] s1,
                                   logic [15:0] s2, int unsigned rows);
    logic signed [31:0] t0, t1, t2, lo, hi;
    t0 = $signed(32'(n0 - 10'd1)) * 32'($signed(s0));
    t1 = $signed(32'(n1 - 10'd1)) * 32'($signed(s1));
    t2 = $signed(32'(n2 - 10'd1)) * 32'($signed(s2));
    lo = $signed(32'(base)) + (t0 < 0 ? t0 : 0) + (t1 < 0 ? t1 : 0) + (t2 < 0 ? t2 : 0);
    hi = $signed(32'(base)) + (t0 > 0 ? t0 : 0) + (t1 > 0 ? t1 : 0) + (t2 > 0 ? t2 : 0);
    return lo >= 0 && hi < $signed(32'(rows));
  endfunction

  function automatic err_rep_t check(insn_pc_t e, logic [1:0] ferr, logic [15:0][63:0] bases);
    err_rep_t    r;
    load_insn_t  l;
    store_insn_t s;
    gemm_insn_t  g;
    vec_insn_t   v;
    sync_insn_t  y;
    logic [64:0] a;
    logic        undec, ill, mis, rng, buf_bad;
    int unsigned elem;
    r = NoErr;
    r.pc = e.pc;
    l = load_insn_t'(e.insn);
    s = store_insn_t'(e.insn);
    g = gemm_insn_t'(e.insn);
    v = vec_insn_t'(e.insn);
    y = sync_insn_t'(e.insn);
    {undec, ill, mis, rng, buf_bad} = '0;
    a = '0;
    if (ferr != 2'd0) begin
      r.valid = 1'b1;
      r.unit  = ErrUnitEngine;
      r.code  = ferr == 2'd2 ? ErrFetchSlverr : ErrFetchDecerr;
      r.addr  = prog_addr_i + 64'(e.pc) * 64'd32;
      return r;
    end
    unique case (opcode_e'(e.insn[3:0]))
      OpcodeLoad: begin
        r.unit = ErrUnitLoad;
        a = 65'(bases[l.base]) + 65'(l.offset);
        unique case (l.buffer)
          BufferWgt:            elem = Block * Block;
          BufferAcc, BufferPrm: elem = Block * 4;
          default:              elem = Block;
        endcase
        undec = (e.insn & LoadRsvdMask) != '0 || 32'(l.buffer) > 32'(BufferLut);
        ill = l.x_size == '0 || l.y_size == '0 || l.z_size == '0
           || (l.buffer != BufferInp
               && {l.pad_min, l.pad_top, l.pad_bottom, l.pad_left, l.pad_right} != '0)
           || l.pop_prev || l.push_prev;
        mis = a[3:0] != '0 || l.x_stride[3:0] != '0 || l.y_stride[3:0] != '0
           || l.z_stride[3:0] != '0;
        rng = !in_mem(a, a + span(l.x_size, l.y_size, l.z_size, l.x_stride, l.y_stride,
                                  l.z_stride, elem));
        buf_bad = 33'(l.sram) + 33'(l.z_size)
                  * (33'(l.pad_top) + 33'(l.y_size) + 33'(l.pad_bottom))
                  * (33'(l.pad_left) + 33'(l.x_size) + 33'(l.pad_right))
                  > 33'(buffer_rows(l.buffer));
      end
      OpcodeStore: begin
        r.unit = ErrUnitStore;
        a = 65'(bases[s.base]) + 65'(s.offset);
        elem = s.mode == StoreModeInt32 ? Block * 4 : Block;
        undec = (e.insn & StoreRsvdMask) != '0;
        ill = s.x_size == '0 || s.y_size == '0 || s.z_size == '0
           || s.lo > s.hi || s.shift > 6'd46 || (s.use_prm && s.shift != '0)
           || s.pop_next || s.push_next;
        mis = a[3:0] != '0 || s.x_stride[3:0] != '0 || s.y_stride[3:0] != '0
           || s.z_stride[3:0] != '0;
        rng = !in_mem(a, a + span(s.x_size, s.y_size, s.z_size, s.x_stride, s.y_stride,
                                  s.z_stride, elem));
        buf_bad = 34'(s.sram) + 34'(s.x_size - 10'd1) * 34'(s.sram_x_stride)
                  + 34'(s.y_size - 10'd1) * 34'(s.sram_y_stride)
                  + 34'(s.z_size - 10'd1) * 34'(s.sram_z_stride) >= 34'(AccRows)
               || (s.use_prm && 33'(s.m_or_prm) + 33'(s.z_size) > 33'(PrmRows));
      end
      OpcodeGemm: begin
        r.unit = ErrUnitCompute;
        undec = (e.insn & GemmRsvdMask) != '0 || g.init == 2'd3;
        ill = g.n0 == '0 || g.n1 == '0 || g.n2 == '0;
        buf_bad = !rows_ok(g.acc, g.n0, g.n1, g.n2, g.acc_s0, g.acc_s1, g.acc_s2, AccRows)
               || !rows_ok(g.inp, g.n0, g.n1, g.n2, g.inp_s0, g.inp_s1, g.inp_s2, InpRows)
               || !rows_ok(g.wgt, g.n0, g.n1, g.n2, g.wgt_s0, g.wgt_s1, g.wgt_s2, WgtRows)
               || (g.init == GemmInitBias && 32'(g.bias) >= AccRows);
      end
      OpcodeVec: begin
        r.unit = ErrUnitCompute;
        undec = (e.insn & VecRsvdMask) != '0 || 32'(v.func) > 32'(VecFuncLut);
        ill = v.n0 == '0 || v.n1 == '0 || (v.func == VecFuncLut && (v.a_acc || v.b_acc));
        buf_bad = (v.func == VecFuncLut && 32'(v.b) >= LutTables)
               || !rows_ok(v.dst, v.n0, v.n1, 10'd1, v.dst_s0, v.dst_s1, 16'd0, AccRows)
               || !rows_ok(v.a, v.n0, v.n1, 10'd1, v.a_s0, v.a_s1, 16'd0,
                           v.a_acc ? AccRows : InpRows)
               || (v.func != VecFuncMov && v.func != VecFuncLut
                   && !rows_ok(v.b, v.n0, v.n1, 10'd1, v.b_s0, v.b_s1, 16'd0,
                               v.b_acc ? AccRows : InpRows));
      end
      OpcodeSync: begin
        r.unit = y.unit == 2'd3 ? ErrUnitEngine : y.unit;
        undec = (e.insn & SyncRsvdMask) != '0 || y.unit == 2'd3;
        ill = (y.unit == UnitLoad && (y.pop_prev || y.push_prev))
           || (y.unit == UnitStore && (y.pop_next || y.push_next));
      end
      OpcodeFinish: begin
        r.unit = ErrUnitEngine;
        undec = (e.insn & FinishRsvdMask) != '0 || e.insn[7:4] != '0;
      end
      default: begin
        r.unit = ErrUnitEngine;
        undec = 1'b1;
      end
    endcase
    // An undecodable word (undefined opcode or enum value, reserved bit) and a FINISH with
    // a token flag are the fetch unit's errors (ERR_UNIT 3), as in the golden model.
    if (undec) begin
      r.valid = 1'b1;
      r.code  = ErrIllegalInstruction;
      r.unit  = ErrUnitEngine;
    end else if (ill) begin
      r.valid = 1'b1;
      r.code  = ErrIllegalInstruction;
    end else if (mis || rng) begin
      r.valid = 1'b1;
      r.code  = mis ? ErrMisaligned : ErrAddrRange;
      r.addr  = a[63:0];
    end else if (buf_bad) begin
      r.valid = 1'b1;
      r.code  = ErrBufferRange;
    end
    return r;
  endfunction

  // ---------------------------------------------------------------- stage
  logic      have_q, finished_q;
  insn_pc_t  cur_q;
  err_rep_t  chk_q;
  logic [1:0] unit;

  wire is_finish = opcode_e'(cur_q.insn[3:0]) == OpcodeFinish;
  always_comb begin
    unit = cur_q.insn[3:0] == OpcodeLoad ? 2'd0
         : cur_q.insn[3:0] == OpcodeStore ? 2'd2
         : cur_q.insn[3:0] == OpcodeSync ? cur_q.insn[9:8] : 2'd1;
  end

  wire go = have_q && !chk_q.valid && !stop_i;
  assign q_data_o  = cur_q;
  assign q_valid_o = (go && !is_finish) ? 3'(1 << unit) : 3'b000;
  wire dispatched  = go && !is_finish && q_ready_i[unit];
  assign finish_o  = go && is_finish && idle_i;
  assign in_ready_o = in_valid_i && !stop_i && !finished_q && (!have_q || dispatched);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      have_q     <= 1'b0;
      finished_q <= 1'b0;
      cur_q      <= '0;
      chk_q      <= NoErr;
    end else if (start_i) begin
      have_q     <= 1'b0;
      finished_q <= 1'b0;
      cur_q      <= '0;  // pc_o: 0 until the run's first instruction (not the last run's)
      chk_q      <= NoErr;
    end else begin
      if (dispatched || finish_o) have_q <= 1'b0;
      if (finish_o) finished_q <= 1'b1;
      if (in_ready_o) begin
        have_q <= 1'b1;
        cur_q  <= in_data_i;
        chk_q  <= check(in_data_i, in_err_i, base_i);
      end
    end
  end

  // Errors found without an instruction: a misaligned program, or the end of the program
  // reached without FINISH.
  always_comb begin
    err_o = NoErr;
    if (have_q && chk_q.valid) begin
      err_o = chk_q;
    end else if (prog_addr_i[4:0] != '0) begin
      err_o = '{valid: 1'b1, code: ErrMisaligned, unit: ErrUnitEngine, pc: 32'd0,
                addr: prog_addr_i};
    end else if (!have_q && !finished_q && exhausted_i) begin
      err_o = '{valid: 1'b1, code: ErrIllegalInstruction, unit: ErrUnitEngine,
                pc: prog_insns_i, addr: 64'd0};
    end
  end

  assign finished_o = finished_q;
  assign pc_o = cur_q.pc;
endmodule

`default_nettype wire
