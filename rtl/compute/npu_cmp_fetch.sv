`default_nettype none

/// Instruction fetch: reads the program from PROG_ADDR, one 2-beat burst per 256-bit
/// instruction (32-byte aligned, so never across 4 KiB), up to `Depth` instructions ahead,
/// and hands them on in order with their index. A fetch that fails (SLVERR, DECERR, or an
/// address outside every memory window, which is never put on the bus) is handed on as an
/// entry carrying the error: the decoder reports it only if it reaches that instruction, so
/// prefetching past FINISH cannot fail a program.
module npu_cmp_fetch #(
  parameter int unsigned BusBytes = 16,        /// bytes per data beat (16: two per instruction)
  parameter int unsigned AddrWidth = 40,       /// AXI address bits
  parameter int unsigned Depth = 4,            /// instructions buffered or in flight
  parameter logic [63:0] Mem0Base = 64'h0,     /// memory window 0 base
  parameter logic [63:0] Mem0Size = 64'h0,     /// memory window 0 size (0 = absent)
  parameter logic [63:0] Mem1Base = 64'h0,     /// memory window 1 base
  parameter logic [63:0] Mem1Size = 64'h0,     /// memory window 1 size
  parameter logic [63:0] Mem2Base = 64'h0,     /// memory window 2 base
  parameter logic [63:0] Mem2Size = 64'h0,     /// memory window 2 size
  localparam int unsigned DataWidth = BusBytes * 8
) (
  input  wire                  clk_i,          /// clock
  input  wire                  rst_ni,         /// asynchronous reset, active low
  input  wire                  start_i,        /// begin at instruction 0 (one cycle)
  input  wire                  stop_i,         /// request nothing more
  input  wire  [63:0]          prog_addr_i,    /// first instruction (32-byte aligned)
  input  wire  [31:0]          prog_insns_i,   /// instructions in the program
  // Read requests (to the read arbiter) and R beats of this unit's ID.
  output logic                 ar_valid_o,
  input  wire                  ar_ready_i,
  output logic [AddrWidth-1:0] ar_addr_o,
  input  wire                  r_valid_i,
  input  wire  [DataWidth-1:0] r_data_i,
  input  wire  [1:0]           r_resp_i,
  // Instructions, in order.
  output logic                 out_valid_o,
  output npu_cmp_pkg::insn_pc_t out_data_o,
  output logic [1:0]           out_err_o,      /// 0 ok, 2 SLVERR, 3 DECERR, 1 outside memory
  input  wire                  out_ready_i,
  output logic                 exhausted_o,    /// every instruction up to PROG_INSNS handed on
  output logic                 drained_o       /// no burst in flight
);
  import npu_cmp_pkg::*;

  initial begin
    if (BusBytes != 16) $fatal(1, "npu_cmp_fetch: BusBytes must be 16, got %0d", BusBytes);
  end

  localparam int unsigned CntWidth = $clog2(Depth + 1);

  logic [31:0] pc_issue_q, pc_recv_q;
  logic [63:0] next_addr_q;
  logic [CntWidth-1:0] inflight_q, count;
  logic        beat_q;               // second beat of an instruction next
  logic [DataWidth-1:0] lo_q;
  logic [1:0]  err_q;                // error of the first beat
  logic        running_q;

  function automatic logic in_mem(logic [63:0] a);
    return (Mem0Size != 0 && a >= Mem0Base && a - Mem0Base < Mem0Size)
        || (Mem1Size != 0 && a >= Mem1Base && a - Mem1Base < Mem1Size)
        || (Mem2Size != 0 && a >= Mem2Base && a - Mem2Base < Mem2Size);
  endfunction

  wire more    = running_q && !stop_i && pc_issue_q != prog_insns_i && prog_addr_i[4:0] == '0;
  wire room    = 32'(count) + 32'(inflight_q) < Depth;
  wire mapped  = in_mem(next_addr_q) && in_mem(next_addr_q + 64'd31);
  assign ar_valid_o = more && room && mapped;
  assign ar_addr_o  = AddrWidth'(next_addr_q);
  wire ar_fire  = ar_valid_o && ar_ready_i;
  // An unmapped instruction becomes an error entry, when no R beat can push at once.
  wire unmapped = more && room && !mapped && inflight_q == '0;

  wire r_done = r_valid_i && beat_q;   // second beat: the instruction is complete
  wire push   = r_done || unmapped;
  logic [1:0] r_err;
  always_comb begin
    r_err = err_q;
    if (err_q == 2'd0 && r_resp_i[1]) r_err = r_resp_i;
  end

  npu_fifo #(.Width(2 + 32 + 256), .Depth(Depth), .MustAccept(1'b1)) u_q (
    .clk_i, .rst_ni, .clear_i(start_i),
    .in_data_i(unmapped ? {2'd1, pc_issue_q, 256'd0} : {r_err, pc_recv_q, r_data_i, lo_q}),
    .in_valid_i(push), .in_ready_o(),
    .out_data_o({out_err_o, out_data_o}), .out_valid_o(out_valid_o), .out_ready_i(out_ready_i),
    .count_o(count)
  );

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      running_q   <= 1'b0;
      pc_issue_q  <= '0;
      pc_recv_q   <= '0;
      next_addr_q <= '0;
      inflight_q  <= '0;
      beat_q      <= 1'b0;
      lo_q        <= '0;
      err_q       <= '0;
    end else begin
      inflight_q <= inflight_q + CntWidth'(ar_fire) - CntWidth'(r_done);
      if (start_i) begin
        running_q   <= 1'b1;
        pc_issue_q  <= '0;
        pc_recv_q   <= '0;
        next_addr_q <= prog_addr_i;
      end else begin
        if (ar_fire || unmapped) begin
          pc_issue_q  <= pc_issue_q + 32'd1;
          next_addr_q <= next_addr_q + 64'd32;
        end
        if (unmapped) pc_recv_q <= pc_recv_q + 32'd1;
        if (stop_i && inflight_q == '0) running_q <= 1'b0;
      end
      if (r_valid_i) begin
        beat_q <= !beat_q;
        if (!beat_q) begin
          lo_q  <= r_data_i;
          err_q <= r_resp_i[1] ? r_resp_i : 2'd0;
        end else begin
          pc_recv_q <= pc_recv_q + 32'd1;
        end
      end
    end
  end

  assign exhausted_o = pc_issue_q == prog_insns_i && inflight_q == '0 && !out_valid_o;
  assign drained_o   = inflight_q == '0;
endmodule

`default_nettype wire
