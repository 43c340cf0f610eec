"""`RegBatch`: a builder that collects register ops by address, name or field and runs them as
one `RegRegion.execute` (one round trip on remote transports).

::

    with npu.batch() as b:
        b.write(npu.regs.SCRATCH, 0x1234)
        b.modify("INT_ENABLE", SW=1)
        status = b.read("STATUS")
    print(b.results[status])
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

from xrt._checks import as_int
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regops import RegMaskedWrite, RegOp, RegPoll, RegRead, RegWrite
from xrt.registers.named import RegisterAccess, RegisterFile, RegisterView

__all__ = ["BatchTarget", "RegBatch", "Target"]


class BatchTarget(RegisterAccess, Protocol):
    """What a batch asks of its register region (`RegRegion` is the one): its register
    file, for ops given by name, besides what named registers ask (`RegisterAccess`)."""

    @property
    def regs(self) -> RegisterFile: ...


Target: TypeAlias = int | str | RegisterView
"""What a batch op addresses: an int address (or offset), a register name or a view."""


class RegBatch:
    """Collects register ops and runs them as one `RegRegion.execute`.

    Targets are int addresses (absolute, or offsets when the batch is relative), register
    names, or `RegisterView` objects. Each method returns the index of its result in
    `results`. Used as a context manager the batch runs on a clean exit.
    """

    def __init__(self, region: BatchTarget, relative: bool = False) -> None:
        self._region = region
        self._relative = relative
        self.ops: list[RegOp] = []
        self.results: list[int | None] | None = None

    def _target(self, target: object) -> int:
        if isinstance(target, RegisterView):
            reg = target
        elif isinstance(target, str):
            reg = self._region.regs.register(target)
        else:
            a = as_int(target, "register address")
            return a
        return reg.offset if self._relative else reg.address

    def _add(self, op: RegOp) -> int:
        if self.results is not None:
            raise XrtError(ErrorCode.WRONG_ORDER, "this batch has already run")
        self.ops.append(op)
        return len(self.ops) - 1

    def _view(self, target: object) -> RegisterView:
        if isinstance(target, RegisterView):
            return target
        if isinstance(target, str):
            return self._region.regs.register(target)
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"field access needs a register name or view, got {target!r}"
        )

    def _rebase(self, op: RegOp) -> RegOp:
        # Views produce absolute ops; a relative batch wants offsets.
        if not self._relative:
            return op
        off = op.addr - self._region.base
        if isinstance(op, RegWrite):
            return RegWrite(off, op.value)
        if isinstance(op, RegMaskedWrite):
            return RegMaskedWrite(off, op.value, op.mask)
        if isinstance(op, RegPoll):
            return RegPoll(off, op.mask, op.expected, op.max_polls, op.timeout_s, op.interval_s)
        return RegRead(off)

    def read(self, target: Target) -> int:
        """Add a read."""
        return self._add(RegRead(self._target(target)))

    def write(self, target: Target, value: int) -> int:
        """Add a whole-register write."""
        return self._add(RegWrite(self._target(target), value))

    def write_masked(self, target: Target, value: int, mask: int) -> int:
        """Add a raw masked read-modify-write."""
        return self._add(RegMaskedWrite(self._target(target), value, mask))

    def modify(self, target: str | RegisterView, **fields: int) -> int:
        """Add a named-field modify (see `RegisterView.modify`)."""
        return self._add(self._rebase(self._view(target).op_modify(**fields)))

    def poll(
        self,
        target: Target,
        mask: int | None = None,
        expected: int | None = None,
        *,
        max_polls: int | None = None,
        timeout_s: float | None = None,
        interval_s: float = 0.0,
        **fields: int,
    ) -> int:
        """Add a poll-until, by fields (needs a named target) or by `mask`/`expected`."""
        if fields:
            op = self._view(target).op_poll(
                max_polls=max_polls, timeout_s=timeout_s, interval_s=interval_s, **fields
            )
            return self._add(self._rebase(op))
        if mask is None or expected is None:
            raise XrtError(ErrorCode.WRONG_TYPE, "poll needs fields or both mask and expected")
        return self._add(
            RegPoll(self._target(target), mask, expected, max_polls, timeout_s, interval_s)
        )

    def run(self) -> list[int | None]:
        """Run the ops (once) and return their results."""
        if self.results is not None:
            raise XrtError(ErrorCode.WRONG_ORDER, "this batch has already run")
        self.results = self._region.execute(self.ops, relative=self._relative)
        return self.results

    def __enter__(self) -> RegBatch:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None and self.results is None:
            self.run()

    def __len__(self) -> int:
        return len(self.ops)
