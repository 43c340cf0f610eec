/// The report of a failed assertion (rtl/include/npu_assert.svh): rtl/sim/npu_assert_dpi.cpp
/// records it for the device worker and the tests (npuemu.sim.assertions).
package npu_assert_pkg;
  import "DPI-C" function void npu_assert_fail(
    input string name, input string scope, input string msg, input longint unsigned time_ps
  );

  function automatic void fail(string name, string scope, string msg, longint unsigned time_ps);
    npu_assert_fail(name, scope, msg, time_ps);
  endfunction
endpackage
