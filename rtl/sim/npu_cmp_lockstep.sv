`default_nettype none

/// Lockstep trace of the compute engine (docs/verification.md "Lockstep"): a simulation-only
/// observer that `npu_cmp_core` instantiates when built with `NPU_LOCKSTEP` (every
/// npuemu.sim.build model). It hands the C++ side (rtl/sim/npu_lockstep_dpi.cpp) one DPI
/// call per launch start, per retired instruction, per AXI address, data beat and write
/// response of the engine's master, and per launch end; the C++ side buffers them until
/// Python takes the whole trace at once (npuemu.sim.lockstep). Nothing runs per cycle
/// unless the trace is on: `npu_ls_enabled` (the `NPU_EMU_LOCKSTEP` environment variable)
/// is read once, at time zero.
module npu_cmp_lockstep #(
  parameter int unsigned IdWidth = 4   /// AXI ID bits of the engine's master
) (
  input  wire               clk_i,        /// clock
  input  wire               rst_ni,       /// asynchronous reset, active low
  input  wire               start_i,      /// a program starts (one cycle)
  input  wire  [63:0]       prog_addr_i,  /// its PROG_ADDR
  input  wire  [31:0]       prog_insns_i, /// its PROG_INSNS
  input  wire  [15:0][63:0] base_i,       /// its BASE registers
  input  wire               wiping_i,     /// the buffers are being zeroed
  input  wire  [2:0]        retire_i,     /// per unit: an instruction completed (one cycle)
  input  wire  [2:0][31:0]  pc_i,         /// per unit: the index of the held instruction
  input  wire               ar_fire_i,    /// AR handshake
  input  wire  [IdWidth-1:0] ar_id_i,     /// ... its ID (0 fetch, 1 LOAD)
  input  wire  [63:0]       ar_addr_i,    /// ... address
  input  wire  [7:0]        ar_len_i,     /// ... beats - 1
  input  wire               r_fire_i,     /// R handshake
  input  wire  [IdWidth-1:0] r_id_i,      /// ... its ID
  input  wire  [127:0]      r_data_i,     /// ... data
  input  wire  [1:0]        r_resp_i,     /// ... response
  input  wire               aw_fire_i,    /// AW handshake (the STORE unit's)
  input  wire  [63:0]       aw_addr_i,    /// ... address
  input  wire  [7:0]        aw_len_i,     /// ... beats - 1
  input  wire               w_fire_i,     /// W handshake
  input  wire  [127:0]      w_data_i,     /// ... data
  input  wire  [15:0]       w_strb_i,     /// ... strobes
  input  wire               b_fire_i,     /// B handshake
  input  wire  [1:0]        b_resp_i,     /// ... response
  input  wire               end_i,        /// the program ends (one cycle)
  input  wire               err_i,        /// ... with an error
  input  wire  [7:0]        err_code_i,   /// ... its code
  input  wire  [1:0]        err_unit_i,   /// ... unit
  input  wire  [31:0]       err_pc_i      /// ... instruction index
);
  import "DPI-C" function bit npu_ls_enabled();
  import "DPI-C" function void npu_ls_start(
    input longint unsigned prog_addr, input int unsigned insns, input bit [1023:0] bases,
    input longint unsigned cycle);
  import "DPI-C" function void npu_ls_retire(
    input int unsigned unit, input int unsigned pc, input longint unsigned cycle);
  import "DPI-C" function void npu_ls_ar(
    input int unsigned id, input longint unsigned addr, input int unsigned len);
  import "DPI-C" function void npu_ls_r(
    input int unsigned id, input bit [127:0] data, input int unsigned resp);
  import "DPI-C" function void npu_ls_aw(input longint unsigned addr, input int unsigned len);
  import "DPI-C" function void npu_ls_w(
    input int unsigned pc, input bit [127:0] data, input int unsigned strb);
  import "DPI-C" function void npu_ls_b(input int unsigned pc, input int unsigned resp);
  import "DPI-C" function void npu_ls_end(
    input int unsigned err, input int unsigned code, input int unsigned unit,
    input int unsigned pc, input longint unsigned cycle);
  import "DPI-C" function void npu_ls_wiped();

  bit on;
  initial on = npu_ls_enabled();

  logic [63:0] cycle_q;
  logic        wiping_q;
  // Program order within a cycle: retirements before the end, reads before writes.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cycle_q  <= '0;
      wiping_q <= 1'b0;
    end else begin
      cycle_q  <= cycle_q + 64'd1;
      wiping_q <= wiping_i;
      if (on) begin
        if (start_i) npu_ls_start(prog_addr_i, prog_insns_i, 1024'(base_i), cycle_q);
        if (ar_fire_i) npu_ls_ar(32'(ar_id_i), ar_addr_i, 32'(ar_len_i));
        if (r_fire_i) npu_ls_r(32'(r_id_i), r_data_i, 32'(r_resp_i));
        if (aw_fire_i) npu_ls_aw(aw_addr_i, 32'(aw_len_i));
        if (w_fire_i) npu_ls_w(pc_i[2], w_data_i, 32'(w_strb_i));
        if (b_fire_i) npu_ls_b(pc_i[2], 32'(b_resp_i));
        for (int u = 0; u < 3; u++) begin
          if (retire_i[u]) npu_ls_retire(u, pc_i[u], cycle_q);
        end
        if (end_i) npu_ls_end(32'(err_i), 32'(err_code_i), 32'(err_unit_i), err_pc_i, cycle_q);
        if (wiping_q && !wiping_i) npu_ls_wiped();
      end
    end
  end
endmodule

`default_nettype wire
