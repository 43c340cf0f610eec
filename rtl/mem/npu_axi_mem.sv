`default_nettype none

/// AXI4 slave memory: INCR bursts of full-width beats, one beat per cycle on R and on W,
/// read and write sides independent, up to `MaxOutstanding` bursts queued per side.
/// With `SharedDataBus` (the DDR models) reads and writes share one data bus, as the DQ
/// pins of a DDR chip: one beat per cycle in all, read and write beats alternating while
/// both sides have work, so a program that streams in and out of DDR at once gets half the
/// bandwidth of the OCM (a dual-ported SRAM).
///
/// Storage is either a file shared with other processes, reached through DPI-C
/// (`UseDpi = 1`: the DDR models; the C side takes the path from the plusarg
/// `+npu_mem_<Name>=PATH`, no plusarg = private memory), or an on-chip array (`UseDpi = 0`:
/// SRAM such as the OCM).
/// Beats at offsets past `Size`, or inside the fault window, answer with an error response
/// and touch nothing (fault injection for driver error paths).
module npu_axi_mem #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned IdWidth = 4,          /// AXI ID bits
  parameter logic [63:0] Base = 64'h0,         /// physical address of byte 0
  parameter logic [63:0] Size = 64'h1000,      /// bytes
  parameter bit          UseDpi = 1'b1,        /// 1: shared-file storage, 0: on-chip array
  parameter string       Name = "mem",         /// for the plusarg and messages
  /// The storage's slot in the C side's table (UseDpi): unique per DPI memory of a model.
  /// A parameter, not a variable, so no restored model state can point a model at another
  /// memory's storage (npu_mem_dpi.cpp).
  parameter int unsigned DpiSlot = 0,
  parameter int unsigned MaxOutstanding = 8,   /// bursts queued per side
  /// Cycles from a read request to its first beat, at the least (DDR latency; 0: next cycle).
  parameter int unsigned ReadLatency = 0,
  /// 1: reads and writes share one beat per cycle (DDR); 0: a beat each way per cycle.
  parameter bit          SharedDataBus = 1'b0,
  parameter type         req_t = logic,        /// AXI4 request (npu_axi_typedef.svh)
  parameter type         rsp_t = logic,        /// AXI4 response
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire         clk_i,          /// clock
  input  wire         rst_ni,         /// asynchronous reset, active low
  input  wire  [63:0] fault_base_i,   /// first faulty offset
  input  wire  [63:0] fault_size_i,   /// faulty bytes (0: no fault window)
  input  wire  [1:0]  fault_resp_i,   /// response for faulty beats (SLVERR/DECERR)
  input  req_t        s_req_i,        /// AXI4 slave port
  output rsp_t        s_rsp_o
);
  import npu_mem_dpi_pkg::*;

  localparam int unsigned OffWidth = $clog2(BusBytes);
  localparam int unsigned CmdWidth = IdWidth + AddrWidth + 8;
  localparam logic [1:0] RespOkay = 2'b00;
  localparam logic [1:0] RespSlverr = 2'b10;

  initial begin
    if (BusBytes < 4 || BusBytes > 128 || (BusBytes & (BusBytes - 1)) != 0)
      $fatal(1, "npu_axi_mem(%s): BusBytes must be a power of two in 4..128", Name);
    if (Size == 0 || Size[OffWidth-1:0] != '0)
      $fatal(1, "npu_axi_mem(%s): Size must be a non-zero multiple of BusBytes", Name);
  end

  // The W fields the processes read, as wires (see npu_axi_demux).
  wire [DataWidth-1:0] w_data = s_req_i.w.data;
  wire [BusBytes-1:0]  w_strb = s_req_i.w.strb;
  wire                 w_last = s_req_i.w.last;

  // ---------------------------------------------------------------- storage
  // The array shrinks to two unused words when the storage is DPI.
  localparam int unsigned Words = UseDpi ? 2 : int'(Size >> OffWidth);
  localparam int unsigned WordBits = $clog2(Words);
  logic [DataWidth-1:0] sram [Words];

  initial begin
    if (UseDpi) npu_mem_open(DpiSlot, Name, Size);
  end

  function automatic logic [DataWidth-1:0] mem_read(logic [63:0] offset);
    bit [1023:0] data;
    if (UseDpi) begin
      npu_mem_read(DpiSlot, offset, BusBytes, data);
      return data[DataWidth-1:0];
    end
    return sram[offset[OffWidth +: WordBits]];
  endfunction

  // Is the beat at `offset` outside the memory or inside the fault window?
  function automatic logic [1:0] beat_resp(logic [63:0] offset);
    if (offset >= Size) return RespSlverr;
    if (fault_size_i != 0 && offset >= fault_base_i && offset - fault_base_i < fault_size_i)
      return fault_resp_i;
    return RespOkay;
  endfunction

  // ---------------------------------------------------------------- read side
  logic [CmdWidth-1:0] ar_head;
  logic                ar_head_valid, ar_pop, ar_ready;
  npu_fifo #(.Width(CmdWidth), .Depth(MaxOutstanding)) u_ar_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i({s_req_i.ar.id, s_req_i.ar.addr, s_req_i.ar.len}),
    .in_valid_i(s_req_i.ar_valid), .in_ready_o(ar_ready),
    .out_data_o(ar_head), .out_valid_o(ar_head_valid), .out_ready_i(ar_pop),
    .count_o()
  );

  // Read latency: each request carries the cycle it arrived in and starts no earlier than
  // ReadLatency cycles later (requests queue in order, so bursts still overlap).
  logic ar_ripe;
  if (ReadLatency > 0) begin : g_latency
    logic [31:0] now_q, head_time;
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) now_q <= '0;
      else now_q <= now_q + 32'd1;
    end
    npu_fifo #(.Width(32), .Depth(MaxOutstanding), .MustAccept(1'b1), .MustHold(1'b1)) u_time_q (
      .clk_i, .rst_ni, .clear_i(1'b0),
      .in_data_i(now_q), .in_valid_i(s_req_i.ar_valid && ar_ready), .in_ready_o(),
      .out_data_o(head_time), .out_valid_o(), .out_ready_i(ar_pop), .count_o()
    );
    assign ar_ripe = now_q - head_time >= 32'(ReadLatency);
  end else begin : g_no_latency
    assign ar_ripe = 1'b1;
  end

  logic                 rd_active_q;
  logic [63:0]          rd_off_q;     // offset of the next beat
  logic [7:0]           rd_left_q;    // beats after the next one
  logic [IdWidth-1:0]   rd_id_q;
  // The R channel's registers.
  logic                 r_valid_q, r_last_q;
  logic [IdWidth-1:0]   r_id_q;
  logic [DataWidth-1:0] r_data_q;
  logic [1:0]           r_resp_q;

  wire emit = !r_valid_q || s_req_i.r_ready;
  // A read beat could be produced this cycle; `rd_go`: it is (the data bus is ours).
  wire rd_want = emit && (rd_active_q || (ar_head_valid && ar_ripe));
  logic rd_go;
  assign ar_pop = rd_go && !rd_active_q;

  logic [63:0]        beat_off;
  logic [IdWidth-1:0] beat_id;
  logic [7:0]         beat_left;
  always_comb begin
    if (rd_active_q) begin
      beat_off  = rd_off_q;
      beat_id   = rd_id_q;
      beat_left = rd_left_q;
    end else begin
      beat_off  = 64'(ar_head[8 +: AddrWidth]) - Base;
      beat_off[OffWidth-1:0] = '0;
      beat_id   = ar_head[8 + AddrWidth +: IdWidth];
      beat_left = ar_head[7:0];
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_active_q  <= 1'b0;
      rd_off_q     <= '0;
      rd_left_q    <= '0;
      rd_id_q      <= '0;
      r_valid_q    <= 1'b0;
      r_data_q     <= '0;
      r_resp_q     <= RespOkay;
      r_last_q     <= 1'b0;
      r_id_q       <= '0;
    end else if (emit) begin
      if (rd_go) begin
        r_valid_q    <= 1'b1;
        r_id_q       <= beat_id;
        r_last_q     <= beat_left == '0;
        r_resp_q     <= beat_resp(beat_off);
        r_data_q     <= (beat_resp(beat_off) == RespOkay) ? mem_read(beat_off) : '0;
        rd_active_q  <= beat_left != '0;
        rd_off_q     <= beat_off + 64'(BusBytes);
        rd_left_q    <= beat_left - 1'b1;
        rd_id_q      <= beat_id;
      end else begin
        r_valid_q    <= 1'b0;
      end
    end
  end

  // ---------------------------------------------------------------- write side
  logic [CmdWidth-1:0] aw_head;
  logic                aw_head_valid, aw_pop, aw_ready;
  npu_fifo #(.Width(CmdWidth), .Depth(MaxOutstanding)) u_aw_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i({s_req_i.aw.id, s_req_i.aw.addr, s_req_i.aw.len}),
    .in_valid_i(s_req_i.aw_valid), .in_ready_o(aw_ready),
    .out_data_o(aw_head), .out_valid_o(aw_head_valid), .out_ready_i(aw_pop),
    .count_o()
  );

  logic               wr_active_q;
  logic [63:0]        wr_off_q;
  logic [IdWidth-1:0] wr_id_q;
  logic [1:0]         wr_resp_q;     // worst response of the burst so far
  logic               b_in_ready, w_ready, b_valid;
  logic [IdWidth-1:0] b_id;
  logic [1:0]         b_resp;

  logic [63:0]        wbeat_off;
  logic [IdWidth-1:0] wbeat_id;
  logic [1:0]         wbeat_resp_acc;
  always_comb begin
    if (wr_active_q) begin
      wbeat_off      = wr_off_q;
      wbeat_id       = wr_id_q;
      wbeat_resp_acc = wr_resp_q;
    end else begin
      wbeat_off      = 64'(aw_head[8 +: AddrWidth]) - Base;
      wbeat_off[OffWidth-1:0] = '0;
      wbeat_id       = aw_head[8 + AddrWidth +: IdWidth];
      wbeat_resp_acc = RespOkay;
    end
  end

  // A beat is taken when its burst is known, the B queue can take the response and (with
  // a shared data bus) the read side does not hold the bus this cycle.
  wire   wr_able      = (wr_active_q || aw_head_valid) && b_in_ready;
  logic  rd_holds;
  assign w_ready      = wr_able && !rd_holds;
  wire   w_fire       = s_req_i.w_valid && w_ready;
  assign aw_pop       = w_fire && !wr_active_q;
  wire [1:0] wbeat_resp = beat_resp(wbeat_off);
  wire [1:0] burst_resp = (wbeat_resp != RespOkay) ? wbeat_resp : wbeat_resp_acc;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_active_q <= 1'b0;
      wr_off_q    <= '0;
      wr_id_q     <= '0;
      wr_resp_q   <= RespOkay;
    end else if (w_fire) begin
      wr_active_q <= !w_last;
      wr_off_q    <= wbeat_off + 64'(BusBytes);
      wr_id_q     <= wbeat_id;
      wr_resp_q   <= burst_resp;
    end
  end

  always_ff @(posedge clk_i) begin
    if (w_fire && wbeat_resp == RespOkay) begin
      if (UseDpi) begin
        npu_mem_write(DpiSlot, wbeat_off, BusBytes, 1024'(w_data), 128'(w_strb));
      end else begin
        for (int l = 0; l < BusBytes; l++) begin
          if (w_strb[l]) sram[wbeat_off[OffWidth +: WordBits]][l*8 +: 8] <= w_data[l*8 +: 8];
        end
      end
    end
  end

  // ---------------------------------------------------------------- data bus sharing
  // Under contention the side whose turn it is moves a beat and hands the turn over, so
  // reads and writes alternate. WREADY never depends on WVALID (no combinational path
  // back into the interconnect); the read side looks at WVALID instead (R is registered).
  if (SharedDataBus) begin : g_shared
    logic turn_wr_q;   // 1: a write beat goes first when both sides have one
    wire  wr_could = wr_able && s_req_i.w_valid;
    assign rd_holds = rd_want && !turn_wr_q;
    assign rd_go    = rd_want && !(wr_could && turn_wr_q);
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) turn_wr_q <= 1'b0;
      else if (rd_want && wr_could) turn_wr_q <= !turn_wr_q;
    end
  end else begin : g_dual
    assign rd_holds = 1'b0;
    assign rd_go    = rd_want;
  end

  npu_fifo #(.Width(IdWidth + 2), .Depth(MaxOutstanding)) u_b_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i({wbeat_id, burst_resp}), .in_valid_i(w_fire && w_last),
    .in_ready_o(b_in_ready),
    .out_data_o({b_id, b_resp}), .out_valid_o(b_valid), .out_ready_i(s_req_i.b_ready),
    .count_o()
  );

  assign s_rsp_o = '{aw_ready: aw_ready, w_ready: w_ready, b: '{id: b_id, resp: b_resp},
                     b_valid: b_valid, ar_ready: ar_ready,
                     r: '{id: r_id_q, data: r_data_q, resp: r_resp_q, last: r_last_q},
                     r_valid: r_valid_q};

  // Only full-width INCR bursts are modelled (all this NPU's masters issue).
  logic unused;
  assign unused = ^{s_req_i.ar.size, s_req_i.ar.burst, s_req_i.aw.size, s_req_i.aw.burst,
                    aw_head[7:0]};

  npu_axi_sva #(
    .Name("memory port"), .MaxOutstanding(255), .req_t(req_t), .rsp_t(rsp_t)
  ) u_sva_slv (.clk_i, .rst_ni, .req_i(s_req_i), .rsp_i(s_rsp_o));
endmodule

`default_nettype wire
