`default_nettype none

/// The compute engine (docs/isa.md): fetch, decode and in-order dispatch into one queue per
/// unit, the LOAD, COMPUTE and STORE units joined by four dependency-token counters, the
/// on-chip buffers, one AXI4 master (reads: fetch ID 0, LOAD ID 1; writes: STORE), errors,
/// watchdog and performance counters. Control and status are plain ports: `npu_regs`
/// connects them to CSRs; the block test drives them directly.
///
///   fetch -> decode/check -> queues -> LOAD    -> INP WGT ACC PRM LUT
///                                      COMPUTE -> MAC array / vector unit -> ACC
///                                      STORE   -> requantize -> memory
///
/// After reset, and on `wipe_i` while idle, the engine zeroes every row of every buffer
/// (one row of each per cycle, as OpenTitan's OTBN wipes its memories) before it takes a
/// program: nothing one program left on chip reaches a later one of another user.
module npu_cmp_core
  import npu_cmp_pkg::*;
  import npu_config_pkg::NumPerf, npu_config_pkg::PerfRunCycles, npu_config_pkg::PerfLoadBusy;
  import npu_config_pkg::PerfLoadTokenWait, npu_config_pkg::PerfLoadRetired;
  import npu_config_pkg::PerfGemmCycles, npu_config_pkg::PerfBytesRead;
  import npu_config_pkg::PerfBytesWritten;
#(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat (= Block)
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned IdWidth = 4,          /// AXI ID bits (>= 1)
  parameter int unsigned MaxBurstBeats = 256,  /// longest burst
  parameter int unsigned MaxOutstanding = 8,   /// bursts in flight per unit
  parameter int unsigned Block = 16,           /// B: the MAC array is B x B
  parameter int unsigned InpRows = 8192,       /// INP rows (power of two)
  parameter int unsigned WgtRows = 1024,       /// WGT rows (power of two)
  parameter int unsigned AccRows = 4096,       /// ACC rows (power of two)
  parameter int unsigned PrmRows = 256,        /// PRM rows (power of two)
  parameter int unsigned LutTables = 4,        /// 256-entry lookup tables (power of two)
  parameter int unsigned QueueDepth = 8,       /// instructions waiting per unit
  parameter int unsigned TokenDepth = 64,      /// tokens per dependency queue
  parameter int unsigned WatchdogCycles = 1048576,  /// cycles without progress = WATCHDOG
  parameter logic [63:0] Mem0Base = 64'h0,     /// memory window 0 base
  parameter logic [63:0] Mem0Size = 64'h0,     /// memory window 0 size (0 = absent)
  parameter logic [63:0] Mem1Base = 64'h0,     /// memory window 1 base
  parameter logic [63:0] Mem1Size = 64'h0,     /// memory window 1 size
  parameter logic [63:0] Mem2Base = 64'h0,     /// memory window 2 base
  parameter logic [63:0] Mem2Size = 64'h0,     /// memory window 2 size
  parameter type aw_chan_t = logic,            /// AXI4 AW payload (npu_axi_typedef.svh)
  parameter type w_chan_t = logic,             /// AXI4 W payload
  parameter type b_chan_t = logic,             /// AXI4 B payload
  parameter type req_t = logic,                /// AXI4 request
  parameter type rsp_t = logic                 /// AXI4 response
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  // Control (CORE_CTRL and the launch registers).
  input  wire                  start_i,        /// run the program (one cycle; ignored while busy)
  input  wire                  abort_i,        /// stop the program with ABORTED (one cycle)
  input  wire                  wipe_i,         /// zero every buffer (one cycle; ignored while busy)
  input  wire  [63:0]          prog_addr_i,    /// PROG_ADDR: first instruction
  input  wire  [31:0]          prog_insns_i,   /// PROG_INSNS
  input  wire  [15:0][63:0]    base_i,         /// BASE[0..15]
  // Status (CORE_STATUS, CORE_ERR_*).
  output logic                 busy_o,         /// a program runs (or drains after an error), or a wipe
  output logic                 wiping_o,       /// the buffers are being zeroed (after reset, WIPE)
  output logic                 done_o,         /// the last program reached FINISH
  output logic                 error_o,        /// the last program stopped with an error
  output npu_isa_pkg::err_e    err_code_o,     /// its code
  output logic [1:0]           err_unit_o,     /// its unit (npu_cmp_pkg ErrUnit*)
  output logic [31:0]          err_pc_o,       /// its instruction index
  output logic [63:0]          err_addr_o,     /// the memory address involved
  output logic                 done_event_o,   /// a program ended without error (one cycle)
  output logic                 error_event_o,  /// a program ended with an error (one cycle)
  output logic [NumPerf-1:0][63:0] perf_o,     /// counters, indices Perf* (npu_config_pkg)
  output req_t                 m_axi_req_o,    /// AXI4 master
  input  rsp_t                 m_axi_rsp_i
);
  import npu_isa_pkg::*;

  localparam int unsigned InpWidth = Block * 8;
  localparam int unsigned WgtWidth = Block * Block * 8;
  localparam int unsigned AccWidth = Block * 32;
  localparam int unsigned LutRows = LutTables * 256 / Block;
  localparam int unsigned WipeRows = InpRows > WgtRows
      ? (InpRows > AccRows ? InpRows : AccRows) : (WgtRows > AccRows ? WgtRows : AccRows);

  initial begin
    if (Block != BusBytes || Block != 16)
      $fatal(1, "npu_cmp_core: Block (%0d) and BusBytes (%0d) must both be 16", Block, BusBytes);
  end

  // ---------------------------------------------------------------- run state
  logic     running_q, stop, clear;
  err_rep_t err_q, err_new;
  logic     fetch_drained, load_drained, store_drained, finished, finish;

  assign stop = err_q.valid;
  wire end_ok  = running_q && !stop && finished && fetch_drained;
  wire end_err = running_q && stop && fetch_drained && load_drained && store_drained;
  assign clear = end_ok || end_err;
  logic wiping_q;
  wire start = start_i && !running_q && !wiping_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      running_q <= 1'b0;
      err_q     <= NoErr;
      done_o    <= 1'b0;
      error_o   <= 1'b0;
    end else begin
      if (start) begin
        running_q <= 1'b1;
        err_q     <= NoErr;
        done_o    <= 1'b0;
        error_o   <= 1'b0;
      end else if (running_q) begin
        if (!err_q.valid && err_new.valid) err_q <= err_new;
        if (end_ok) begin
          running_q <= 1'b0;
          done_o    <= 1'b1;
        end
        if (end_err) begin
          running_q <= 1'b0;
          error_o   <= 1'b1;
        end
      end
    end
  end

  assign busy_o        = running_q || wiping_q;
  assign wiping_o      = wiping_q;
  assign done_event_o  = end_ok;
  assign error_event_o = end_err;
  assign err_code_o    = err_q.code;
  assign err_unit_o    = err_q.unit;
  assign err_pc_o      = err_q.pc;
  assign err_addr_o    = err_q.addr;

  // ---------------------------------------------------------------- buffer wipe
  // One row counter over the deepest buffer (PRM and LUT rows fit under it: checked below);
  // each buffer ignores rows past its own depth.
  logic [16:0] wipe_row_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wiping_q   <= 1'b1;
      wipe_row_q <= '0;
    end else if (wiping_q) begin
      if (32'(wipe_row_q) == WipeRows - 1) wiping_q <= 1'b0;
      wipe_row_q <= wipe_row_q + 17'd1;
    end else if (wipe_i && !running_q) begin
      wiping_q   <= 1'b1;
      wipe_row_q <= '0;
    end
  end
  initial begin
    if (PrmRows > WipeRows || LutRows > WipeRows)
      $fatal(1, "npu_cmp_core: PRM (%0d) and LUT (%0d) rows must not exceed INP/WGT/ACC rows",
             PrmRows, LutRows);
  end

  // ---------------------------------------------------------------- read arbiter
  // One registered AR slot; fetch goes first (it has few bursts and gates everything).
  logic                 f_ar_valid, f_ar_ready, l_ar_valid, l_ar_ready;
  logic [AddrWidth-1:0] f_ar_addr, l_ar_addr;
  logic [7:0]           l_ar_len;
  logic                 ar_valid_q;
  logic [AddrWidth-1:0] ar_addr_q;
  logic [7:0]           ar_len_q;
  logic [IdWidth-1:0]   ar_id_q;
  wire ar_free = !ar_valid_q || m_axi_rsp_i.ar_ready;
  assign f_ar_ready = ar_free;
  assign l_ar_ready = ar_free && !f_ar_valid;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ar_valid_q <= 1'b0;
      ar_addr_q  <= '0;
      ar_len_q   <= '0;
      ar_id_q    <= '0;
    end else if (ar_free) begin
      ar_valid_q <= f_ar_valid || l_ar_valid;
      if (f_ar_valid) begin
        ar_addr_q <= f_ar_addr;
        ar_len_q  <= 8'd1;
        ar_id_q   <= '0;
      end else if (l_ar_valid) begin
        ar_addr_q <= l_ar_addr;
        ar_len_q  <= l_ar_len;
        ar_id_q   <= IdWidth'(1);
      end
    end
  end

  wire r_to_load = m_axi_rsp_i.r.id[0];
  wire r_valid   = m_axi_rsp_i.r_valid;
  logic l_r_ready;

  // Writes: the STORE unit's channels.
  aw_chan_t s_aw;
  w_chan_t  s_w;
  logic     s_aw_valid, s_w_valid, s_b_ready;

  assign m_axi_req_o = '{
    aw: s_aw, aw_valid: s_aw_valid, w: s_w, w_valid: s_w_valid, b_ready: s_b_ready,
    ar: '{id: ar_id_q, addr: ar_addr_q, len: ar_len_q, size: 3'($clog2(BusBytes)),
          burst: 2'b01},
    ar_valid: ar_valid_q, r_ready: r_to_load ? l_r_ready : 1'b1
  };

  // ---------------------------------------------------------------- fetch and decode
  insn_pc_t   f_data, q_in;
  logic [1:0] f_err;
  logic       f_valid, f_ready, f_exhausted;
  logic [2:0] q_push, q_ready, q_valid, q_pop;
  insn_pc_t   q_out [3];
  err_rep_t   dec_err;
  logic       idle;
  logic [31:0] dec_pc;

  npu_cmp_fetch #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .Depth(4),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size)
  ) u_fetch (
    .clk_i, .rst_ni, .start_i(start), .stop_i(stop || finished),
    .prog_addr_i, .prog_insns_i,
    .ar_valid_o(f_ar_valid), .ar_ready_i(f_ar_ready), .ar_addr_o(f_ar_addr),
    .r_valid_i(r_valid && !r_to_load), .r_data_i(m_axi_rsp_i.r.data),
    .r_resp_i(m_axi_rsp_i.r.resp),
    .out_valid_o(f_valid), .out_data_o(f_data), .out_err_o(f_err), .out_ready_i(f_ready),
    .exhausted_o(f_exhausted), .drained_o(fetch_drained)
  );

  npu_cmp_decode #(
    .Block(Block), .InpRows(InpRows), .WgtRows(WgtRows), .AccRows(AccRows),
    .PrmRows(PrmRows), .LutTables(LutTables),
    .Mem0Base(Mem0Base), .Mem0Size(Mem0Size), .Mem1Base(Mem1Base), .Mem1Size(Mem1Size),
    .Mem2Base(Mem2Base), .Mem2Size(Mem2Size)
  ) u_decode (
    .clk_i, .rst_ni, .start_i(start), .stop_i(stop),
    .prog_addr_i, .prog_insns_i, .base_i,
    .in_valid_i(f_valid && running_q), .in_data_i(f_data), .in_err_i(f_err),
    .in_ready_o(f_ready), .exhausted_i(f_exhausted),
    .q_valid_o(q_push), .q_ready_i(q_ready), .q_data_o(q_in), .idle_i(idle),
    .finish_o(finish), .err_o(dec_err), .finished_o(finished), .pc_o(dec_pc)
  );

  for (genvar u = 0; u < 3; u++) begin : g_queue
    npu_fifo #(.Width($bits(insn_pc_t)), .Depth(QueueDepth)) u_q (
      .clk_i, .rst_ni, .clear_i(clear),
      .in_data_i(q_in), .in_valid_i(q_push[u]), .in_ready_o(q_ready[u]),
      .out_data_o(q_out[u]), .out_valid_o(q_valid[u]), .out_ready_i(q_pop[u]),
      .count_o()
    );
  end

  // ---------------------------------------------------------------- units
  // Token queues: 0 L2C, 1 C2L, 2 C2S, 3 S2C.
  logic [3:0] tok_push, tok_pop, tok_avail, tok_overflow;
  logic [2:0] u_start, u_done, u_busy, u_wait, u_retire;
  insn_pc_t   u_insn [3];
  logic [2:0] pop_prev, pop_next, push_prev, push_next;

  npu_cmp_tokens #(.Depth(TokenDepth)) u_tokens (
    .clk_i, .rst_ni, .clear_i(start),
    .push_i(tok_push), .pop_i(tok_pop), .avail_o(tok_avail), .overflow_o(tok_overflow)
  );
  // LOAD: next = C2L/L2C. COMPUTE: prev = L2C/C2L, next = S2C/C2S. STORE: prev = C2S/S2C.
  assign tok_push = {push_prev[2], push_next[1], push_prev[1], push_next[0]};
  assign tok_pop  = {pop_next[1], pop_prev[2], pop_next[0], pop_prev[1]};
  wire [2:0] avail_prev = {tok_avail[2], tok_avail[0], 1'b0};
  wire [2:0] avail_next = {1'b0, tok_avail[3], tok_avail[1]};

  for (genvar u = 0; u < 3; u++) begin : g_ctl
    npu_cmp_ctl u_ctl (
      .clk_i, .rst_ni, .clear_i(clear), .stop_i(stop),
      .q_valid_i(q_valid[u]), .q_data_i(q_out[u]), .q_ready_o(q_pop[u]),
      .avail_prev_i(avail_prev[u]), .avail_next_i(avail_next[u]),
      .pop_prev_o(pop_prev[u]), .pop_next_o(pop_next[u]),
      .push_prev_o(push_prev[u]), .push_next_o(push_next[u]),
      .start_o(u_start[u]), .done_i(u_done[u]), .insn_o(u_insn[u]),
      .busy_o(u_busy[u]), .token_wait_o(u_wait[u]), .retire_o(u_retire[u])
    );
  end
  assign idle = !(|u_busy) && !(|q_valid);

  // Buffers.
  logic                 ld_we;
  buffer_e              ld_buf;
  logic [15:0]          ld_row;
  logic [WgtWidth-1:0]  ld_data;
  logic [1:0]           c_inp_re, c_acc_re;
  logic [1:0][15:0]     c_inp_raddr, c_acc_raddr;
  logic [1:0][InpWidth-1:0] inp_rdata;
  logic                 c_wgt_re;
  logic [15:0]          c_wgt_raddr;
  logic [WgtWidth-1:0]  wgt_rdata;
  logic [2:0][AccWidth-1:0] acc_rdata;
  logic                 c_acc_we;
  logic [15:0]          c_acc_waddr;
  logic [AccWidth-1:0]  c_acc_wdata;
  logic                 s_acc_re, s_prm_re;
  logic [15:0]          s_acc_raddr, s_prm_raddr;
  logic [AccWidth-1:0]  prm_rdata;
  logic                 gemm_row;

  npu_cmp_sram #(.Width(InpWidth), .Depth(InpRows), .NumRead(2), .NumWrite(1)) u_inp (
    .clk_i, .we_i(ld_we && ld_buf == BufferInp), .waddr_i(ld_row),
    .wdata_i(ld_data[InpWidth-1:0]),
    .re_i(c_inp_re), .raddr_i(c_inp_raddr), .rdata_o(inp_rdata),
    .wipe_i(wiping_q), .wipe_row_i(wipe_row_q)
  );
  npu_cmp_sram #(.Width(WgtWidth), .Depth(WgtRows), .NumRead(1), .NumWrite(1)) u_wgt (
    .clk_i, .we_i(ld_we && ld_buf == BufferWgt), .waddr_i(ld_row), .wdata_i(ld_data),
    .re_i(c_wgt_re), .raddr_i(c_wgt_raddr), .rdata_o(wgt_rdata),
    .wipe_i(wiping_q), .wipe_row_i(wipe_row_q)
  );
  npu_cmp_sram #(.Width(AccWidth), .Depth(AccRows), .NumRead(3), .NumWrite(2)) u_acc (
    .clk_i, .we_i({ld_we && ld_buf == BufferAcc, c_acc_we}), .waddr_i({ld_row, c_acc_waddr}),
    .wdata_i({ld_data[AccWidth-1:0], c_acc_wdata}),
    .re_i({s_acc_re, c_acc_re}), .raddr_i({s_acc_raddr, c_acc_raddr}), .rdata_o(acc_rdata),
    .wipe_i(wiping_q), .wipe_row_i(wipe_row_q)
  );
  npu_cmp_sram #(.Width(AccWidth), .Depth(PrmRows), .NumRead(1), .NumWrite(1)) u_prm (
    .clk_i, .we_i(ld_we && ld_buf == BufferPrm), .waddr_i(ld_row),
    .wdata_i(ld_data[AccWidth-1:0]),
    .re_i(s_prm_re), .raddr_i(s_prm_raddr), .rdata_o(prm_rdata),
    .wipe_i(wiping_q), .wipe_row_i(wipe_row_q)
  );

  // BASE[base] + offset of the held LOAD and STORE (base and offset sit at the same bits).
  load_insn_t  l_insn;
  store_insn_t s_insn;
  assign l_insn = load_insn_t'(u_insn[0].insn);
  assign s_insn = store_insn_t'(u_insn[2].insn);
  wire [63:0] l_addr = base_i[l_insn.base] + 64'(l_insn.offset);
  wire [63:0] s_addr = base_i[s_insn.base] + 64'(s_insn.offset);

  logic       l_err, s_err, l_beat;
  err_e       l_err_code, s_err_code;
  logic [63:0] l_err_addr, s_err_addr;

  npu_cmp_load #(
    .BusBytes(BusBytes), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats),
    .MaxOutstanding(MaxOutstanding)
  ) u_load (
    .clk_i, .rst_ni, .clear_i(clear), .stop_i(stop), .start_i(u_start[0]),
    .insn_i(l_insn), .addr_i(l_addr), .done_o(u_done[0]),
    .ar_valid_o(l_ar_valid), .ar_ready_i(l_ar_ready), .ar_addr_o(l_ar_addr),
    .ar_len_o(l_ar_len),
    .r_valid_i(r_valid && r_to_load), .r_ready_o(l_r_ready), .r_data_i(m_axi_rsp_i.r.data),
    .r_resp_i(m_axi_rsp_i.r.resp), .r_last_i(m_axi_rsp_i.r.last),
    .wr_valid_o(ld_we), .wr_buf_o(ld_buf), .wr_row_o(ld_row), .wr_data_o(ld_data),
    .err_o(l_err), .err_code_o(l_err_code), .err_addr_o(l_err_addr), .beat_o(l_beat),
    .drained_o(load_drained)
  );

  npu_cmp_compute #(.Block(Block), .LutTables(LutTables)) u_compute (
    .clk_i, .rst_ni, .clear_i(clear), .stop_i(stop), .start_i(u_start[1]),
    .insn_i(u_insn[1].insn), .done_o(u_done[1]),
    .inp_re_o(c_inp_re), .inp_raddr_o(c_inp_raddr), .inp_rdata_i(inp_rdata),
    .wgt_re_o(c_wgt_re), .wgt_raddr_o(c_wgt_raddr), .wgt_rdata_i(wgt_rdata),
    .acc_re_o(c_acc_re), .acc_raddr_o(c_acc_raddr), .acc_rdata_i(acc_rdata[1:0]),
    .acc_we_o(c_acc_we), .acc_waddr_o(c_acc_waddr), .acc_wdata_o(c_acc_wdata),
    .lut_we_i(ld_we && ld_buf == BufferLut), .lut_row_i(ld_row),
    .lut_wdata_i(ld_data[InpWidth-1:0]),
    .lut_wipe_i(wiping_q), .lut_wipe_row_i(wipe_row_q),
    .gemm_row_o(gemm_row)
  );

  logic aw_fire_unused;
  npu_cmp_store #(
    .Block(Block), .AddrWidth(AddrWidth), .MaxBurstBeats(MaxBurstBeats),
    .MaxOutstanding(MaxOutstanding), .Id(2),
    .aw_chan_t(aw_chan_t), .w_chan_t(w_chan_t), .b_chan_t(b_chan_t)
  ) u_store (
    .clk_i, .rst_ni, .clear_i(clear), .stop_i(stop), .start_i(u_start[2]),
    .insn_i(s_insn), .addr_i(s_addr), .done_o(u_done[2]),
    .acc_re_o(s_acc_re), .acc_raddr_o(s_acc_raddr), .acc_rdata_i(acc_rdata[2]),
    .prm_re_o(s_prm_re), .prm_raddr_o(s_prm_raddr), .prm_rdata_i(prm_rdata),
    .aw_o(s_aw), .aw_valid_o(s_aw_valid), .aw_ready_i(m_axi_rsp_i.aw_ready),
    .w_o(s_w), .w_valid_o(s_w_valid), .w_ready_i(m_axi_rsp_i.w_ready),
    .b_i(m_axi_rsp_i.b), .b_valid_i(m_axi_rsp_i.b_valid), .b_ready_o(s_b_ready),
    .err_o(s_err), .err_code_o(s_err_code), .err_addr_o(s_err_addr),
    .drained_o(store_drained)
  );
  assign aw_fire_unused = 1'b0;

  // ---------------------------------------------------------------- errors
  // Progress is a handshake, not a request: a decode holding an instruction for a full queue
  // (its unit waits for a token that never comes) is no progress, and the watchdog fires.
  logic [31:0] wd_q;       // cycles without progress
  wire progress = (m_axi_req_o.ar_valid && m_axi_rsp_i.ar_ready)
               || (m_axi_rsp_i.r_valid && m_axi_req_o.r_ready)
               || (m_axi_req_o.aw_valid && m_axi_rsp_i.aw_ready)
               || (m_axi_req_o.w_valid && m_axi_rsp_i.w_ready)
               || (m_axi_rsp_i.b_valid && m_axi_req_o.b_ready)
               || |(q_push & q_ready) || |q_pop || |tok_pop
               || |u_retire || ld_we || c_acc_we || !u_done[1];
  wire wd_fire = wd_q == 32'(WatchdogCycles);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) wd_q <= '0;
    else if (!running_q || progress || stop) wd_q <= '0;
    else wd_q <= wd_q + 32'd1;
  end

  function automatic err_rep_t rep(err_e code, logic [1:0] unit, logic [31:0] pc,
                                   logic [63:0] addr);
    return '{valid: 1'b1, code: code, unit: unit, pc: pc, addr: addr};
  endfunction

  always_comb begin
    err_new = NoErr;
    if (dec_err.valid) err_new = dec_err;
    else if (l_err) err_new = rep(l_err_code, ErrUnitLoad, u_insn[0].pc, l_err_addr);
    else if (s_err) err_new = rep(s_err_code, ErrUnitStore, u_insn[2].pc, s_err_addr);
    else if (tok_overflow[0]) err_new = rep(ErrTokenOverflow, ErrUnitLoad, u_insn[0].pc, '0);
    else if (tok_overflow[1] || tok_overflow[2])
      err_new = rep(ErrTokenOverflow, ErrUnitCompute, u_insn[1].pc, '0);
    else if (tok_overflow[3]) err_new = rep(ErrTokenOverflow, ErrUnitStore, u_insn[2].pc, '0);
    else if (wd_fire) begin
      if (u_wait[0]) err_new = rep(ErrWatchdog, ErrUnitLoad, u_insn[0].pc, '0);
      else if (u_wait[1]) err_new = rep(ErrWatchdog, ErrUnitCompute, u_insn[1].pc, '0);
      else if (u_wait[2]) err_new = rep(ErrWatchdog, ErrUnitStore, u_insn[2].pc, '0);
      else err_new = rep(ErrWatchdog, ErrUnitEngine, dec_pc, '0);
    end else if (abort_i) err_new = rep(ErrAborted, ErrUnitEngine, dec_pc, '0);
  end

  // ---------------------------------------------------------------- counters
  // Cleared at START, so each program's figures read alone.
  logic [NumPerf-1:0][63:0] perf_q;
  wire w_fire = s_w_valid && m_axi_rsp_i.w_ready;
  logic [NumPerf-1:0]       perf_inc;
  always_comb begin
    perf_inc = '0;
    perf_inc[PerfRunCycles] = running_q;
    for (int u = 0; u < 3; u++) begin
      perf_inc[PerfLoadBusy + u]      = u_busy[u];
      perf_inc[PerfLoadTokenWait + u] = u_wait[u];
      perf_inc[PerfLoadRetired + u]   = u_retire[u];
    end
    perf_inc[PerfGemmCycles] = gemm_row;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      perf_q <= '0;
    end else if (start) begin
      perf_q <= '0;
    end else if (running_q) begin
      for (int k = 0; k < NumPerf; k++) begin
        if (perf_inc[k]) perf_q[k] <= perf_q[k] + 64'd1;
      end
      if (l_beat) perf_q[PerfBytesRead] <= perf_q[PerfBytesRead] + 64'(BusBytes);
      if (w_fire)
        perf_q[PerfBytesWritten] <= perf_q[PerfBytesWritten] + 64'(BusBytes);
    end
  end
  assign perf_o = perf_q;

`ifdef NPU_LOCKSTEP
  // Simulation builds only: the trace the golden model checks launch by launch
  // (rtl/sim/npu_cmp_lockstep.sv, docs/verification.md "Lockstep").
  npu_cmp_lockstep #(.IdWidth(IdWidth)) u_lockstep (
    .clk_i, .rst_ni, .start_i(start), .prog_addr_i, .prog_insns_i, .base_i,
    .wiping_i(wiping_q), .retire_i(u_retire),
    .pc_i({u_insn[2].pc, u_insn[1].pc, u_insn[0].pc}),
    .ar_fire_i(m_axi_req_o.ar_valid && m_axi_rsp_i.ar_ready), .ar_id_i(m_axi_req_o.ar.id),
    .ar_addr_i(64'(m_axi_req_o.ar.addr)), .ar_len_i(m_axi_req_o.ar.len),
    .r_fire_i(m_axi_rsp_i.r_valid && m_axi_req_o.r_ready), .r_id_i(m_axi_rsp_i.r.id),
    .r_data_i(128'(m_axi_rsp_i.r.data)), .r_resp_i(m_axi_rsp_i.r.resp),
    .aw_fire_i(s_aw_valid && m_axi_rsp_i.aw_ready), .aw_addr_i(64'(s_aw.addr)),
    .aw_len_i(s_aw.len), .w_fire_i(w_fire), .w_data_i(128'(s_w.data)),
    .w_strb_i(16'(s_w.strb)), .b_fire_i(m_axi_rsp_i.b_valid && s_b_ready),
    .b_resp_i(m_axi_rsp_i.b.resp), .end_i(clear), .err_i(stop), .err_code_i(8'(err_q.code)),
    .err_unit_i(err_q.unit), .err_pc_i(err_q.pc)
  );
`endif

  // Protocol assertions on the master port (load, store and fetch share it).
  npu_axi_sva #(
    .Name("compute master"), .MaxOutstanding(2 * MaxOutstanding), .req_t(req_t), .rsp_t(rsp_t)
  ) u_sva_axi (.clk_i, .rst_ni, .req_i(m_axi_req_o), .rsp_i(m_axi_rsp_i));

  logic unused;
  assign unused = ^{m_axi_rsp_i.r.id, aw_fire_unused, finish,
                    pop_prev[0], pop_next[2], push_prev[0], push_next[2],
                    l_insn.opcode, s_insn.opcode};
endmodule

`default_nettype wire
