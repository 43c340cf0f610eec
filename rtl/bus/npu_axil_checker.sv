`default_nettype none
`include "npu_assert.svh"

/// AXI4-Lite protocol assertions on one link (simulation only; it drives nothing), in the
/// package of rtl/include/npu_assert.svh:
/// - handshake stability: while `valid && !ready` on any channel, `valid` stays high and
///   the payload (address, prot, data, strobes, response) does not change;
/// - a write alone on the link: no address or data handshake while a write waits for its
///   response, no write while reads wait for theirs, no write channel accepted twice;
///   reads may follow reads (up to `MaxReads` waiting: the NPU's register port pipelines
///   them);
/// - responses: none without a request, and never EXOKAY (illegal in AXI4-Lite).
/// A failure is reported with `Name` (npuemu.sim.assertions reads the reports).
module npu_axil_checker #(
  parameter string Name = "axil",  /// printed with each failure
  parameter int unsigned MaxReads = 4,  /// reads waiting for their data, at most
  parameter type   req_t = logic,  /// AXI4-Lite request, 32-bit data (npu_axi_typedef.svh)
  parameter type   rsp_t = logic   /// AXI4-Lite response
) (
  input  wire         clk_i,        /// clock
  input  wire         rst_ni,       /// asynchronous reset, active low
  input  req_t        req_i,        /// the link
  input  rsp_t        rsp_i,
  /// A testbench master may drive the link this cycle that is known to end a request a
  /// cycle early (cocotbext-axi under npu_sim's clock samples `ready` after the edge:
  /// docs/hardware.md): the master side's valid-held and payload-stable are not checked
  /// then; the rest is.
  input  wire         tb_i
);
  // The link's signals by name: test_regbus.py's bus monitor reads them here (cocotb.vlt).
  wire        awvalid = req_i.aw_valid, awready = rsp_i.aw_ready;
  wire [$bits(req_i.aw.addr)-1:0] awaddr = req_i.aw.addr;
  wire [2:0]  awprot  = req_i.aw.prot;
  wire        wvalid  = req_i.w_valid, wready = rsp_i.w_ready;
  wire [31:0] wdata   = req_i.w.data;
  wire [3:0]  wstrb   = req_i.w.strb;
  wire        bvalid  = rsp_i.b_valid, bready = req_i.b_ready;
  wire [1:0]  bresp   = rsp_i.b.resp;
  wire        arvalid = req_i.ar_valid, arready = rsp_i.ar_ready;
  wire [$bits(req_i.ar.addr)-1:0] araddr = req_i.ar.addr;
  wire [2:0]  arprot  = req_i.ar.prot;
  wire        rvalid  = rsp_i.r_valid, rready = req_i.r_ready;
  wire [31:0] rdata   = rsp_i.r.data;
  wire [1:0]  rresp   = rsp_i.r.resp;

  localparam logic [1:0] RespExokay = 2'b01;
  localparam int unsigned CountWidth = $clog2(MaxReads + 2);

  wire aw_fire = awvalid && awready;
  wire w_fire  = wvalid && wready;
  wire b_fire  = bvalid && bready;
  wire ar_fire = arvalid && arready;
  wire r_fire  = rvalid && rready;

  // Transaction state: reads waiting for their data, a write address / data accepted.
  logic [CountWidth-1:0] rd_open_q;
  logic aw_open_q, w_open_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_open_q <= '0;
      aw_open_q <= 1'b0;
      w_open_q  <= 1'b0;
    end else begin
      if (ar_fire && !r_fire) rd_open_q <= rd_open_q + CountWidth'(1);
      else if (!ar_fire && r_fire && rd_open_q != '0) rd_open_q <= rd_open_q - CountWidth'(1);
      if (aw_fire) aw_open_q <= 1'b1;
      else if (b_fire) aw_open_q <= 1'b0;
      if (w_fire) w_open_q <= 1'b1;
      else if (b_fire) w_open_q <= 1'b0;
    end
  end

  // The master's channels (unless a testbench master may drive: tb_i): valid held, payload
  // stable while held.
  `NPU_ASSERT(AxilAwHeld, awvalid && !awready && !tb_i |=> awvalid || tb_i,
              $sformatf("%s AW: valid dropped before ready", Name))
  `NPU_ASSERT(AxilWHeld, wvalid && !wready && !tb_i |=> wvalid || tb_i,
              $sformatf("%s W: valid dropped before ready", Name))
  `NPU_ASSERT(AxilArHeld, arvalid && !arready && !tb_i |=> arvalid || tb_i,
              $sformatf("%s AR: valid dropped before ready", Name))
  `NPU_ASSERT(AxilAwStable, awvalid && !awready && !tb_i |=> !awvalid || tb_i || $stable({awaddr, awprot}),
              $sformatf("%s AW: payload changed while waiting for ready", Name))
  `NPU_ASSERT(AxilWStable, wvalid && !wready && !tb_i |=> !wvalid || tb_i || $stable({wdata, wstrb}),
              $sformatf("%s W: payload changed while waiting for ready", Name))
  `NPU_ASSERT(AxilArStable, arvalid && !arready && !tb_i |=> !arvalid || tb_i || $stable({araddr, arprot}),
              $sformatf("%s AR: payload changed while waiting for ready", Name))
  // The slave's channels.
  `NPU_ASSERT_HANDSHAKE(AxilB, bvalid, bready, bresp, $sformatf("%s B", Name))
  `NPU_ASSERT_HANDSHAKE(AxilR, rvalid, rready, {rdata, rresp}, $sformatf("%s R", Name))

  `NPU_ASSERT_NEVER(AxilReadDuringWrite, ar_fire && (aw_open_q || w_open_q || aw_fire || w_fire),
                    $sformatf("%s: a read accepted while a write is on the link", Name))
  `NPU_ASSERT_NEVER(AxilTooManyReads, ar_fire && rd_open_q >= CountWidth'(MaxReads),
                    $sformatf("%s: a read accepted with %0d already waiting", Name, MaxReads))
  `NPU_ASSERT_NEVER(AxilWriteDuringRead, (aw_fire || w_fire) && rd_open_q != '0,
                    $sformatf("%s: a write accepted while reads wait for their data", Name))
  `NPU_ASSERT_NEVER(AxilWriteTwice, (aw_fire && aw_open_q) || (w_fire && w_open_q),
                    $sformatf("%s: a write channel accepted twice before the response", Name))
  `NPU_ASSERT_NEVER(AxilRWithoutRequest, rvalid && rd_open_q == '0,
                    $sformatf("%s R: read data without a read waiting", Name))
  `NPU_ASSERT_NEVER(AxilBWithoutRequest, bvalid && !(aw_open_q && w_open_q),
                    $sformatf("%s B: a write response before address and data were accepted",
                              Name))
  `NPU_ASSERT_NEVER(AxilRExokay, rvalid && rresp == RespExokay,
                    $sformatf("%s R: EXOKAY is illegal in AXI4-Lite", Name))
  `NPU_ASSERT_NEVER(AxilBExokay, bvalid && bresp == RespExokay,
                    $sformatf("%s B: EXOKAY is illegal in AXI4-Lite", Name))
endmodule

`default_nettype wire
