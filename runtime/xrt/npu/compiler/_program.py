"""The compiled program container: what a backend uploads and relaunches."""

from __future__ import annotations

from dataclasses import dataclass, field

from xrt.hw import isa

__all__ = ["BaseRole", "LayerReport", "NpuProgram", "TensorBinding", "TensorPlacement"]


@dataclass(frozen=True)
class BaseRole:
    """What one base register points at during a launch.

    Attributes:
        index: The base register.
        kind: ``"const"`` (the constant blob), ``"input"``, ``"output"``, ``"scratch"``
            (intermediates in external memory) or ``"ocm"`` (intermediates in on-chip memory).
        name: The value name for inputs and outputs, "" otherwise.
        size: Bytes the region must have.
    """

    index: int
    kind: str
    name: str
    size: int


@dataclass(frozen=True)
class TensorBinding:
    """Where a program input or output lives: channel-tiled at ``BASE[base] + offset``.

    Attributes:
        name: The network value.
        shape: Its NCHW (or NK) shape; the bytes are `xrt.npu.compiler.to_tiled` of it.
        base: Base register.
        offset: Byte offset from the base (0 for inputs and outputs).
        nbytes: Size in bytes.
    """

    name: str
    shape: tuple[int, ...]
    base: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class TensorPlacement:
    """Where an intermediate tensor of a program lives while it is live.

    The bytes are channel-tiled (``layout``: `xrt.npu.compiler.to_tiled` of `shape` with the
    program's block), at ``BASE[base] + offset``. They hold the tensor from the end of
    operator `first_op` until operator `last_op` has read it; after that the planner may
    give them to another tensor, so reading them after the launch gives the tensor only if
    no later tensor took its place (`readable_after`).

    Attributes:
        name: The network value (``VALUE#fold`` for a stem convolution's folded copy).
        memory: ``"ocm"`` (on-chip, ZG330) or ``"ddr"`` (external scratch).
        base: Base register of its region.
        offset: Byte offset from the base.
        nbytes: Size in bytes.
        shape: NCHW (or NK) shape.
        first_op: Op id of the operator that writes it.
        last_op: Op id of the last operator that reads it.
        alias_of: For a reshape's result, the tensor whose bytes it shares ("" otherwise).
        readable_after: Whether its bytes still hold it when the program has finished.
        layout: ``"tiled"``: ``(N, ceil(C/B), H, W, B)`` int8, padding lanes unspecified.
    """

    name: str
    memory: str
    base: int
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    first_op: int
    last_op: int
    alias_of: str = ""
    readable_after: bool = True
    layout: str = "tiled"


@dataclass
class LayerReport:
    """What the compiler did with one operator (printable)."""

    op_id: int
    op_type: str
    name: str
    detail: str
    macs: int = 0
    first_insn: int = 0
    last_insn: int = 0  # exclusive
    gemm_cycles: int = 0
    cycles: int | None = None  # span in the cost model's schedule, when estimated

    def __str__(self) -> str:
        util = ""
        if self.cycles and self.macs:
            util = f", {self.cycles} cycles, MAC util {self.macs / (self.cycles * 256):.0%}"
        return (
            f"[{self.op_id}] {self.op_type} {self.name}: insns {self.first_insn}.."
            f"{self.last_insn}{util}; {self.detail}"
        )


@dataclass
class NpuProgram:
    """A run of operators compiled for the compute engine.

    Attributes:
        instructions: The program, ending in FINISH.
        constants: The constant blob (weights, biases, PRM and LUT rows) for base register 0.
        bases: The role of every base register the program uses.
        inputs: Program inputs (channel-tiled, each at its own base register).
        outputs: Program outputs (each at its own base register).
        scratch_bytes: Size of the scratch region (intermediate tensors).
        layers: Per-operator report (tiling choices, instruction ranges, MACs).
        block: The array block B the program was compiled for.
        op_ids: The operators the program replaces.
        estimated_cycles: The golden cost model's estimate, when computed.
        intermediates: Where every intermediate tensor lives (the memory planner's result).
    """

    instructions: list[isa.Instruction]
    constants: bytes
    bases: list[BaseRole]
    inputs: list[TensorBinding]
    outputs: list[TensorBinding]
    scratch_bytes: int
    layers: list[LayerReport] = field(default_factory=list)
    block: int = 16
    op_ids: list[int] = field(default_factory=list)
    estimated_cycles: int | None = None
    intermediates: list[TensorPlacement] = field(default_factory=list)

    def encode(self) -> bytes:
        """The program's bytes (what the engine fetches)."""
        return isa.encode_program(self.instructions)

    @property
    def program_bytes(self) -> int:
        """Size of the encoded program."""
        return len(self.instructions) * isa.INSN_BYTES

    @property
    def ocm_bytes(self) -> int:
        """Bytes of on-chip memory the program keeps intermediates in."""
        return sum(b.size for b in self.bases if b.kind == "ocm")

    def placement_of(self, name: str) -> TensorPlacement | None:
        """The placement of intermediate `name`, or None when it is not one."""
        return next((p for p in self.intermediates if p.name == name), None)

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates of all layers."""
        return sum(layer.macs for layer in self.layers)

    def report(self) -> str:
        """Instructions, bytes, bases and every layer's tiling, one line each."""
        head = (
            f"NPU program: {len(self.instructions)} instructions ({self.program_bytes} B), "
            f"constants {len(self.constants)} B, scratch {self.scratch_bytes} B"
        )
        if self.estimated_cycles is not None:
            head += f", ~{self.estimated_cycles} cycles"
        roles = ", ".join(
            f"BASE{b.index}={b.kind}{':' + b.name if b.name else ''}" for b in self.bases
        )
        places = [
            f"  {p.name}: {p.memory} +{p.offset:#x} {p.nbytes} B {list(p.shape)}, "
            f"ops {p.first_op}..{p.last_op}" + (f" (alias of {p.alias_of})" if p.alias_of else "")
            for p in self.intermediates
        ]
        return "\n".join(
            [head, "  " + roles] + ["  " + str(layer) for layer in self.layers] + places
        )
