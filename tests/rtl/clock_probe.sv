`default_nettype none

/// A counter on npu_sim's clock scheme, for tests/rtl/test_sim_main.py: built once with
/// cocotb's own main loop and an oscillator in the RTL (InternalClock = 1, --timing: how
/// npu_sim ran before), once with rtl/sim/npu_sim_main.cpp driving `clk_i`.
module clock_probe #(
  parameter bit InternalClock = 0
) (
  input  wire         clk_i,
  output logic        clk_o,
  input  wire         rst_ni,
  input  wire  [31:0] limit_i,
  output logic [31:0] count_o,
  output logic        irq_o
);
  logic clk;
  if (InternalClock) begin : g_clock
    logic osc_q;
    initial begin
      osc_q = 1'b0;
      forever #5000 osc_q = !osc_q;  // a 10 ns period, as rtl/config/npu.toml
    end
    assign clk = osc_q;
    logic unused;
    assign unused = clk_i;
  end else begin : g_no_clock
    assign clk = clk_i;
  end
  assign clk_o = clk;

  always_ff @(posedge clk or negedge rst_ni) begin
    if (!rst_ni) begin
      count_o <= '0;
      irq_o   <= 1'b0;
    end else begin
      count_o <= count_o + 32'd1;
      irq_o   <= count_o == limit_i;
    end
  end
endmodule
