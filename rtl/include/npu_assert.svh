// Assertion macros (in the style of OpenTitan's prim_assert.svh, written for the SVA subset
// the pinned Verilator supports: concurrent properties with |-> and |=>, $stable, $past,
// $onehot0; no ## delays, which would need --timing). Each assertion has a name (the SVA
// label) and a message that says what broke; a failure reports both through
// npu_assert_pkg::fail (DPI: rtl/sim/npu_assert_dpi.cpp records it for the worker, which
// fails the request with 11014) and $error (Verilator's report: it stops a model built
// without npu_sim_main.cpp at the first failure unless +verilator+error+limit says more).
//
// No X-checks (OpenTitan's ASSERT_KNOWN): Verilator simulates two states.
// Assertions are compiled only with `verilator --assert` (npuemu.sim.build always adds it);
// NPU_ASSERT_OFF removes them from the source (for tools without SVA).
`ifndef NPU_ASSERT_SVH_
`define NPU_ASSERT_SVH_

`ifndef NPU_ASSERT_OFF

// Report a failed assertion `__name` with message `__msg` (a string expression).
`define NPU_ASSERT_REPORT(__name, __msg)                              \
  begin                                                               \
    npu_assert_pkg::fail(`"__name`", $sformatf("%m"), __msg, $time);  \
    $error("%s: %s", `"__name`", __msg);                              \
  end

// `__prop` holds at every rising edge of `__clk` outside reset.
`define NPU_ASSERT(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni)     \
  __name: assert property (@(posedge __clk) disable iff (__rst) (__prop))     \
    else `NPU_ASSERT_REPORT(__name, __msg)

// `__prop` never holds (a state that must not be reached).
`define NPU_ASSERT_NEVER(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni) \
  __name: assert property (@(posedge __clk) disable iff (__rst) !(__prop))      \
    else `NPU_ASSERT_REPORT(__name, __msg)

// Valid/ready handshake of one channel: once `__valid` is up without `__ready`, it stays up
// (__name``Held) and `__payload` does not change while it does (__name``Stable).
// (Parameters on one line: Verilator's preprocessor loses a default after a line break.)
`define NPU_ASSERT_HANDSHAKE(__name, __valid, __ready, __payload, __what, __clk = clk_i, __rst = !rst_ni) \
  __name``Held: assert property (@(posedge __clk) disable iff (__rst)                   \
      (__valid) && !(__ready) |=> (__valid))                                             \
    else `NPU_ASSERT_REPORT(__name``Held, $sformatf("%s: valid dropped before ready", __what))      \
  __name``Stable: assert property (@(posedge __clk) disable iff (__rst)                 \
      (__valid) && !(__ready) |=> !(__valid) || $stable(__payload))                      \
    else `NPU_ASSERT_REPORT(__name``Stable, $sformatf("%s: payload changed while waiting for ready", __what))

// At most one bit of `__sig` is set.
`define NPU_ASSERT_ONEHOT0(__name, __sig, __msg, __clk = clk_i, __rst = !rst_ni) \
  `NPU_ASSERT(__name, $onehot0(__sig), __msg, __clk, __rst)

// An assumption about the inputs of a block (checked in simulation like an assertion).
`define NPU_ASSUME(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni)     \
  __name: assume property (@(posedge __clk) disable iff (__rst) (__prop))     \
    else `NPU_ASSERT_REPORT(__name, __msg)

`else

`define NPU_ASSERT(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni)
`define NPU_ASSERT_NEVER(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni)
`define NPU_ASSERT_HANDSHAKE(__name, __valid, __ready, __payload, __what, __clk = clk_i, __rst = !rst_ni)
`define NPU_ASSERT_ONEHOT0(__name, __sig, __msg, __clk = clk_i, __rst = !rst_ni)
`define NPU_ASSUME(__name, __prop, __msg, __clk = clk_i, __rst = !rst_ni)

`endif

`endif  // NPU_ASSERT_SVH_
