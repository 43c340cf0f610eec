// Flat AXI ports <-> the request/response structs of npu_axi_typedef.svh, for the few
// places that keep flat ports (npu_top, npu_sim, the block-test tops that cocotbext-axi
// drives by prefix) and for the PeakRDL-generated CSR blocks, whose ports stay flat.
// `prefix` names the flat signals: `prefix`_awvalid, `prefix`_awready, ...

`ifndef NPU_AXI_ASSIGN_SVH_
`define NPU_AXI_ASSIGN_SVH_

// A flat AXI4-Lite slave port (inputs `prefix`_awvalid...) as the request `req` into the
// design and the response `rsp` out of it.
`define NPU_AXIL_ASSIGN_FROM_FLAT(prefix, req, rsp)                                     \
  assign req = '{aw: '{addr: prefix``_awaddr, prot: prefix``_awprot},                   \
                 aw_valid: prefix``_awvalid,                                            \
                 w: '{data: prefix``_wdata, strb: prefix``_wstrb},                      \
                 w_valid: prefix``_wvalid, b_ready: prefix``_bready,                    \
                 ar: '{addr: prefix``_araddr, prot: prefix``_arprot},                   \
                 ar_valid: prefix``_arvalid, r_ready: prefix``_rready};                 \
  assign prefix``_awready = rsp.aw_ready;                                               \
  assign prefix``_wready  = rsp.w_ready;                                                \
  assign prefix``_bvalid  = rsp.b_valid;                                                \
  assign prefix``_bresp   = rsp.b.resp;                                                 \
  assign prefix``_arready = rsp.ar_ready;                                               \
  assign prefix``_rvalid  = rsp.r_valid;                                                \
  assign prefix``_rdata   = rsp.r.data;                                                 \
  assign prefix``_rresp   = rsp.r.resp;

// The port connections of a flat AXI4-Lite slave instance (a PeakRDL block) to `req`/`rsp`.
`define NPU_AXIL_CONNECT_FLAT(prefix, req, rsp)                                         \
  .prefix``_awready(rsp.aw_ready), .prefix``_awvalid(req.aw_valid),                     \
  .prefix``_awaddr(req.aw.addr), .prefix``_awprot(req.aw.prot),                         \
  .prefix``_wready(rsp.w_ready), .prefix``_wvalid(req.w_valid),                         \
  .prefix``_wdata(req.w.data), .prefix``_wstrb(req.w.strb),                             \
  .prefix``_bready(req.b_ready), .prefix``_bvalid(rsp.b_valid),                         \
  .prefix``_bresp(rsp.b.resp),                                                          \
  .prefix``_arready(rsp.ar_ready), .prefix``_arvalid(req.ar_valid),                     \
  .prefix``_araddr(req.ar.addr), .prefix``_arprot(req.ar.prot),                         \
  .prefix``_rready(req.r_ready), .prefix``_rvalid(rsp.r_valid),                         \
  .prefix``_rdata(rsp.r.data), .prefix``_rresp(rsp.r.resp)

// A flat AXI4 master port (outputs `prefix`_arid...) driven by the request `req` out of
// the design, its inputs gathered into the response `rsp`.
`define NPU_AXI_ASSIGN_TO_FLAT(prefix, req, rsp)                                        \
  assign prefix``_awid    = req.aw.id;                                                  \
  assign prefix``_awaddr  = req.aw.addr;                                                \
  assign prefix``_awlen   = req.aw.len;                                                 \
  assign prefix``_awsize  = req.aw.size;                                                \
  assign prefix``_awburst = req.aw.burst;                                               \
  assign prefix``_awvalid = req.aw_valid;                                               \
  assign prefix``_wdata   = req.w.data;                                                 \
  assign prefix``_wstrb   = req.w.strb;                                                 \
  assign prefix``_wlast   = req.w.last;                                                 \
  assign prefix``_wvalid  = req.w_valid;                                                \
  assign prefix``_bready  = req.b_ready;                                                \
  assign prefix``_arid    = req.ar.id;                                                  \
  assign prefix``_araddr  = req.ar.addr;                                                \
  assign prefix``_arlen   = req.ar.len;                                                 \
  assign prefix``_arsize  = req.ar.size;                                                \
  assign prefix``_arburst = req.ar.burst;                                               \
  assign prefix``_arvalid = req.ar_valid;                                               \
  assign prefix``_rready  = req.r_ready;                                                \
  assign rsp = '{aw_ready: prefix``_awready, w_ready: prefix``_wready,                  \
                 b: '{id: prefix``_bid, resp: prefix``_bresp}, b_valid: prefix``_bvalid, \
                 ar_ready: prefix``_arready,                                            \
                 r: '{id: prefix``_rid, data: prefix``_rdata, resp: prefix``_rresp,     \
                      last: prefix``_rlast},                                            \
                 r_valid: prefix``_rvalid};

`endif  // NPU_AXI_ASSIGN_SVH_
