// AXI4 and AXI4-Lite channel and request/response structs, in the style of
// pulp-platform/axi's include/axi/typedef.svh: a module that joins blocks declares the
// types for its widths with one macro, and the blocks take them as type parameters
// (`parameter type req_t = logic`), so one block serves every bus width of every build.
//
// Only the fields this NPU's RTL uses: no lock, cache, prot (AXI4), qos, region, atop or
// user. Requests carry the master's payloads, valids and the response readies; responses
// carry the slave's payloads, valids and the request readies.
//
// Usage:
//   typedef logic [AddrWidth-1:0] addr_t; ... (id_t, data_t, strb_t likewise)
//   `NPU_AXI_TYPEDEF_ALL(axi, addr_t, id_t, data_t, strb_t)
//     -> axi_aw_chan_t, axi_w_chan_t, axi_b_chan_t, axi_ar_chan_t, axi_r_chan_t,
//        axi_req_t, axi_rsp_t
//   `NPU_AXIL_TYPEDEF_ALL(axil, addr_t, data_t, strb_t)  (same names, AXI4-Lite)

`ifndef NPU_AXI_TYPEDEF_SVH_
`define NPU_AXI_TYPEDEF_SVH_

// ---------------------------------------------------------------------------- AXI4
`define NPU_AXI_TYPEDEF_AX_CHAN_T(ax_chan_t, addr_t, id_t) \
  typedef struct packed {                                  \
    id_t        id;                                        \
    addr_t      addr;                                      \
    logic [7:0] len;                                       \
    logic [2:0] size;                                      \
    logic [1:0] burst;                                     \
  } ax_chan_t;
`define NPU_AXI_TYPEDEF_W_CHAN_T(w_chan_t, data_t, strb_t) \
  typedef struct packed {                                  \
    data_t data;                                           \
    strb_t strb;                                           \
    logic  last;                                           \
  } w_chan_t;
`define NPU_AXI_TYPEDEF_B_CHAN_T(b_chan_t, id_t) \
  typedef struct packed {                        \
    id_t        id;                              \
    logic [1:0] resp;                            \
  } b_chan_t;
`define NPU_AXI_TYPEDEF_R_CHAN_T(r_chan_t, data_t, id_t) \
  typedef struct packed {                                \
    id_t        id;                                      \
    data_t      data;                                    \
    logic [1:0] resp;                                    \
    logic       last;                                    \
  } r_chan_t;
`define NPU_AXI_TYPEDEF_REQ_T(req_t, aw_chan_t, w_chan_t, ar_chan_t) \
  typedef struct packed {                                            \
    aw_chan_t aw;                                                    \
    logic     aw_valid;                                              \
    w_chan_t  w;                                                     \
    logic     w_valid;                                               \
    logic     b_ready;                                               \
    ar_chan_t ar;                                                    \
    logic     ar_valid;                                              \
    logic     r_ready;                                               \
  } req_t;
`define NPU_AXI_TYPEDEF_RSP_T(rsp_t, b_chan_t, r_chan_t) \
  typedef struct packed {                                \
    logic    aw_ready;                                   \
    logic    w_ready;                                    \
    b_chan_t b;                                          \
    logic    b_valid;                                    \
    logic    ar_ready;                                   \
    r_chan_t r;                                          \
    logic    r_valid;                                    \
  } rsp_t;

`define NPU_AXI_TYPEDEF_ALL(name, addr_t, id_t, data_t, strb_t)                       \
  `NPU_AXI_TYPEDEF_AX_CHAN_T(name``_aw_chan_t, addr_t, id_t)                          \
  `NPU_AXI_TYPEDEF_W_CHAN_T(name``_w_chan_t, data_t, strb_t)                          \
  `NPU_AXI_TYPEDEF_B_CHAN_T(name``_b_chan_t, id_t)                                    \
  `NPU_AXI_TYPEDEF_AX_CHAN_T(name``_ar_chan_t, addr_t, id_t)                          \
  `NPU_AXI_TYPEDEF_R_CHAN_T(name``_r_chan_t, data_t, id_t)                            \
  `NPU_AXI_TYPEDEF_REQ_T(name``_req_t, name``_aw_chan_t, name``_w_chan_t, name``_ar_chan_t) \
  `NPU_AXI_TYPEDEF_RSP_T(name``_rsp_t, name``_b_chan_t, name``_r_chan_t)

// ---------------------------------------------------------------------------- AXI4-Lite
`define NPU_AXIL_TYPEDEF_AX_CHAN_T(ax_chan_t, addr_t) \
  typedef struct packed {                             \
    addr_t      addr;                                 \
    logic [2:0] prot;                                 \
  } ax_chan_t;
`define NPU_AXIL_TYPEDEF_W_CHAN_T(w_chan_t, data_t, strb_t) \
  typedef struct packed {                                   \
    data_t data;                                            \
    strb_t strb;                                            \
  } w_chan_t;
`define NPU_AXIL_TYPEDEF_B_CHAN_T(b_chan_t) \
  typedef struct packed {                   \
    logic [1:0] resp;                       \
  } b_chan_t;
`define NPU_AXIL_TYPEDEF_R_CHAN_T(r_chan_t, data_t) \
  typedef struct packed {                           \
    data_t      data;                               \
    logic [1:0] resp;                               \
  } r_chan_t;

`define NPU_AXIL_TYPEDEF_ALL(name, addr_t, data_t, strb_t)                            \
  `NPU_AXIL_TYPEDEF_AX_CHAN_T(name``_aw_chan_t, addr_t)                               \
  `NPU_AXIL_TYPEDEF_W_CHAN_T(name``_w_chan_t, data_t, strb_t)                         \
  `NPU_AXIL_TYPEDEF_B_CHAN_T(name``_b_chan_t)                                         \
  `NPU_AXIL_TYPEDEF_AX_CHAN_T(name``_ar_chan_t, addr_t)                               \
  `NPU_AXIL_TYPEDEF_R_CHAN_T(name``_r_chan_t, data_t)                                 \
  `NPU_AXI_TYPEDEF_REQ_T(name``_req_t, name``_aw_chan_t, name``_w_chan_t, name``_ar_chan_t) \
  `NPU_AXI_TYPEDEF_RSP_T(name``_rsp_t, name``_b_chan_t, name``_r_chan_t)

`endif  // NPU_AXI_TYPEDEF_SVH_
