`default_nettype none

/// The simulation's register bus master: an AXI4-Lite master that runs a whole batch of
/// register operations (read, write, masked write, poll-until) queued through DPI-C
/// (npu_regbus_dpi.cpp), so no Python runs between bus transactions.
///
/// Protocol with the harness: it queues the batch (one DPI-C call from Python), toggles
/// `kick_i` and waits for `busy_o` to fall (one trigger). The master takes operation after
/// operation from the queue and reports each one's status (the wire's RegisterStatus:
/// `npu_wire_pkg`, generated from the proto), value and cycle count there; the queue stops
/// the batch after the first result that is not OK.
///
/// Semantics, as the Python harness had them:
/// - read: one read; the value read (0 on SLVERR/DECERR).
/// - write: one write; value 0.
/// - masked write: a read, then a write of `(old & ~mask) | (value & mask)`; `lock_o` holds
///   the bus between the two (an arbiter in front lets no other master in), so it is
///   atomic; the value written.
/// - poll: reads `addr` until `data & mask == expected`; between reads it waits
///   `PollFirstInterval` cycles, doubling up to `PollMaxInterval`, never past `max_cycles`
///   after the start; gives up (POLL_TIMEOUT) when a read that does not match comes
///   `max_cycles` or more after the start, with the last value read, or when the harness
///   cancelled the batch.
///
/// One transaction at a time; AW and W are offered together; `valid` and the payload only
/// change after their handshake (they come from registers).
module npu_regbus_master
  import npu_regbus_dpi_pkg::*;
  import npu_wire_pkg::*;
#(
  /// cycles between a poll's first reads (rtl/config/npu.toml [regbus])
  parameter int unsigned PollFirstInterval = npu_config_pkg::RegbusPollFirstInterval,
  /// the interval doubles up to this
  parameter int unsigned PollMaxInterval   = npu_config_pkg::RegbusPollMaxInterval,
  parameter type req_t = logic,  /// AXI4-Lite request, 32-bit address (npu_axi_typedef.svh)
  parameter type rsp_t = logic   /// AXI4-Lite response
) (
  input  wire  clk_i,     /// clock
  input  wire  rst_ni,    /// asynchronous reset, active low
  input  wire  kick_i,    /// toggled by the harness once a batch is queued
  output logic busy_o,    /// a batch runs; falls once its last result is reported
  output logic lock_o,    /// keep the bus: between a masked write's read and write
  output req_t m_req_o,   /// AXI4-Lite master port
  input  rsp_t m_rsp_i
);
  localparam logic [1:0] RespOkay = 2'b00;
  localparam logic [1:0] RespDecerr = 2'b11;
  localparam logic [2:0] ProtNonSecure = 3'b010;  // as cocotbext-axi's master sends
  localparam int unsigned IntervalWidth = $clog2(PollMaxInterval) + 1;

  initial begin
    if (PollFirstInterval == 0 || PollFirstInterval > PollMaxInterval)
      $fatal(1, "npu_regbus_master: need 0 < PollFirstInterval <= PollMaxInterval");
  end

  typedef enum logic [2:0] {StIdle, StAr, StR, StAw, StB, StPollWait} state_e;

  state_e                   state_q;
  regbus_op_e               kind_q;
  logic                     kick_q, aw_done_q, w_done_q;
  logic [31:0]              addr_q, value_q, mask_q, expected_q, wdata_q;
  logic [63:0]              cycle_q, op_start_q, max_cycles_q, wait_q;
  logic [IntervalWidth-1:0] interval_q;

  assign busy_o    = state_q != StIdle;
  // From the read's address handshake to the write's response (not while the read waits
  // for the bus, so a run of masked writes leaves the other port its turns).
  assign lock_o    = kind_q == OpMaskedWrite && state_q inside {StR, StAw, StB};
  wire aw_valid = state_q == StAw && !aw_done_q;
  wire w_valid  = state_q == StAw && !w_done_q;
  // The response's fields the process below reads, as wires (see npu_axi_demux).
  wire        aw_ready = m_rsp_i.aw_ready, w_ready = m_rsp_i.w_ready;
  wire        b_valid = m_rsp_i.b_valid, ar_ready = m_rsp_i.ar_ready, r_valid = m_rsp_i.r_valid;
  wire [1:0]  b_resp = m_rsp_i.b.resp, r_resp = m_rsp_i.r.resp;
  wire [31:0] r_data = m_rsp_i.r.data;
  assign m_req_o = '{
    aw: '{addr: addr_q, prot: ProtNonSecure}, aw_valid: aw_valid,
    w: '{data: wdata_q, strb: 4'hF}, w_valid: w_valid, b_ready: state_q == StB,
    ar: '{addr: addr_q, prot: ProtNonSecure}, ar_valid: state_q == StAr,
    r_ready: state_q == StR
  };

  // Take the next operation from the queue and start it, or end the batch.
  task automatic take_next();
    int unsigned kind, addr, value, mask, expected;
    longint unsigned max_cycles;
    if (npu_regbus_next(kind, addr, value, mask, expected, max_cycles)) begin
      if (kind > 32'd3) $fatal(1, "npu_regbus_master: operation kind %0d from the queue", kind);
      kind_q       <= regbus_op_e'(kind[1:0]);
      addr_q       <= addr;
      value_q      <= value;
      wdata_q      <= value;
      mask_q       <= mask;
      expected_q   <= expected;
      max_cycles_q <= max_cycles;
      op_start_q   <= cycle_q;
      interval_q   <= IntervalWidth'(PollFirstInterval);
      aw_done_q    <= 1'b0;
      w_done_q     <= 1'b0;
      state_q      <= regbus_op_e'(kind[1:0]) == OpWrite ? StAw : StAr;
    end else begin
      state_q <= StIdle;
    end
  endtask

  // Report the operation's result, then go on with the next one (the queue ends the batch
  // after a result that is not OK).
  task automatic finish(int unsigned status, logic [31:0] value);
    npu_regbus_done(status, value, cycle_q - op_start_q, status != RegStatusOk);
    take_next();
  endtask

  function automatic int unsigned bus_error(logic [1:0] resp);
    return resp == RespDecerr ? RegStatusDecerr : RegStatusSlverr;
  endfunction

  // A read came back: what it means depends on the operation.
  task automatic on_read(logic [31:0] data, logic [1:0] resp);
    logic [63:0] spent, left;
    spent = cycle_q - op_start_q;
    left  = max_cycles_q - spent;
    if (resp != RespOkay) begin
      finish(bus_error(resp), '0);
    end else begin
      unique case (kind_q)
        OpMaskedWrite: begin
          wdata_q <= (data & ~mask_q) | (value_q & mask_q);
          state_q <= StAw;
        end
        OpPoll: begin
          if ((data & mask_q) == expected_q) begin
            finish(RegStatusOk, data);
          end else if (spent >= max_cycles_q || npu_regbus_cancelled()) begin
            finish(RegStatusPollTimeout, data);
          end else begin
            wait_q     <= left < 64'(interval_q) ? left : 64'(interval_q);
            interval_q <= interval_q >= IntervalWidth'(PollMaxInterval / 2)
                        ? IntervalWidth'(PollMaxInterval) : interval_q << 1;
            state_q    <= StPollWait;
          end
        end
        default: finish(RegStatusOk, data);  // OpRead (OpWrite never reads)
      endcase
    end
  endtask

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q      <= StIdle;
      kind_q       <= OpRead;
      kick_q       <= 1'b0;
      aw_done_q    <= 1'b0;
      w_done_q     <= 1'b0;
      addr_q       <= '0;
      value_q      <= '0;
      mask_q       <= '0;
      expected_q   <= '0;
      wdata_q      <= '0;
      cycle_q      <= '0;
      op_start_q   <= '0;
      max_cycles_q <= '0;
      wait_q       <= '0;
      interval_q   <= '0;
    end else begin
      cycle_q <= cycle_q + 64'd1;
      unique case (state_q)
        StIdle: begin
          if (kick_i != kick_q) begin
            kick_q <= kick_i;
            take_next();
          end
        end
        StAr: if (ar_ready) state_q <= StR;
        StR: if (r_valid) on_read(r_data, r_resp);
        StAw: begin
          if (aw_valid && aw_ready) aw_done_q <= 1'b1;
          if (w_valid && w_ready) w_done_q <= 1'b1;
          if ((aw_done_q || aw_ready) && (w_done_q || w_ready)) state_q <= StB;
        end
        StB: begin
          if (b_valid) begin
            if (b_resp != RespOkay) finish(bus_error(b_resp), '0);
            else finish(RegStatusOk, kind_q == OpMaskedWrite ? wdata_q : '0);
          end
        end
        StPollWait: begin
          if (wait_q <= 64'd1) state_q <= StAr;
          else wait_q <= wait_q - 64'd1;
        end
        default: state_q <= StIdle;
      endcase
    end
  end
endmodule

`default_nettype wire
