`default_nettype none

/// AXI4-Lite 1-to-2 demultiplexer for the register blocks: one write at a time, and up
/// to `ReadsInFlight` reads in flight to one block.
///
/// Port 0 decodes [Base0, Base0 + BlockSize), port 1 [Base1, Base1 + BlockSize); slaves
/// see the 12-bit offset inside their block (with 12-bit master types). Any other address
/// answers DECERR, or with `Port1TakesRest` goes to port 1 (the simulation top's fault
/// controller beside the whole NPU: rtl/sim/npu_fault_ctl.sv).
///
/// No register stage: while a side is idle its address (and write data) handshakes go
/// straight through to the block the address selects, and the block's response comes
/// straight back, so a demux costs no cycle (a read or write through a PeakRDL block takes
/// 3 cycles back to back; with registered stages here it took 5). The selected block is
/// remembered from the address handshake to the response handshake. A write holds the
/// write side until its response. Reads to the block the reads in flight went to pass
/// straight through too (a PeakRDL block answers them in order), so reads can follow each
/// other every cycle; a read to the other block, or to no block (DECERR), waits until
/// those are answered, which keeps the responses in order with no reorder buffer.
module npu_axil_demux #(
  parameter logic [31:0] Base0 = 32'h4000_0000,  /// first block (NPU CSRs)
  parameter logic [31:0] Base1 = 32'h8000_0000,  /// second block (DMA CSRs)
  parameter logic [31:0] BlockSize = 32'h1000,   /// bytes each block decodes (4 KiB)
  parameter int unsigned ReadsInFlight = 4,      /// reads in flight to one block, at most
  parameter bit          Port1TakesRest = 1'b0,  /// 1: port 1 decodes every other address
  parameter type slv_req_t = logic,  /// AXI4-Lite request, 32-bit address (npu_axi_typedef.svh)
  parameter type slv_rsp_t = logic,  /// AXI4-Lite response
  parameter type mst_req_t = logic,  /// AXI4-Lite request, 12-bit block offset
  parameter type mst_rsp_t = logic   /// AXI4-Lite response
) (
  input  wire            clk_i,      /// clock
  input  wire            rst_ni,     /// asynchronous reset, active low
  input  slv_req_t       slv_req_i,  /// from the CPU
  output slv_rsp_t       slv_rsp_o,
  output mst_req_t [1:0] mst_req_o,  /// to the two blocks: payloads shared, valids steered
  input  mst_rsp_t [1:0] mst_rsp_i
);
  localparam logic [1:0] RespDecerr = 2'b11;

  // Continuous assignments, and clocked processes that read wires, not the struct ports
  // (see npu_axi_demux).

  // 0 / 1: a block; 2: nobody.
  logic [1:0] aw_dec, ar_dec;
  assign aw_dec = slv_req_i.aw.addr - Base0 < BlockSize ? 2'd0
                : Port1TakesRest || slv_req_i.aw.addr - Base1 < BlockSize ? 2'd1 : 2'd2;
  assign ar_dec = slv_req_i.ar.addr - Base0 < BlockSize ? 2'd0
                : Port1TakesRest || slv_req_i.ar.addr - Base1 < BlockSize ? 2'd1 : 2'd2;

  // ---------------------------------------------------------------- writes
  typedef enum logic [1:0] {WrAddr, WrResp, WrDecerr} wr_state_e;
  wr_state_e   wr_state_q;
  logic        aw_got_q, w_got_q;  // handshakes of the current write already made
  logic [1:0]  wr_sel_q;           // its block, once AW went through
  logic [1:0]  wr_sel;
  logic        wr_known, aw_take, w_take, awready, wready, bvalid, b_done;

  // The block of the write: known once AW is offered (W waits for it: a slave may hold
  // WREADY until it sees the address).
  assign wr_sel    = aw_got_q ? wr_sel_q : aw_dec;
  assign wr_known  = aw_got_q || slv_req_i.aw_valid;
  assign awready   = wr_state_q == WrAddr && !aw_got_q
                  && (wr_sel == 2'd2 || (wr_sel[0] ? mst_rsp_i[1].aw_ready
                                                   : mst_rsp_i[0].aw_ready));
  assign wready    = wr_state_q == WrAddr && !w_got_q && wr_known
                  && (wr_sel == 2'd2 || (wr_sel[0] ? mst_rsp_i[1].w_ready
                                                   : mst_rsp_i[0].w_ready));
  assign aw_take   = slv_req_i.aw_valid && awready;
  assign w_take    = slv_req_i.w_valid && wready;
  assign bvalid    = wr_state_q == WrDecerr || (wr_state_q == WrResp
                  && (wr_sel_q[0] ? mst_rsp_i[1].b_valid : mst_rsp_i[0].b_valid));
  assign b_done    = bvalid && slv_req_i.b_ready;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_state_q <= WrAddr;
      aw_got_q   <= 1'b0;
      w_got_q    <= 1'b0;
      wr_sel_q   <= '0;
    end else begin
      unique case (wr_state_q)
        WrAddr: begin
          if (aw_take) begin
            aw_got_q <= 1'b1;
            wr_sel_q <= wr_sel;
          end
          if (w_take) w_got_q <= 1'b1;
          if ((aw_got_q || aw_take) && (w_got_q || w_take)) begin
            aw_got_q   <= 1'b0;
            w_got_q    <= 1'b0;
            wr_sel_q   <= wr_sel;
            wr_state_q <= wr_sel == 2'd2 ? WrDecerr : WrResp;
          end
        end
        WrResp, WrDecerr: if (b_done) wr_state_q <= WrAddr;
        default: wr_state_q <= WrAddr;
      endcase
    end
  end

  // ---------------------------------------------------------------- reads
  // The read side: reads in flight and where they went (the decode of the first of them).
  localparam int unsigned CountWidth = $clog2(ReadsInFlight + 1);
  logic [CountWidth-1:0] rd_count_q;
  logic                  rd_sel_q;     // their block
  logic                  rd_decerr_q;  // one read to no block: answered here
  logic [1:0]            rd_sel;
  logic                  rd_same, arready, rvalid, ar_take, r_done;

  assign rd_sel  = ar_dec;
  // The read may follow those in flight: the same block, and room for it.
  assign rd_same = !rd_decerr_q && rd_sel != 2'd2 && rd_sel[0] == rd_sel_q
                && rd_count_q < CountWidth'(ReadsInFlight);
  assign arready = (rd_count_q == '0 || rd_same)
                && (rd_sel == 2'd2 || (rd_sel[0] ? mst_rsp_i[1].ar_ready
                                                 : mst_rsp_i[0].ar_ready));
  assign rvalid  = rd_count_q != '0 && (rd_decerr_q
                || (rd_sel_q ? mst_rsp_i[1].r_valid : mst_rsp_i[0].r_valid));
  assign ar_take = slv_req_i.ar_valid && arready;
  assign r_done  = rvalid && slv_req_i.r_ready;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_count_q  <= '0;
      rd_sel_q    <= '0;
      rd_decerr_q <= 1'b0;
    end else begin
      if (ar_take) begin
        rd_sel_q    <= rd_sel[0];
        rd_decerr_q <= rd_sel == 2'd2;
      end
      if (ar_take && !r_done) rd_count_q <= rd_count_q + CountWidth'(1);
      else if (!ar_take && r_done) rd_count_q <= rd_count_q - CountWidth'(1);
    end
  end

  assign slv_rsp_o = '{
    aw_ready: awready, w_ready: wready,
    b: '{resp: wr_state_q == WrDecerr ? RespDecerr
             : wr_sel_q[0] ? mst_rsp_i[1].b.resp : mst_rsp_i[0].b.resp},
    b_valid: bvalid, ar_ready: arready,
    r: '{data: rd_count_q == '0 || rd_decerr_q ? '0
             : rd_sel_q ? mst_rsp_i[1].r.data : mst_rsp_i[0].r.data,
         resp: rd_decerr_q ? RespDecerr
             : rd_sel_q ? mst_rsp_i[1].r.resp : mst_rsp_i[0].r.resp},
    r_valid: rvalid
  };
  // Payloads shared; the valids and readies of the block the access goes to. A block sees
  // its 12-bit offset; port 1 taking every other address sees the whole address.
  localparam int unsigned MstAddrBits = $bits(mst_req_o[0].aw.addr);
  for (genvar i = 0; i < 2; i++) begin : g_mst
    localparam logic [31:0] Keep = Port1TakesRest && i == 1 ? '1 : 32'hFFF;
    assign mst_req_o[i] = '{
      aw: '{addr: MstAddrBits'(slv_req_i.aw.addr & Keep), prot: slv_req_i.aw.prot},
      aw_valid: wr_state_q == WrAddr && wr_sel == 2'(i) && slv_req_i.aw_valid && !aw_got_q,
      w: slv_req_i.w,
      w_valid: wr_state_q == WrAddr && wr_sel == 2'(i) && slv_req_i.w_valid && !w_got_q
               && wr_known,
      b_ready: wr_state_q == WrResp && wr_sel_q[0] == 1'(i) && slv_req_i.b_ready,
      ar: '{addr: MstAddrBits'(slv_req_i.ar.addr & Keep), prot: slv_req_i.ar.prot},
      ar_valid: (rd_count_q == '0 || rd_same) && rd_sel == 2'(i) && slv_req_i.ar_valid,
      r_ready: rd_count_q != '0 && !rd_decerr_q && rd_sel_q == 1'(i) && slv_req_i.r_ready
    };
  end
endmodule

`default_nettype wire
