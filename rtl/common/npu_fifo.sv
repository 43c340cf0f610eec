`default_nettype none
`include "npu_assert.svh"

/// Synchronous first-word-fall-through FIFO with valid/ready handshakes on both sides.
/// `count_o` counts stored entries; `clear_i` empties the FIFO in one cycle.
module npu_fifo #(
  /// Bits per entry.
  parameter int unsigned Width = 8,
  /// Entries; any value >= 2.
  parameter int unsigned Depth = 4,
  /// The producer ignores `in_ready_o` (the FIFO is sized never to fill): a push into a full
  /// FIFO would lose an entry, and an assertion says so.
  parameter bit MustAccept = 1'b0,
  /// The consumer ignores `out_valid_o` (it pops only what it knows is there): a pop of an
  /// empty FIFO is a broken invariant, and an assertion says so.
  parameter bit MustHold = 1'b0,
  localparam int unsigned CountWidth = $clog2(Depth + 1),
  localparam int unsigned PtrWidth = $clog2(Depth)
) (
  input  wire                   clk_i,      /// clock
  input  wire                   rst_ni,     /// asynchronous reset, active low
  input  wire                   clear_i,    /// drop every entry (synchronous)
  input  wire  [Width-1:0]      in_data_i,  /// entry to push
  input  wire                   in_valid_i, /// push request
  output logic                  in_ready_o, /// FIFO not full
  output logic [Width-1:0]      out_data_o, /// oldest entry
  output logic                  out_valid_o,/// FIFO not empty
  input  wire                   out_ready_i,/// pop
  output logic [CountWidth-1:0] count_o     /// entries stored
);
  initial begin
    if (Depth < 2) $fatal(1, "npu_fifo: Depth must be >= 2, got %0d", Depth);
  end

  logic [Width-1:0] mem_q [Depth];
  logic [PtrWidth-1:0] rd_ptr_q, wr_ptr_q;
  logic [CountWidth-1:0] count_q;

  wire push = in_valid_i && in_ready_o;
  wire pop  = out_valid_o && out_ready_i;

  assign in_ready_o  = count_q != CountWidth'(Depth);
  assign out_valid_o = count_q != '0;
  assign out_data_o  = mem_q[rd_ptr_q];
  assign count_o     = count_q;

  function automatic logic [PtrWidth-1:0] next_ptr(logic [PtrWidth-1:0] ptr);
    return (ptr == PtrWidth'(Depth - 1)) ? '0 : ptr + 1'b1;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_ptr_q <= '0;
      wr_ptr_q <= '0;
      count_q  <= '0;
    end else if (clear_i) begin
      rd_ptr_q <= '0;
      wr_ptr_q <= '0;
      count_q  <= '0;
    end else begin
      if (push) wr_ptr_q <= next_ptr(wr_ptr_q);
      if (pop) rd_ptr_q <= next_ptr(rd_ptr_q);
      if (push && !pop) count_q <= count_q + 1'b1;
      else if (pop && !push) count_q <= count_q - 1'b1;
    end
  end

  // Storage has no reset: it is only read where count_q says an entry was written.
  always_ff @(posedge clk_i) begin
    if (push) mem_q[wr_ptr_q] <= in_data_i;
  end

  // Invariants (rtl/include/npu_assert.svh). `clear_i` empties the FIFO whatever is
  // pushed or popped in that cycle.
  `NPU_ASSERT(FifoCountRange, count_q <= CountWidth'(Depth),
              $sformatf("count %0d exceeds the depth %0d", count_q, Depth))
  `NPU_ASSERT(FifoPointers, count_q == '0 || count_q == CountWidth'(Depth)
              || wr_ptr_q != rd_ptr_q, "read and write pointers meet with the FIFO neither empty nor full")
  `NPU_ASSERT(FifoCountTracks, !$past(rst_ni) || $past(clear_i) || count_q == $past(count_q)
              + CountWidth'($past(push)) - CountWidth'($past(pop)),
              "the count does not follow the pushes and pops")
  if (MustAccept) begin : g_must_accept
    `NPU_ASSERT_NEVER(FifoOverflow, in_valid_i && !in_ready_o && !clear_i,
                      $sformatf("push into a full FIFO (%0d entries): an entry is lost", Depth))
  end
  if (MustHold) begin : g_must_hold
    `NPU_ASSERT_NEVER(FifoUnderflow, out_ready_i && !out_valid_o && !clear_i,
                      "pop of an empty FIFO: the consumer takes an entry that is not there")
  end
endmodule

`default_nettype wire
