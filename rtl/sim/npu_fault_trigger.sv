`default_nettype none

/// When a fault fires: the trigger of one fault family of the fault controller
/// (rtl/regs/fault.rdl). `arm_i` (the MODE write) restarts it: it waits `delay_i` cycles,
/// lets `skip_i` matching events through, then fires on the next `count_i` events (0:
/// every one). Events come in `Lanes` lanes per cycle, counted in lane order, so two
/// matching bursts in one cycle count as two, deterministically.
module npu_fault_trigger #(
  parameter int unsigned Lanes = 1  /// events that may happen in one cycle
) (
  input  wire              clk_i,    /// clock
  input  wire              rst_ni,   /// asynchronous reset, active low
  input  wire              arm_i,    /// the family's MODE was written: start again
  input  wire              on_i,     /// MODE != 0
  input  wire  [31:0]      delay_i,  /// cycles after arming before events count
  input  wire  [31:0]      skip_i,   /// events let through first
  input  wire  [31:0]      count_i,  /// events fired on, then none (0: no end)
  input  wire  [Lanes-1:0] event_i,  /// a matching event, per lane
  output logic [Lanes-1:0] fire_o,   /// the fault fires on this lane's event
  output logic             ready_o,  /// armed and past the delay (a spurious IRQ fires now)
  output logic [31:0]      hits_o    /// events fired on since arming
);
  logic [31:0] waited_q, seen_q, hits_q;
  logic [31:0] seen_d, hits_d;

  assign ready_o = on_i && !arm_i && waited_q >= delay_i;

  always_comb begin
    seen_d = seen_q;
    hits_d = hits_q;
    fire_o = '0;
    for (int unsigned i = 0; i < Lanes; i++) begin
      if (ready_o && event_i[i]) begin
        if (seen_d < skip_i) seen_d = seen_d + 32'd1;
        else if (count_i == 0 || hits_d < count_i) begin
          fire_o[i] = 1'b1;
          hits_d = hits_d + 32'd1;
        end
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      waited_q <= '0;
      seen_q   <= '0;
      hits_q   <= '0;
    end else if (arm_i) begin
      waited_q <= '0;
      seen_q   <= '0;
      hits_q   <= '0;
    end else begin
      if (on_i && waited_q != '1) waited_q <= waited_q + 32'd1;
      seen_q <= seen_d;
      hits_q <= hits_d;
    end
  end
  assign hits_o = hits_q;
endmodule

`default_nettype wire
