`default_nettype none
`include "npu_assert.svh"

/// The four dependency-token counters (index 0 L2C, 1 C2L, 2 C2S, 3 S2C). A pop is only
/// requested when `avail_o` says a token is there; a push into a full queue (no pop in the
/// same cycle) is reported on `overflow_o` and not counted.
module npu_cmp_tokens #(
  parameter int unsigned Depth = 64   /// tokens a queue holds (the ISA's token_depth)
) (
  input  wire        clk_i,       /// clock
  input  wire        rst_ni,      /// asynchronous reset, active low
  input  wire        clear_i,     /// empty every queue (program start)
  input  wire  [3:0] push_i,      /// a unit gives a token
  input  wire  [3:0] pop_i,       /// a unit takes a token
  output logic [3:0] avail_o,     /// queue holds at least one token
  output logic [3:0] overflow_o   /// push into a full queue this cycle
);
  localparam int unsigned CountWidth = $clog2(Depth + 1);

  initial begin
    if (Depth < 1) $fatal(1, "npu_cmp_tokens: Depth must be >= 1, got %0d", Depth);
  end

  logic [3:0][CountWidth-1:0] count_q;

  always_comb begin
    for (int q = 0; q < 4; q++) begin
      avail_o[q]    = count_q[q] != '0;
      overflow_o[q] = push_i[q] && !pop_i[q] && count_q[q] == CountWidth'(Depth);
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      count_q <= '0;
    end else if (clear_i) begin
      count_q <= '0;
    end else begin
      for (int q = 0; q < 4; q++) begin
        if (push_i[q] && !pop_i[q] && !overflow_o[q]) count_q[q] <= count_q[q] + 1'b1;
        else if (pop_i[q] && !push_i[q]) count_q[q] <= count_q[q] - 1'b1;
      end
    end
  end

  // Invariants (rtl/include/npu_assert.svh): the sequencers pop only a token that is there
  // (npu_cmp_ctl waits on avail_o), and no count leaves 0..Depth. A push into a full queue
  // is a program's error (ErrTokenOverflow), not a broken invariant.
  for (genvar q = 0; q < 4; q++) begin : g_check
    `NPU_ASSERT_NEVER(TokPopEmpty, pop_i[q] && !avail_o[q] && !clear_i,
                      $sformatf("token queue %0d popped while empty", q))
    `NPU_ASSERT(TokCountRange, count_q[q] <= CountWidth'(Depth),
                $sformatf("token queue %0d holds %0d tokens, more than %0d", q, count_q[q], Depth))
    `NPU_ASSERT(TokOverflowNotCounted, !$past(rst_ni) || $past(clear_i) || !$past(overflow_o[q])
                || count_q[q] == $past(count_q[q]),
                $sformatf("token queue %0d counted a push into a full queue", q))
  end
endmodule

`default_nettype wire
