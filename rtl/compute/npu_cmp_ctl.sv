`default_nettype none
`include "npu_assert.svh"

/// Instruction sequencer of one unit: takes the next instruction from the unit's queue,
/// pops its tokens (`pop_prev`, then `pop_next`, each waiting for a token), starts the
/// unit's datapath, and when the datapath reports completion pushes its tokens and
/// retires it. SYNC instructions skip the datapath. After `stop_i` (an error or abort)
/// nothing new is popped, started or pushed.
module npu_cmp_ctl (
  input  wire                clk_i,          /// clock
  input  wire                rst_ni,         /// asynchronous reset, active low
  input  wire                clear_i,        /// drop the held instruction (engine idle again)
  input  wire                stop_i,         /// start nothing new
  // The unit's instruction queue.
  input  wire                q_valid_i,      /// an instruction waits
  input  npu_cmp_pkg::insn_pc_t q_data_i,    /// ... this one
  output logic               q_ready_o,      /// take it
  // Tokens of this unit's neighbours.
  input  wire                avail_prev_i,   /// the queue pop_prev takes from holds a token
  input  wire                avail_next_i,   /// the queue pop_next takes from holds a token
  output logic               pop_prev_o,     /// take a token (one cycle)
  output logic               pop_next_o,     /// take a token (one cycle)
  output logic               push_prev_o,    /// give a token (one cycle)
  output logic               push_next_o,    /// give a token (one cycle)
  // The datapath.
  output logic               start_o,        /// run `insn_o` (one cycle)
  input  wire                done_i,         /// the started instruction has completed
  output npu_cmp_pkg::insn_pc_t insn_o,      /// instruction held (valid while busy_o)
  // Status.
  output logic               busy_o,         /// holding an instruction
  output logic               token_wait_o,   /// waiting for a token this cycle
  output logic               retire_o        /// an instruction completed (one cycle)
);
  import npu_isa_pkg::*;

  typedef enum logic [1:0] {StIdle, StPop, StExec} state_e;
  state_e state_q;
  logic   popped_prev_q;   // pop_prev already taken for the held instruction

  wire want_prev = insn_o.insn[4];
  wire want_next = insn_o.insn[5];
  wire is_sync   = opcode_e'(insn_o.insn[3:0]) == OpcodeSync;

  logic pops_done, finish_now, take;

  always_comb begin
    pop_prev_o = 1'b0;
    pop_next_o = 1'b0;
    start_o    = 1'b0;
    pops_done  = 1'b0;
    token_wait_o = 1'b0;
    if (state_q == StPop && !stop_i) begin
      if (want_prev && !popped_prev_q) begin
        pop_prev_o   = avail_prev_i;
        token_wait_o = !avail_prev_i;
      end else if (want_next) begin
        pop_next_o   = avail_next_i;
        token_wait_o = !avail_next_i;
        pops_done    = avail_next_i;
      end else begin
        pops_done = 1'b1;
      end
    end
    start_o    = pops_done && !is_sync;
    // Completion: a SYNC once its pops are done, anything else when its datapath says so.
    finish_now = !stop_i && ((pops_done && is_sync) || (state_q == StExec && done_i));
    push_prev_o = finish_now && insn_o.insn[6];
    push_next_o = finish_now && insn_o.insn[7];
    retire_o    = finish_now;
    take        = q_valid_i && !stop_i && (state_q == StIdle || finish_now);
    q_ready_o   = take;
    busy_o      = state_q != StIdle;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q       <= StIdle;
      popped_prev_q <= 1'b0;
      insn_o        <= '0;
    end else if (clear_i) begin
      state_q       <= StIdle;
      popped_prev_q <= 1'b0;
    end else begin
      if (pop_prev_o) popped_prev_q <= 1'b1;
      if (start_o) state_q <= StExec;
      if (finish_now) state_q <= StIdle;
      if (take) begin
        state_q       <= StPop;
        popped_prev_q <= 1'b0;
        insn_o        <= q_data_i;
      end
    end
  end

  // Invariants (rtl/include/npu_assert.svh).
  `NPU_ASSERT(CtlStateLegal, state_q inside {StIdle, StPop, StExec},
              $sformatf("sequencer in the unused state %0d", state_q))
  `NPU_ASSERT_ONEHOT0(CtlOnePop, {pop_prev_o, pop_next_o},
                      "both token pops in one cycle")
  `NPU_ASSERT_NEVER(CtlPopWithoutToken, (pop_prev_o && !avail_prev_i) || (pop_next_o && !avail_next_i),
                    "a token popped from an empty queue")
  `NPU_ASSERT_NEVER(CtlStartWhileExec, start_o && state_q == StExec,
                    "a datapath started while it runs the previous instruction")
  `NPU_ASSERT_NEVER(CtlDoneWhileIdle, finish_now && state_q == StIdle,
                    "an instruction retired with none held")
  `NPU_ASSERT_NEVER(CtlActAfterStop, stop_i && (start_o || pop_prev_o || pop_next_o || push_prev_o
                    || push_next_o || q_ready_o), "an action after stop")
endmodule

`default_nettype wire
