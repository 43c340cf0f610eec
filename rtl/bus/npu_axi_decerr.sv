`default_nettype none

/// AXI4 slave that answers every access with DECERR: the interconnect's default slave for
/// addresses no memory decodes. One burst at a time per side; reads return all their beats.
module npu_axi_decerr #(
  parameter int unsigned IdWidth = 4   /// AXI ID bits
) (
  input  wire                clk_i,     /// clock
  input  wire                rst_ni,    /// asynchronous reset, active low
  input  wire  [IdWidth-1:0] arid_i,
  input  wire  [7:0]         arlen_i,
  input  wire                arvalid_i,
  output logic               arready_o,
  output logic [IdWidth-1:0] rid_o,
  output logic               rlast_o,
  output logic               rvalid_o,
  input  wire                rready_i,
  input  wire  [IdWidth-1:0] awid_i,
  input  wire                awvalid_i,
  output logic               awready_o,
  input  wire                wlast_i,
  input  wire                wvalid_i,
  output logic               wready_o,
  output logic [IdWidth-1:0] bid_o,
  output logic               bvalid_o,
  input  wire                bready_i
);
  logic [7:0] r_left_q;

  assign arready_o = !rvalid_o;
  assign rlast_o   = r_left_q == '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rvalid_o <= 1'b0;
      rid_o    <= '0;
      r_left_q <= '0;
    end else if (arvalid_i && arready_o) begin
      rvalid_o <= 1'b1;
      rid_o    <= arid_i;
      r_left_q <= arlen_i;
    end else if (rvalid_o && rready_i) begin
      if (rlast_o) rvalid_o <= 1'b0;
      else r_left_q <= r_left_q - 1'b1;
    end
  end

  typedef enum logic [1:0] {WrIdle, WrData, WrResp} wr_state_e;
  wr_state_e wr_state_q;

  assign awready_o = wr_state_q == WrIdle;
  assign wready_o  = wr_state_q == WrData;
  assign bvalid_o  = wr_state_q == WrResp;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wr_state_q <= WrIdle;
      bid_o      <= '0;
    end else begin
      unique case (wr_state_q)
        WrIdle: if (awvalid_i) begin
          bid_o      <= awid_i;
          wr_state_q <= WrData;
        end
        WrData: if (wvalid_i && wlast_i) wr_state_q <= WrResp;
        WrResp: if (bready_i) wr_state_q <= WrIdle;
        default: wr_state_q <= WrIdle;
      endcase
    end
  end
endmodule

`default_nettype wire
