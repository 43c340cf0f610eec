`default_nettype none

/// COMPUTE unit: GEMM (the B x B int8 MAC array) and VEC (lane-wise int32 functions), one
/// accumulator row per cycle, in a three-stage pipeline:
///
///   S0  loop counters and row addresses; buffer reads issued (registered reads)
///   S1  read data (forwarded, see below) -> MAC row or vector function
///   S2  result written into ACC
///
/// Iterations are sequential (docs/isa.md): an iteration reading an ACC row that one of
/// the two iterations before it writes gets the result forwarded: the one in S2 while this
/// one is in S1, and the one that was writing at the edge of this one's read.
/// The 256-entry lookup tables live here as bytes (one lookup per lane per cycle); LOAD
/// writes them row by row.
module npu_cmp_compute #(
  parameter int unsigned Block = 16,       /// B
  parameter int unsigned LutTables = 4,    /// 256-entry tables
  localparam int unsigned InpWidth = Block * 8,
  localparam int unsigned WgtWidth = Block * Block * 8,
  localparam int unsigned AccWidth = Block * 32
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  clear_i,        /// abandon everything (engine idle)
  input  wire                  stop_i,         /// issue nothing new (error or abort)
  input  wire                  start_i,        /// run `insn_i` (one cycle)
  input  wire  [255:0]         insn_i,         /// a GEMM or VEC
  output logic                 done_o,         /// the started instruction wrote every row
  // Buffer reads (registered in the buffers: data the cycle after).
  output logic [1:0]           inp_re_o,
  output logic [1:0][15:0]     inp_raddr_o,
  input  wire  [1:0][InpWidth-1:0] inp_rdata_i,
  output logic                 wgt_re_o,
  output logic [15:0]          wgt_raddr_o,
  input  wire  [WgtWidth-1:0]  wgt_rdata_i,
  output logic [1:0]           acc_re_o,
  output logic [1:0][15:0]     acc_raddr_o,
  input  wire  [1:0][AccWidth-1:0] acc_rdata_i,
  // ACC write.
  output logic                 acc_we_o,
  output logic [15:0]          acc_waddr_o,
  output logic [AccWidth-1:0]  acc_wdata_o,
  // LUT rows from LOAD (row r holds entries r*B .. r*B+B-1).
  input  wire                  lut_we_i,
  input  wire  [15:0]          lut_row_i,
  input  wire  [InpWidth-1:0]  lut_wdata_i,
  input  wire                  lut_wipe_i,     /// zero LUT row `lut_wipe_row_i` (npu_cmp_core's wipe)
  input  wire  [16:0]          lut_wipe_row_i, /// ... this row (past the last row: none)
  // Status.
  output logic                 gemm_row_o      /// a MAC-array row was computed this cycle
);
  import npu_isa_pkg::*;

  initial begin
    if (Block % 8 != 0) $fatal(1, "npu_cmp_compute: Block must be a multiple of 8, got %0d", Block);
  end

  localparam int unsigned LutEntries = LutTables * 256;
  localparam int unsigned LutAddrWidth = $clog2(LutEntries);

  gemm_insn_t g;
  vec_insn_t  v;
  assign g = gemm_insn_t'(insn_i);
  assign v = vec_insn_t'(insn_i);

  // ---------------------------------------------------------------- S0: loops
  // Three address streams: GEMM (acc, inp, wgt), VEC (dst, a, b). p0 is the current row,
  // p1 the row at the start of the current middle-loop pass, p2 of the outer-loop pass.
  logic        s0_active_q, is_gemm_q;
  logic [9:0]  i0_q, i1_q, i2_q, n0_q, n1_q, n2_q;
  logic [2:0][15:0] p0_q, p1_q, p2_q, s0_q, s1_q, s2_q;
  gemminit_e   init_q;
  logic [15:0] bias_q, b_base_q;
  vecfunc_e    func_q;
  logic        a_acc_q, b_acc_q;
  logic [15:0] ma_q, mb_q;

  wire issue = s0_active_q && !stop_i;
  wire last0 = i0_q + 10'd1 == n0_q;
  wire last1 = i1_q + 10'd1 == n1_q;
  wire last2 = i2_q + 10'd1 == n2_q;

  // What S0 reads this cycle.
  logic             g_zero, g_bias;
  logic [1:0]       acc_use;   // ACC read ports in use (for forwarding)
  logic             b_used;
  always_comb begin
    g_zero = is_gemm_q && i2_q == '0 && init_q == GemmInitZero;
    g_bias = is_gemm_q && i2_q == '0 && init_q == GemmInitBias;
    b_used = func_q != VecFuncMov && func_q != VecFuncLut;
    inp_re_o    = '0;
    acc_re_o    = '0;
    wgt_re_o    = 1'b0;
    inp_raddr_o = {p0_q[2], p0_q[1]};
    wgt_raddr_o = p0_q[2];
    acc_raddr_o = {p0_q[2], g_bias ? bias_q : (is_gemm_q ? p0_q[0] : p0_q[1])};
    if (issue) begin
      if (is_gemm_q) begin
        inp_re_o[0] = 1'b1;
        inp_raddr_o[0] = p0_q[1];
        wgt_re_o = 1'b1;
        acc_re_o[0] = !g_zero;
      end else begin
        acc_re_o[0] = a_acc_q;
        inp_re_o[0] = !a_acc_q;
        inp_raddr_o[0] = p0_q[1];
        acc_re_o[1] = b_used && b_acc_q;
        inp_re_o[1] = b_used && !b_acc_q;
      end
    end
    acc_use = acc_re_o;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s0_active_q <= 1'b0;
      is_gemm_q   <= 1'b0;
      {i0_q, i1_q, i2_q, n0_q, n1_q, n2_q} <= '0;
      {p0_q, p1_q, p2_q, s0_q, s1_q, s2_q} <= '0;
      init_q <= GemmInitAcc;
      func_q <= VecFuncMov;
      {bias_q, b_base_q, ma_q, mb_q} <= '0;
      {a_acc_q, b_acc_q} <= '0;
    end else if (clear_i) begin
      s0_active_q <= 1'b0;
    end else if (start_i) begin
      s0_active_q <= 1'b1;
      {i0_q, i1_q, i2_q} <= '0;
      if (opcode_e'(insn_i[3:0]) == OpcodeGemm) begin
        is_gemm_q <= 1'b1;
        {n0_q, n1_q, n2_q} <= {g.n0, g.n1, g.n2};
        p0_q <= {g.wgt, g.inp, g.acc};
        p1_q <= {g.wgt, g.inp, g.acc};
        p2_q <= {g.wgt, g.inp, g.acc};
        s0_q <= {g.wgt_s0, g.inp_s0, g.acc_s0};
        s1_q <= {g.wgt_s1, g.inp_s1, g.acc_s1};
        s2_q <= {g.wgt_s2, g.inp_s2, g.acc_s2};
        init_q <= g.init;
        bias_q <= g.bias;
      end else begin
        is_gemm_q <= 1'b0;
        {n0_q, n1_q, n2_q} <= {v.n0, v.n1, 10'd1};
        p0_q <= {v.b, v.a, v.dst};
        p1_q <= {v.b, v.a, v.dst};
        p2_q <= {v.b, v.a, v.dst};
        s0_q <= {v.b_s0, v.a_s0, v.dst_s0};
        s1_q <= {v.b_s1, v.a_s1, v.dst_s1};
        s2_q <= '0;
        func_q  <= v.func;
        a_acc_q <= v.a_acc;
        b_acc_q <= v.b_acc;
        ma_q    <= v.ma;
        mb_q    <= v.mb;
        b_base_q <= v.b;
      end
    end else if (issue) begin
      if (!last0) begin
        i0_q <= i0_q + 10'd1;
        for (int k = 0; k < 3; k++) p0_q[k] <= p0_q[k] + s0_q[k];
      end else if (!last1) begin
        i0_q <= '0;
        i1_q <= i1_q + 10'd1;
        for (int k = 0; k < 3; k++) begin
          p1_q[k] <= p1_q[k] + s1_q[k];
          p0_q[k] <= p1_q[k] + s1_q[k];
        end
      end else if (!last2) begin
        i0_q <= '0;
        i1_q <= '0;
        i2_q <= i2_q + 10'd1;
        for (int k = 0; k < 3; k++) begin
          p2_q[k] <= p2_q[k] + s2_q[k];
          p1_q[k] <= p2_q[k] + s2_q[k];
          p0_q[k] <= p2_q[k] + s2_q[k];
        end
      end else begin
        s0_active_q <= 1'b0;
      end
    end
  end

  // ---------------------------------------------------------------- S1: compute
  logic             s1_valid_q, s1_gemm_q, s1_zero_q;
  logic [15:0]      s1_dst_q;
  logic [1:0][15:0] s1_row_q;          // ACC rows read by ports 0/1
  logic [1:0]       s1_use_q;
  logic [1:0]       fwd_hit_q;         // the row was being written at the read's edge
  logic [AccWidth-1:0] fwd_val_q;      // what was written at that edge
  logic             s2_valid_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s1_valid_q <= 1'b0;
      {s1_gemm_q, s1_zero_q} <= '0;
      s1_dst_q   <= '0;
      s1_row_q   <= '0;
      s1_use_q   <= '0;
      fwd_hit_q  <= '0;
    end else begin
      s1_valid_q <= issue && !clear_i;
      if (issue) begin
        s1_gemm_q <= is_gemm_q;
        s1_zero_q <= g_zero;
        s1_dst_q  <= p0_q[0];
        s1_row_q  <= acc_raddr_o;
        s1_use_q  <= acc_use;
        for (int p = 0; p < 2; p++) fwd_hit_q[p] <= s2_valid_q && acc_waddr_o == acc_raddr_o[p];
      end
    end
  end
  always_ff @(posedge clk_i) begin
    if (issue) fwd_val_q <= acc_wdata_o;
  end

  // The S1 -> S2 datapath is written lane by lane over 32-bit values, reading the module's
  // signals directly (no wide function arguments or results): Verilator then emits word
  // operations and no copies of 2048-bit rows per cycle.
  logic [7:0] lut_q [LutEntries];

  // The two ACC operands after forwarding, newest writer first: the row S2 writes now,
  // the row written at the edge of the read, the buffer's read data.
  logic [1:0] use_s2;
  always_comb begin
    for (int p = 0; p < 2; p++) use_s2[p] = s2_valid_q && acc_waddr_o == s1_row_q[p];
  end

  function automatic logic signed [31:0] acc_lane(int p, int l);
    if (use_s2[p]) return $signed(acc_wdata_o[l*32 +: 32]);
    if (fwd_hit_q[p]) return $signed(fwd_val_q[l*32 +: 32]);
    return $signed(acc_rdata_i[p][l*32 +: 32]);
  endfunction

  // An int8 lane as a 32-bit two's-complement word: (b ^ 0x80) - 128 is two word
  // operations; Verilator's signed extension of a part-select takes about seven.
  function automatic logic [31:0] sext8(logic [7:0] b);
    return 32'(b ^ 8'h80) - 32'd128;
  endfunction

  // The same as a 64-bit word.
  function automatic logic [63:0] sext64(logic [7:0] b);
    return 64'(b ^ 8'h80) - 64'd128;
  endfunction

  function automatic logic signed [31:0] inp_byte(int p, int i);
    return $signed(sext8(inp_rdata_i[p][i*8 +: 8]));
  endfunction

  // Lane l of a vector function.
  function automatic logic signed [31:0] vec_lane(int l);
    logic signed [31:0] x, y;
    logic [LutAddrWidth-1:0] idx;
    x = a_acc_q ? acc_lane(0, l) : inp_byte(0, l);
    y = b_acc_q ? acc_lane(1, l) : inp_byte(1, l);
    idx = LutAddrWidth'({b_base_q, 8'(inp_rdata_i[0][l*8 +: 8] ^ 8'h80)});
    unique case (func_q)
      VecFuncMov:  return x;
      VecFuncAdd:  return x + y;
      VecFuncMul:  return x * y;
      VecFuncMax:  return x > y ? x : y;
      VecFuncMin:  return x < y ? x : y;
      VecFuncQadd: return x * 32'($signed(ma_q)) + y * 32'($signed(mb_q));
      VecFuncLut:  return 32'($signed(lut_q[idx]));
      default:     return '0;
    endcase
  endfunction

  // ---------------------------------------------------------------- S2: write
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      s2_valid_q  <= 1'b0;
      acc_waddr_o <= '0;
    end else begin
      s2_valid_q <= s1_valid_q && !clear_i;
      if (s1_valid_q) acc_waddr_o <= s1_dst_q;
    end
  end
  always_ff @(posedge clk_i) begin
    if (s1_valid_q) begin
      if (s1_gemm_q) begin : mac_row
        // The MAC row, two products per 64-bit multiply. With the weights as unsigned
        // bytes u = w + 128 (w ^ 0x80), sum_i x_i * w_i = sum_i x_i * u_i - 128 * sum_i x_i,
        // and the last term is the same for every output lane. Eight weights of one lane
        // are one 64-bit word; shifted by 8j and masked with 0x000000FF_000000FF it holds
        // u_j and u_(j+4) 32 bits apart, and times X_j = x_(j+4) + x_j * 2^32 (the inputs,
        // packed once per row) it adds x_j * u_j + x_(j+4) * u_(j+4) to the upper word,
        // mod 2^64. The lower word collects the cross terms x_(j+4) * u_j, whose sum over
        // the row stays under 2^18 in magnitude: started at 2^31, it never carries into
        // or borrows from the upper word, which ends as start - 128 * sum_i x_i +
        // sum_i x_i * w_i, mod 2^32: the lane's result, bit for bit.
        logic [63:0] xpack [Block/2];
        logic [31:0] xsum;
        logic [63:0] wq, t;
        xsum = '0;
        for (int h = 0; h < Block / 8; h++) begin
          for (int j = 0; j < 4; j++) begin
            xpack[h*4 + j] = (64'(sext8(inp_rdata_i[0][(h*8 + j)*8 +: 8])) << 32)
                           + sext64(inp_rdata_i[0][(h*8 + j + 4)*8 +: 8]);
          end
        end
        for (int i = 0; i < Block; i++) xsum = xsum + sext8(inp_rdata_i[0][i*8 +: 8]);
        for (int o = 0; o < Block; o++) begin
          t = {(s1_zero_q ? 32'd0 : acc_lane(0, o)) - (xsum << 7), 32'h8000_0000};
          for (int h = 0; h < Block / 8; h++) begin
            wq = wgt_rdata_i[(o*Block + h*8)*8 +: 64] ^ 64'h8080_8080_8080_8080;
            for (int j = 0; j < 4; j++) begin
              t = t + ((wq >> (8*j)) & 64'h0000_00FF_0000_00FF) * xpack[h*4 + j];
            end
          end
          acc_wdata_o[o*32 +: 32] <= t[63:32];
        end
      end else begin
        for (int l = 0; l < Block; l++) acc_wdata_o[l*32 +: 32] <= vec_lane(l);
      end
    end
  end
  assign acc_we_o = s2_valid_q;

  always_ff @(posedge clk_i) begin
    if (lut_we_i) begin
      for (int l = 0; l < Block; l++) lut_q[LutAddrWidth'(32'(lut_row_i) * Block + l)] <= lut_wdata_i[l*8 +: 8];
    end
    if (lut_wipe_i && 32'(lut_wipe_row_i) < LutEntries / Block) begin
      for (int l = 0; l < Block; l++) lut_q[LutAddrWidth'(32'(lut_wipe_row_i) * Block + l)] <= 8'd0;
    end
  end

  assign gemm_row_o = s1_valid_q && s1_gemm_q;
  assign done_o = !s0_active_q && !s1_valid_q && !s2_valid_q;

  logic unused;
  assign unused = ^{s1_use_q, g.opcode, v.opcode};
endmodule

`default_nettype wire
