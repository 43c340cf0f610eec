`default_nettype none
`include "npu_assert.svh"

/// AXI4 protocol assertions on one link (simulation only; it drives nothing). Instantiated
/// inside the blocks that own an AXI4 port (npu_dma, npu_cmp_core, npu_axi_mux,
/// npu_axi_demux, npu_axi_mem), so the block tests check them too.
///
/// - every channel: valid held until ready, payload stable while waiting;
/// - AW/AR: an INCR or FIXED burst (never the reserved type), a beat no wider than the bus,
///   and an INCR burst that stays within one 4 KiB page;
/// - responses: no B before its AW and its last W beat, no R without an accepted AR, and
///   no more bursts outstanding than `MaxOutstanding`.
module npu_axi_sva #(
  parameter string       Name = "axi",         /// printed with each failure
  parameter int unsigned MaxOutstanding = 255, /// bursts waiting for a response, at most
  parameter type         req_t = logic,        /// AXI4 request (npu_axi_typedef.svh)
  parameter type         rsp_t = logic         /// AXI4 response
) (
  input wire  clk_i,   /// clock
  input wire  rst_ni,  /// asynchronous reset, active low
  input req_t req_i,   /// the link
  input rsp_t rsp_i
);
  localparam int unsigned BusBytes = $bits(req_i.w.strb);
  localparam logic [2:0] MaxSize = 3'($clog2(BusBytes));
  localparam logic [1:0] BurstIncr = 2'b01, BurstReserved = 2'b11;

  wire aw_fire = req_i.aw_valid && rsp_i.aw_ready;
  wire w_fire  = req_i.w_valid && rsp_i.w_ready;
  wire b_fire  = rsp_i.b_valid && req_i.b_ready;
  wire ar_fire = req_i.ar_valid && rsp_i.ar_ready;
  wire r_fire  = rsp_i.r_valid && req_i.r_ready;

  // Bursts accepted and not yet answered (write addresses, write data bursts, reads).
  logic [8:0] aw_open_q, wlast_open_q, ar_open_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      aw_open_q    <= '0;
      wlast_open_q <= '0;
      ar_open_q    <= '0;
    end else begin
      aw_open_q    <= aw_open_q + 9'(aw_fire) - 9'(b_fire);
      wlast_open_q <= wlast_open_q + 9'(w_fire && req_i.w.last) - 9'(b_fire);
      ar_open_q    <= ar_open_q + 9'(ar_fire) - 9'(r_fire && rsp_i.r.last);
    end
  end

  // The last byte of a burst, relative to its 4 KiB page: past 4095 means it crosses.
  function automatic logic [19:0] burst_end(logic [11:0] page_off, logic [7:0] len,
                                            logic [2:0] size);
    return 20'(page_off) + ((20'(len) + 20'd1) << size) - 20'd1;
  endfunction

  `NPU_ASSERT_HANDSHAKE(AxiAw, req_i.aw_valid, rsp_i.aw_ready, req_i.aw, $sformatf("%s AW", Name))
  `NPU_ASSERT_HANDSHAKE(AxiW, req_i.w_valid, rsp_i.w_ready, req_i.w, $sformatf("%s W", Name))
  `NPU_ASSERT_HANDSHAKE(AxiB, rsp_i.b_valid, req_i.b_ready, rsp_i.b, $sformatf("%s B", Name))
  `NPU_ASSERT_HANDSHAKE(AxiAr, req_i.ar_valid, rsp_i.ar_ready, req_i.ar, $sformatf("%s AR", Name))
  `NPU_ASSERT_HANDSHAKE(AxiR, rsp_i.r_valid, req_i.r_ready, rsp_i.r, $sformatf("%s R", Name))

  `NPU_ASSERT(AxiAwBurstType, !req_i.aw_valid || req_i.aw.burst != BurstReserved,
              $sformatf("%s AW: reserved burst type 2'b11", Name))
  `NPU_ASSERT(AxiArBurstType, !req_i.ar_valid || req_i.ar.burst != BurstReserved,
              $sformatf("%s AR: reserved burst type 2'b11", Name))
  `NPU_ASSERT(AxiAwSize, !req_i.aw_valid || req_i.aw.size <= MaxSize,
              $sformatf("%s AW: beat size %0d wider than the %0d-byte bus", Name,
                        req_i.aw.size, BusBytes))
  `NPU_ASSERT(AxiArSize, !req_i.ar_valid || req_i.ar.size <= MaxSize,
              $sformatf("%s AR: beat size %0d wider than the %0d-byte bus", Name,
                        req_i.ar.size, BusBytes))
  `NPU_ASSERT(AxiAw4K, !req_i.aw_valid || req_i.aw.burst != BurstIncr
              || burst_end(req_i.aw.addr[11:0], req_i.aw.len, req_i.aw.size) < 20'd4096,
              $sformatf("%s AW: burst at %h of %0d beats crosses a 4 KiB boundary", Name,
                        req_i.aw.addr, req_i.aw.len + 1))
  `NPU_ASSERT(AxiAr4K, !req_i.ar_valid || req_i.ar.burst != BurstIncr
              || burst_end(req_i.ar.addr[11:0], req_i.ar.len, req_i.ar.size) < 20'd4096,
              $sformatf("%s AR: burst at %h of %0d beats crosses a 4 KiB boundary", Name,
                        req_i.ar.addr, req_i.ar.len + 1))
  `NPU_ASSERT(AxiBWithoutRequest, !rsp_i.b_valid || (aw_open_q != '0 && wlast_open_q != '0),
              $sformatf("%s B: a write response without an accepted address and last data beat",
                        Name))
  `NPU_ASSERT(AxiRWithoutRequest, !rsp_i.r_valid || ar_open_q != '0,
              $sformatf("%s R: read data without an accepted read address", Name))
  `NPU_ASSERT(AxiOutstanding, aw_open_q <= 9'(MaxOutstanding) && ar_open_q <= 9'(MaxOutstanding),
              $sformatf("%s: more than %0d bursts outstanding (writes %0d, reads %0d)", Name,
                        MaxOutstanding, aw_open_q, ar_open_q))
endmodule

`default_nettype wire
