`default_nettype none

/// The fault controller's hand on the NPU's memory interconnect (rtl/regs/fault.rdl,
/// MEM_*), between the masters' mux and the memories' demux in npu_top. Each burst is judged once, on the first
/// cycle its AR or AW is presented: does it overlap the range, come from the right master
/// and direction? That is an event for `npu_fault_trigger`, which says whether the fault
/// fires on it. A fired burst then:
///
/// - MODE 1, error: answers `resp_i` on every R beat, or on B (a write's data still
///   reaches the memory: as on many AXI slaves, the response says it failed);
/// - MODE 2, stall: is not accepted until `release_i` (a register write on the NPU's
///   port: the driver's abort), then goes through;
/// - MODE 3, bit flip: its read data has bit `bit_i` flipped in the first byte of the
///   burst inside the range (a one-byte range names the byte).
///
/// The demux answers in request order on each side, so a FIFO per side carries each
/// burst's verdict from its request to its response. Pass-through otherwise: no cycle is
/// added, and a disarmed controller changes nothing.
module npu_fault_axi #(
  parameter int unsigned BusBytes = 16,  /// bytes per data beat
  parameter int unsigned IdWidth = 4,    /// AXI ID bits; the top bit names the master
  parameter int unsigned Depth = 16,     /// bursts in flight per side, at most
  parameter type         req_t = logic,  /// AXI4 request (npu_axi_typedef.svh)
  parameter type         rsp_t = logic   /// AXI4 response
) (
  input  wire         clk_i,      /// clock
  input  wire         rst_ni,     /// asynchronous reset, active low
  input  wire  [1:0]  mode_i,     /// 0 off, 1 error, 2 stall, 3 bit flip
  input  wire  [1:0]  resp_i,     /// error response (SLVERR/DECERR)
  input  wire  [1:0]  unit_i,     /// 0 any master, 1 DMA (ID top bit 0), 2 engine (1)
  input  wire         reads_i,    /// read bursts count
  input  wire         writes_i,   /// write bursts count
  input  wire  [63:0] base_i,     /// first byte of the range (the flipped byte, MODE 3)
  input  wire  [63:0] size_i,     /// bytes in the range
  input  wire  [2:0]  bit_i,      /// bit flipped (MODE 3)
  input  wire         release_i,  /// a stalled burst may go (MODE 2)
  output logic [1:0]  event_o,    /// [0] an AR, [1] an AW counts this cycle
  input  wire  [1:0]  fire_i,     /// the trigger fires on it
  input  req_t        s_req_i,    /// from the NPU
  output rsp_t        s_rsp_o,
  output req_t        m_req_o,    /// to the memory
  input  rsp_t        m_rsp_i
);
  localparam int unsigned OffBits = $clog2(BusBytes);
  localparam int unsigned PosBits = OffBits + 3;
  localparam int unsigned Top = IdWidth - 1;
  localparam logic [1:0] ModeError = 2'd1, ModeStall = 2'd2, ModeFlip = 2'd3;

  // The request fields, as wires (see npu_axi_demux: processes read wires, not struct ports).
  wire               ar_valid = s_req_i.ar_valid;
  wire [63:0]        ar_addr = 64'(s_req_i.ar.addr);
  wire [7:0]         ar_len = s_req_i.ar.len;
  wire               ar_top = s_req_i.ar.id[Top];
  wire               aw_valid = s_req_i.aw_valid;
  wire [63:0]        aw_addr = 64'(s_req_i.aw.addr);
  wire [7:0]         aw_len = s_req_i.aw.len;
  wire               aw_top = s_req_i.aw.id[Top];

  function automatic logic overlaps(logic [63:0] addr, logic [7:0] len);
    logic [63:0] bytes;
    bytes = (64'(len) + 64'd1) << OffBits;
    return addr - base_i < size_i || base_i - addr < bytes;
  endfunction

  function automatic logic unit_ok(logic top);
    return unit_i == 2'd0 || (unit_i == 2'd1 && !top) || (unit_i == 2'd2 && top);
  endfunction

  function automatic logic counts(logic valid, logic [63:0] addr, logic [7:0] len, logic top,
                                  logic side_on);
    if (mode_i == 2'd0 || !valid || !side_on || !unit_ok(top)) return 1'b0;
    return overlaps(addr, len);
  endfunction

  // A burst is judged on the cycle it is first presented (`*_seen_q`: it was presented and
  // not taken last cycle, so this is the same burst); the verdict waits for its handshake.
  logic ar_seen_q, aw_seen_q, ar_fired_q, aw_fired_q, ar_stall_q, aw_stall_q;
  logic ar_fired, aw_fired, ar_stall, aw_stall, ar_take, aw_take;
  assign event_o[0] = !ar_seen_q && counts(ar_valid, ar_addr, ar_len, ar_top, reads_i);
  assign event_o[1] = !aw_seen_q && counts(aw_valid, aw_addr, aw_len, aw_top, writes_i);
  assign ar_fired = ar_seen_q ? ar_fired_q : fire_i[0];
  assign aw_fired = aw_seen_q ? aw_fired_q : fire_i[1];
  // A stall ends at `release_i`, or when the fault is disarmed or changed.
  assign ar_stall = (ar_stall_q || (!ar_seen_q && fire_i[0])) && mode_i == ModeStall && !release_i;
  assign aw_stall = (aw_stall_q || (!aw_seen_q && fire_i[1])) && mode_i == ModeStall && !release_i;

  // ---------------------------------------------------------------- requests
  // Field by field, not a whole struct in one process: the memory's response depends on
  // its request (a shared data bus), which Verilator would see as one circular signal.
  logic r_q_ready, b_q_ready;
  assign m_req_o.aw       = s_req_i.aw;
  assign m_req_o.aw_valid = aw_valid && !aw_stall && b_q_ready;
  assign m_req_o.w        = s_req_i.w;
  assign m_req_o.w_valid  = s_req_i.w_valid;
  assign m_req_o.b_ready  = s_req_i.b_ready;
  assign m_req_o.ar       = s_req_i.ar;
  assign m_req_o.ar_valid = ar_valid && !ar_stall && r_q_ready;
  assign m_req_o.r_ready  = s_req_i.r_ready;
  assign ar_take = ar_valid && m_req_o.ar_valid && m_rsp_i.ar_ready;
  assign aw_take = aw_valid && m_req_o.aw_valid && m_rsp_i.aw_ready;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      {ar_seen_q, aw_seen_q, ar_fired_q, aw_fired_q, ar_stall_q, aw_stall_q} <= '0;
    end else begin
      ar_seen_q  <= ar_valid && !ar_take;
      aw_seen_q  <= aw_valid && !aw_take;
      ar_fired_q <= ar_fired && !ar_take;
      aw_fired_q <= aw_fired && !aw_take;
      ar_stall_q <= ar_stall && !ar_take;
      aw_stall_q <= aw_stall && !aw_take;
    end
  end

  // ---------------------------------------------------------------- verdicts
  // R: {error, flip, beat of the flip, bit position in the beat}; B: {error}.
  // The flipped byte: the range's first byte, or the burst's when the range starts before it.
  logic [63:0] flip_off;
  assign flip_off = base_i > ar_addr ? base_i - ar_addr : 64'd0;
  logic             r_head_valid, r_head_err, r_head_flip;
  logic [7:0]       r_head_beat;
  logic [PosBits-1:0] r_head_pos;
  logic             b_head_err;
  logic             r_pop, b_pop;

  npu_fifo #(.Width(2 + 8 + PosBits), .Depth(Depth)) u_r_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i({ar_fired && mode_i == ModeError, ar_fired && mode_i == ModeFlip,
                8'(flip_off >> OffBits), {flip_off[OffBits-1:0], bit_i}}),
    .in_valid_i(ar_take), .in_ready_o(r_q_ready),
    .out_data_o({r_head_err, r_head_flip, r_head_beat, r_head_pos}),
    .out_valid_o(r_head_valid), .out_ready_i(r_pop), .count_o()
  );
  npu_fifo #(.Width(1), .Depth(Depth)) u_b_q (
    .clk_i, .rst_ni, .clear_i(1'b0),
    .in_data_i(aw_fired && mode_i == ModeError), .in_valid_i(aw_take), .in_ready_o(b_q_ready),
    .out_data_o(b_head_err), .out_valid_o(), .out_ready_i(b_pop), .count_o()
  );

  // ---------------------------------------------------------------- responses
  wire r_beat = m_rsp_i.r_valid && s_req_i.r_ready;
  assign r_pop = r_beat && m_rsp_i.r.last;
  assign b_pop = m_rsp_i.b_valid && s_req_i.b_ready;

  logic [7:0] r_beat_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) r_beat_q <= '0;
    else if (r_beat) r_beat_q <= m_rsp_i.r.last ? 8'd0 : r_beat_q + 8'd1;
  end

  logic [$bits(m_rsp_i.r.data)-1:0] flip_mask;
  assign flip_mask = r_head_valid && r_head_flip && r_beat_q == r_head_beat
                   ? $bits(m_rsp_i.r.data)'(1) << r_head_pos : '0;
  assign s_rsp_o.aw_ready = m_rsp_i.aw_ready && !aw_stall && b_q_ready;
  assign s_rsp_o.w_ready  = m_rsp_i.w_ready;
  assign s_rsp_o.b.id     = m_rsp_i.b.id;
  assign s_rsp_o.b.resp   = b_head_err ? resp_i : m_rsp_i.b.resp;
  assign s_rsp_o.b_valid  = m_rsp_i.b_valid;
  assign s_rsp_o.ar_ready = m_rsp_i.ar_ready && !ar_stall && r_q_ready;
  assign s_rsp_o.r.id     = m_rsp_i.r.id;
  assign s_rsp_o.r.data   = m_rsp_i.r.data ^ flip_mask;
  assign s_rsp_o.r.resp   = r_head_valid && r_head_err ? resp_i : m_rsp_i.r.resp;
  assign s_rsp_o.r.last   = m_rsp_i.r.last;
  assign s_rsp_o.r_valid  = m_rsp_i.r_valid;
endmodule

`default_nettype wire
