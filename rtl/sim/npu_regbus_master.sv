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
/// Reads are pipelined: a read's address goes out as soon as the one before it was taken,
/// up to `ReadsInFlight` reads waiting for their data (the NPU's register port accepts
/// that many; a PeakRDL block answers a read 3 cycles after its address, so one at a time
/// a read costs 3 cycles and back to back about 1). Results are reported in order. Every
/// other operation starts once the reads before it are answered and runs alone: writes,
/// polls and masked writes are one transaction at a time, as before. Reads have no side
/// effects on this device (no read-to-clear fields), so a read that was already on the bus
/// when an earlier one failed changes nothing; its result is not reported, as if it had
/// not run. AW and W are offered together; `valid` and the payload only change after
/// their handshake (they come from registers).
module npu_regbus_master
  import npu_regbus_dpi_pkg::*;
  import npu_wire_pkg::*;
#(
  /// cycles between a poll's first reads (rtl/config/npu.toml [regbus])
  parameter int unsigned PollFirstInterval = npu_config_pkg::RegbusPollFirstInterval,
  /// the interval doubles up to this
  parameter int unsigned PollMaxInterval   = npu_config_pkg::RegbusPollMaxInterval,
  /// reads sent whose data has not come back yet, at most
  parameter int unsigned ReadsInFlight     = 4,
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
  localparam int unsigned CountWidth = $clog2(ReadsInFlight + 1);
  localparam int unsigned PtrWidth = ReadsInFlight > 1 ? $clog2(ReadsInFlight) : 1;

  initial begin
    if (PollFirstInterval == 0 || PollFirstInterval > PollMaxInterval)
      $fatal(1, "npu_regbus_master: need 0 < PollFirstInterval <= PollMaxInterval");
    if (ReadsInFlight == 0 || (ReadsInFlight & (ReadsInFlight - 1)) != 0)
      $fatal(1, "npu_regbus_master: ReadsInFlight must be a power of 2");
  end

  // StDrain: the reads in flight are answered first; then the operation taken (`held_q`)
  // starts, or the batch ends.
  typedef enum logic [2:0] {StIdle, StAr, StR, StAw, StB, StPollWait, StDrain} state_e;

  state_e                   state_q;
  regbus_op_e               kind_q;
  logic                     kick_q, aw_done_q, w_done_q;
  logic [31:0]              addr_q, value_q, mask_q, expected_q, wdata_q;
  logic [63:0]              cycle_q, op_start_q, max_cycles_q, wait_q;
  logic [IntervalWidth-1:0] interval_q;
  // The pipelined reads: how many wait for their data, and when each was taken (in order).
  logic [CountWidth-1:0]    rd_count_q;
  logic [PtrWidth-1:0]      rd_head_q, rd_tail_q;
  logic [63:0]              rd_start_q [ReadsInFlight];
  logic                     held_q;  // StDrain: an operation waits for the reads to end
  logic                     stop_q;  // a pipelined read failed: report and start nothing more

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
  // A plain read's address waits while `ReadsInFlight` reads wait for data (the count only
  // falls meanwhile, so a valid once raised stays up until its handshake).
  wire ar_valid = state_q == StAr && (kind_q != OpRead || rd_count_q < CountWidth'(ReadsInFlight));
  wire r_pipelined = rd_count_q != '0;  // the R channel answers a pipelined read
  assign m_req_o = '{
    aw: '{addr: addr_q, prot: ProtNonSecure}, aw_valid: aw_valid,
    w: '{data: wdata_q, strb: 4'hF}, w_valid: w_valid, b_ready: state_q == StB,
    ar: '{addr: addr_q, prot: ProtNonSecure}, ar_valid: ar_valid,
    r_ready: state_q == StR || r_pipelined
  };

  // Take the next operation from the queue and start it (a read at once, anything else
  // once the `reads` still in flight are answered), or end the batch after those reads.
  task automatic take_next(logic [CountWidth-1:0] reads);
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
      held_q       <= 1'b1;
      if (regbus_op_e'(kind[1:0]) != OpRead && reads != '0) state_q <= StDrain;
      else state_q <= regbus_op_e'(kind[1:0]) == OpWrite ? StAw : StAr;
    end else begin
      held_q  <= 1'b0;
      state_q <= reads != '0 ? StDrain : StIdle;
    end
  endtask

  // Report the operation's result, then go on with the next one (the queue ends the batch
  // after a result that is not OK). Only for operations that run alone: no read in flight.
  task automatic finish(int unsigned status, logic [31:0] value);
    npu_regbus_done(status, value, cycle_q - op_start_q, status != RegStatusOk);
    take_next('0);
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
      rd_count_q   <= '0;
      rd_head_q    <= '0;
      rd_tail_q    <= '0;
      held_q       <= 1'b0;
      stop_q       <= 1'b0;
      for (int i = 0; i < int'(ReadsInFlight); i++) rd_start_q[i] <= '0;
    end else begin : step
      logic [CountWidth-1:0] reads;  // pipelined reads in flight after this edge
      logic                  stop;
      reads = rd_count_q;
      stop  = stop_q;
      cycle_q <= cycle_q + 64'd1;
      // A pipelined read's data (in order), before anything starts: a failure stops the
      // queue, so nothing is taken after it at this edge.
      if (r_pipelined && r_valid) begin
        if (!stop_q) begin
          npu_regbus_done(r_resp == RespOkay ? RegStatusOk : bus_error(r_resp),
                          r_resp == RespOkay ? r_data : '0, cycle_q - rd_start_q[rd_head_q],
                          r_resp != RespOkay);
          stop = r_resp != RespOkay;
        end
        rd_head_q <= rd_head_q + PtrWidth'(1);
        reads = reads - CountWidth'(1);
      end
      unique case (state_q)
        StIdle: begin
          if (kick_i != kick_q) begin
            kick_q <= kick_i;
            stop    = 1'b0;
            take_next('0);
          end
        end
        StAr: begin
          if (kind_q != OpRead) begin
            if (ar_ready) state_q <= StR;
          end else if (ar_valid && ar_ready) begin  // sent: its data comes later
            rd_start_q[rd_tail_q] <= op_start_q;
            rd_tail_q <= rd_tail_q + PtrWidth'(1);
            reads = reads + CountWidth'(1);
            if (stop) begin
              held_q  <= 1'b0;
              state_q <= StDrain;
            end else begin
              take_next(reads);
            end
          end else if (stop && !ar_valid) begin  // an earlier read failed: this one never runs
            held_q  <= 1'b0;
            state_q <= reads != '0 ? StDrain : StIdle;
          end
        end
        StDrain: begin
          if (reads == '0) begin
            if (held_q && !stop) begin
              op_start_q <= cycle_q;
              state_q    <= kind_q == OpWrite ? StAw : StAr;
            end else begin
              held_q  <= 1'b0;
              state_q <= StIdle;
            end
          end
        end
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
      rd_count_q <= reads;
      stop_q     <= stop;
    end
  end
endmodule

`default_nettype wire
