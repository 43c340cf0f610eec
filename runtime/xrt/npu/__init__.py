"""The NPU's compute engine from the runtime's side: its instruction set (`xrt.hw.isa`),
the golden model that executes and checks programs, and the compiler that turns runs of
quantized operators into programs.
"""
