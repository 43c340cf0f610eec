`default_nettype none

/// STORE unit: reads accumulator rows in tile order, requantizes them (docs/quantization.md
/// 5.2; per-lane M and S from PRM rows or one immediate pair) or passes the int32 lanes
/// through, and writes the tile with AXI4 INCR bursts (`npu_cmp_walker` cuts them).
///
///   data path: S0 ACC/PRM read -> S1 requantize -> S2 element FIFO -> W beats
///   address path: walker -> AW, burst lengths to the W side
///
/// W beats are sent only for bursts already requested on AW, so after `stop_i` (no new AW)
/// the bursts in flight still complete; `drained_o` says when they have.
module npu_cmp_store #(
  parameter int unsigned Block = 16,           /// B (= bytes per data beat)
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// write bursts in flight
  parameter int unsigned Id = 0,               /// AXI ID of its bursts
  parameter type aw_chan_t = logic,            /// AXI4 AW payload (npu_axi_typedef.svh)
  parameter type w_chan_t = logic,             /// AXI4 W payload
  parameter type b_chan_t = logic,             /// AXI4 B payload
  localparam int unsigned DataWidth = Block * 8,
  localparam int unsigned AccWidth = Block * 32
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  clear_i,        /// abandon everything (engine idle)
  input  wire                  stop_i,         /// issue nothing new (error or abort)
  input  wire                  start_i,        /// run `insn_i` (one cycle)
  input  npu_isa_pkg::store_insn_t insn_i,     /// the STORE
  input  wire  [63:0]          addr_i,         /// BASE[base] + offset of `insn_i`
  output logic                 done_o,         /// every write response of it received
  // Buffer reads (registered: data the cycle after).
  output logic                 acc_re_o,
  output logic [15:0]          acc_raddr_o,
  input  wire  [AccWidth-1:0]  acc_rdata_i,
  output logic                 prm_re_o,
  output logic [15:0]          prm_raddr_o,
  input  wire  [AccWidth-1:0]  prm_rdata_i,
  // AXI4 write channels: full-width INCR bursts, every byte written.
  output aw_chan_t             aw_o,
  output logic                 aw_valid_o,
  input  wire                  aw_ready_i,
  output w_chan_t              w_o,
  output logic                 w_valid_o,
  input  wire                  w_ready_i,
  input  b_chan_t              b_i,
  input  wire                  b_valid_i,
  output logic                 b_ready_o,
  // Errors and status.
  output logic                 err_o,          /// a write response was an error (one cycle)
  output npu_isa_pkg::err_e    err_code_o,     /// STORE_SLVERR or STORE_DECERR
  output logic [63:0]          err_addr_o,     /// address of the failing burst
  output logic                 drained_o       /// no burst requested or in flight
);
  import npu_isa_pkg::*;
  import npu_cmp_pkg::requantize;

  localparam int unsigned OutWidth = $clog2(MaxOutstanding + 1);
  localparam int unsigned ElemDepth = 8;

  store_insn_t s_q;   // the running STORE

  // ---------------------------------------------------------------- address path
  logic                 w_valid, w_active;
  logic [AddrWidth-1:0] w_addr;
  logic [8:0]           w_beats;
  logic [OutWidth-1:0]  outstanding_q;   // AW requested, B not yet received
  logic [AddrWidth-1:0] aw_addr_q;
  logic [7:0]           aw_len_q;
  wire aw_load = w_valid && !stop_i && (!aw_valid_o || aw_ready_i)
              && outstanding_q < OutWidth'(MaxOutstanding);

  npu_cmp_walker #(
    .BusBytes(Block), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats)
  ) u_walker (
    .clk_i, .rst_ni, .clear_i, .start_i,
    .addr_i(AddrWidth'(addr_i)), .x_size_i(insn_i.x_size), .y_size_i(insn_i.y_size),
    .z_size_i(insn_i.z_size), .x_stride_i(insn_i.x_stride), .y_stride_i(insn_i.y_stride),
    .z_stride_i(insn_i.z_stride),
    .elem_beats_i(insn_i.mode == StoreModeInt32 ? 5'd4 : 5'd1),
    .burst_valid_o(w_valid), .burst_ready_i(aw_load), .burst_addr_o(w_addr),
    .burst_beats_o(w_beats), .active_o(w_active)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      aw_valid_o <= 1'b0;
      aw_addr_q  <= '0;
      aw_len_q   <= '0;
    end else begin
      if (aw_valid_o && aw_ready_i) aw_valid_o <= 1'b0;
      if (aw_load) begin
        aw_valid_o <= 1'b1;
        aw_addr_q  <= w_addr;
        aw_len_q   <= 8'(w_beats - 9'd1);
      end
    end
  end
  assign aw_o = '{id: $bits(b_i.id)'(Id), addr: aw_addr_q, len: aw_len_q,
                  size: 3'($clog2(Block)), burst: 2'b01};

  wire b_fire = b_valid_i && b_ready_o;
  assign b_ready_o = 1'b1;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) outstanding_q <= '0;
    else outstanding_q <= outstanding_q + OutWidth'(aw_load) - OutWidth'(b_fire);
  end

  // Lengths of requested bursts for the W side, and their addresses for error reports.
  logic [8:0] len_head;
  logic       len_valid, len_pop;
  npu_fifo #(.Width(9), .Depth(MaxOutstanding + 1), .MustAccept(1'b1)) u_len_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(w_beats), .in_valid_i(aw_load), .in_ready_o(),
    .out_data_o(len_head), .out_valid_o(len_valid), .out_ready_i(len_pop), .count_o()
  );
  logic [AddrWidth-1:0] oldest_addr;
  npu_fifo #(
    .Width(AddrWidth), .Depth(MaxOutstanding + 1), .MustAccept(1'b1), .MustHold(1'b1)
  ) u_addr_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(w_addr), .in_valid_i(aw_load), .in_ready_o(),
    .out_data_o(oldest_addr), .out_valid_o(), .out_ready_i(b_fire), .count_o()
  );

  // ---------------------------------------------------------------- data path
  logic        d_active_q;
  logic [9:0]  x_q, y_q, z_q;
  logic [15:0] row_q, yrow_q, zrow_q, prm_q;
  logic        s1_valid_q, s2_valid_q;
  logic [AccWidth-1:0] s2_data_q;
  logic [$clog2(ElemDepth+1)-1:0] elem_count;
  logic        elem_valid;
  logic [AccWidth-1:0] elem_head;
  logic        elem_pop;

  wire [4:0] inflight = 5'(elem_count) + 5'(s1_valid_q) + 5'(s2_valid_q);
  wire d_issue = d_active_q && inflight < 5'(ElemDepth);

  assign acc_re_o    = d_issue;
  assign acc_raddr_o = row_q;
  assign prm_re_o    = d_issue && s_q.use_prm;
  assign prm_raddr_o = prm_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      d_active_q <= 1'b0;
      {x_q, y_q, z_q} <= '0;
      {row_q, yrow_q, zrow_q, prm_q} <= '0;
      s_q <= '0;
      s1_valid_q <= 1'b0;
      s2_valid_q <= 1'b0;
    end else if (clear_i) begin
      d_active_q <= 1'b0;
      s1_valid_q <= 1'b0;
      s2_valid_q <= 1'b0;
    end else begin
      s1_valid_q <= d_issue;
      s2_valid_q <= s1_valid_q;
      if (start_i) begin
        s_q <= insn_i;
        d_active_q <= 1'b1;
        {x_q, y_q, z_q} <= '0;
        {row_q, yrow_q, zrow_q} <= {3{insn_i.sram}};
        prm_q <= insn_i.m_or_prm;
      end else if (d_issue) begin
        if (x_q + 10'd1 != s_q.x_size) begin
          x_q   <= x_q + 10'd1;
          row_q <= row_q + s_q.sram_x_stride;
        end else if (y_q + 10'd1 != s_q.y_size) begin
          x_q    <= '0;
          y_q    <= y_q + 10'd1;
          yrow_q <= yrow_q + s_q.sram_y_stride;
          row_q  <= yrow_q + s_q.sram_y_stride;
        end else if (z_q + 10'd1 != s_q.z_size) begin
          {x_q, y_q} <= '0;
          z_q    <= z_q + 10'd1;
          zrow_q <= zrow_q + s_q.sram_z_stride;
          yrow_q <= zrow_q + s_q.sram_z_stride;
          row_q  <= zrow_q + s_q.sram_z_stride;
          prm_q  <= prm_q + 16'd1;
        end else begin
          d_active_q <= 1'b0;
        end
      end
    end
  end

  // Lane l requantized, reading the module's signals directly (no wide arguments: Verilator
  // emits word operations and no row copies per cycle).
  function automatic logic [7:0] requant_lane(int l);
    logic [15:0] m;
    logic [5:0]  sh;
    m  = s_q.use_prm ? prm_rdata_i[l*32 +: 16] : s_q.m_or_prm;
    sh = s_q.use_prm ? prm_rdata_i[l*32 + 16 +: 6] : s_q.shift;
    return requantize(acc_rdata_i[l*32 +: 32], m, sh, s_q.lo, s_q.hi);
  endfunction

  always_ff @(posedge clk_i) begin
    if (s1_valid_q) begin
      if (s_q.mode == StoreModeInt32) begin
        s2_data_q <= acc_rdata_i;
      end else begin
        for (int l = 0; l < Block; l++) s2_data_q[l*8 +: 8] <= requant_lane(l);
        s2_data_q[AccWidth-1:DataWidth] <= '0;
      end
    end
  end

  npu_fifo #(.Width(AccWidth), .Depth(ElemDepth), .MustAccept(1'b1)) u_elem_q (
    .clk_i, .rst_ni, .clear_i,
    .in_data_i(s2_data_q), .in_valid_i(s2_valid_q), .in_ready_o(),
    .out_data_o(elem_head), .out_valid_o(elem_valid), .out_ready_i(elem_pop),
    .count_o(elem_count)
  );

  // ---------------------------------------------------------------- W beats
  logic [1:0] ebeat_q;     // beat of the element at the FIFO head
  logic [8:0] wbeat_q;     // beat of the burst at the length FIFO head
  wire [1:0] elem_last = s_q.mode == StoreModeInt32 ? 2'd3 : 2'd0;

  wire w_last = wbeat_q == len_head - 9'd1;
  assign w_valid_o = elem_valid && len_valid;
  assign w_o       = '{data: elem_head[ebeat_q * DataWidth +: DataWidth], strb: '1, last: w_last};
  wire w_fire = w_valid_o && w_ready_i;
  assign elem_pop = w_fire && ebeat_q == elem_last;
  assign len_pop  = w_fire && w_last;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ebeat_q <= '0;
      wbeat_q <= '0;
    end else if (clear_i) begin
      ebeat_q <= '0;
      wbeat_q <= '0;
    end else if (w_fire) begin
      ebeat_q <= elem_pop ? 2'd0 : ebeat_q + 2'd1;
      wbeat_q <= w_last ? 9'd0 : wbeat_q + 9'd1;
    end
  end

  logic err_seen_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) err_seen_q <= 1'b0;
    else if (clear_i) err_seen_q <= 1'b0;
    else if (err_o) err_seen_q <= 1'b1;
  end
  assign err_o      = b_fire && b_i.resp[1] && !err_seen_q;
  assign err_code_o = b_i.resp[0] ? ErrStoreDecerr : ErrStoreSlverr;
  assign err_addr_o = 64'(oldest_addr);

  assign done_o = !w_active && !d_active_q && !s1_valid_q && !s2_valid_q && !elem_valid
               && !aw_valid_o && outstanding_q == '0;
  assign drained_o = !aw_valid_o && outstanding_q == '0 && !len_valid;

  logic unused;
  assign unused = ^{addr_i[63:AddrWidth], b_i.id, s_q.opcode, s_q.base, s_q.offset, s_q.sram,
                    s_q.x_stride, s_q.y_stride, s_q.z_stride, s_q.rsvd_238, s_q.rsvd_94,
                    s_q.rsvd_10, s_q.push_next, s_q.push_prev, s_q.pop_next, s_q.pop_prev};
endmodule

`default_nettype wire
