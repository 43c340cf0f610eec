`default_nettype none

/// AXI4 slave that answers every access with DECERR: the interconnect's default slave for
/// addresses no memory decodes. One burst at a time per side; reads return all their beats.
module npu_axi_decerr #(
  parameter type req_t = logic,   /// AXI4 request (rtl/include/npu_axi_typedef.svh)
  parameter type rsp_t = logic    /// AXI4 response
) (
  input  wire  clk_i,   /// clock
  input  wire  rst_ni,  /// asynchronous reset, active low
  input  req_t req_i,   /// of the payloads, only IDs, AR length and W last matter
  output rsp_t rsp_o    /// DECERR, read data 0
);
  localparam logic [1:0] RespDecerr = 2'b11;
  localparam int unsigned IdWidth = $bits(req_i.ar.id);

  // The request's fields the processes read, as wires (see npu_axi_demux).
  wire               ar_valid = req_i.ar_valid, r_ready = req_i.r_ready;
  wire               aw_valid = req_i.aw_valid, w_valid = req_i.w_valid;
  wire               w_last = req_i.w.last, b_ready = req_i.b_ready;
  wire [IdWidth-1:0] ar_id = req_i.ar.id, aw_id = req_i.aw.id;
  wire [7:0]         ar_len = req_i.ar.len;

  logic               rvalid_q;
  logic [7:0]         r_left_q;
  logic               arready, rlast;
  logic [IdWidth-1:0] rid_q, bid_q;

  assign arready = !rvalid_q;
  assign rlast   = r_left_q == '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rvalid_q <= 1'b0;
      rid_q    <= '0;
      r_left_q <= '0;
    end else if (ar_valid && arready) begin
      rvalid_q <= 1'b1;
      rid_q    <= ar_id;
      r_left_q <= ar_len;
    end else if (rvalid_q && r_ready) begin
      if (rlast) rvalid_q <= 1'b0;
      else r_left_q <= r_left_q - 1'b1;
    end
  end

  typedef enum logic [1:0] {WrIdle, WrData, WrResp} wr_state_e;
  wr_state_e wr_state_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_state_q <= WrIdle;
      bid_q      <= '0;
    end else begin
      unique case (wr_state_q)
        WrIdle: if (aw_valid) begin
          bid_q      <= aw_id;
          wr_state_q <= WrData;
        end
        WrData: if (w_valid && w_last) wr_state_q <= WrResp;
        WrResp: if (b_ready) wr_state_q <= WrIdle;
        default: wr_state_q <= WrIdle;
      endcase
    end
  end

  assign rsp_o = '{aw_ready: wr_state_q == WrIdle, w_ready: wr_state_q == WrData,
                   b: '{id: bid_q, resp: RespDecerr}, b_valid: wr_state_q == WrResp,
                   ar_ready: arready,
                   r: '{id: rid_q, data: '0, resp: RespDecerr, last: rlast}, r_valid: rvalid_q};

  logic unused;
  assign unused = ^{req_i.aw.addr, req_i.aw.len, req_i.aw.size, req_i.aw.burst, req_i.w.data,
                    req_i.w.strb, req_i.ar.addr, req_i.ar.size, req_i.ar.burst};
endmodule

`default_nettype wire
