// Ordered source list: packages first. The build, the lint and the tests all read it
// (paths relative to rtl/). C++ DPI sources are listed in tools/../npuemu/sim/build.py.
generated/npu_config_pkg.sv
generated/npu_isa_pkg.sv
generated/npu_csr_pkg.sv
generated/dma_csr_pkg.sv
dma/npu_dma_pkg.sv
mem/npu_mem_dpi_pkg.sv
sim/npu_regbus_dpi_pkg.sv
generated/npu_csr.sv
generated/dma_csr.sv
common/npu_fifo.sv
dma/npu_dma_burst_plan.sv
dma/npu_dma_rd.sv
dma/npu_dma_align.sv
dma/npu_dma_wr.sv
dma/npu_dma_core.sv
dma/npu_dma.sv
bus/npu_axi_decerr.sv
bus/npu_axi_demux.sv
bus/npu_axil_demux.sv
bus/npu_axil_arb.sv
bus/npu_axil_checker.sv
mem/npu_axi_mem.sv
top/npu_regs.sv
top/npu_top.sv
sim/npu_regbus_master.sv
sim/npu_sim.sv
