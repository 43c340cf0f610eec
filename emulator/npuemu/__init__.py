"""npuemu: the simulated NPU (verilated RTL under cocotb) and its device server."""
