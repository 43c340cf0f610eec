"""Generated files match their single sources (`make regs` regenerates them)."""

from __future__ import annotations

from tools.generate import generated_files, stale_files


def test_generated_files_are_up_to_date():
    stale = stale_files()
    assert not stale, f"stale generated files (run `make regs`): {[str(p) for p in stale]}"


def test_generator_covers_both_blocks_and_the_config():
    names = {p.name for p in generated_files()}
    for expected in (
        "npu_csr.sv",
        "dma_csr.sv",
        "regs_npu.py",
        "regs_dma.py",
        "npu.md",
        "dma.md",
        "npu_config_pkg.sv",
        "config.py",
        "npu_wire_pkg.sv",
        "wire.py",
        "npu_csr.h",
        "dma_csr.h",
        "npu_targets.h",
        "onnx-operators.md",
        "api-mapping.md",
    ):
        assert expected in names


def test_register_map_matches_the_rdl_source():
    """The Python map is what the RDL says, checked through an independent path: the
    SystemRDL compiler's own model of the source."""
    from systemrdl import RDLCompiler

    from tools.generate import RDL_DIR
    from xrt.hw.regs import DMA, NPU

    for block in (NPU, DMA):
        rdlc = RDLCompiler()
        rdlc.compile_file(str(RDL_DIR / f"{block.name}.rdl"))
        top = rdlc.elaborate().top
        regs = {r.inst_name: r for r in top.registers()}
        assert set(regs) == {r.name for r in block}
        for reg in block:
            node = regs[reg.name]
            assert node.address_offset == reg.offset
            fields = {f.inst_name: f for f in node.fields()}
            assert set(fields) == {f.name for f in reg.fields}
            for f in reg.fields:
                fn = fields[f.name]
                assert (fn.lsb, fn.width) == (f.lsb, f.width)
                assert fn.is_sw_writable == ("w" in f.sw)
                assert fn.is_sw_readable == ("r" in f.sw)
                reset = fn.get_property("reset")
                assert (reset if isinstance(reset, int) else 0) == f.reset
