"""The requesting end of a register ring (`xrt.hw.ring`), written once: the lease holder's
(`xrt.transport.grpc.register_ring`, blocking) and the server's own
(`npuemu.server.register_ring.ServerRing`, asyncio) both put requests and read answers
through `RingCore`; only how they wait for the *done* eventfd differs.

One request at a time: `put_batch` or `put_wait` writes the request and returns its
sequence number (the caller then kicks the simulator), `answered` tells whether the
response of that number is in, and `batch_results` / `wait_result` read it. A response
that is not OK raises `RingError` with the simulator's reason.
"""

from __future__ import annotations

import ctypes
import mmap

from xrt.hw.port import RegBatch, RegResults, WaitResult
from xrt.hw.ring import (
    HEADER,
    MAX_WALL_MS,
    OPS_OFFSET,
    REGBUS_RESULT,
    REQUEST,
    REQUEST_OFFSET,
    RESPONSE,
    RESPONSE_OFFSET,
    RESULTS_OFFSET,
    RING_MAGIC,
    RING_MAX_OPS,
    RING_VERSION,
    RingKind,
    RingState,
    RingStatus,
    refusal,
)

__all__ = ["RingCore", "RingError", "RingRevokedError"]


class RingError(RuntimeError):
    """The simulator refused a request (its reason in the message; `status` is the
    `RingStatus`), or did not answer (`status` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RingRevokedError(RingError):
    """The ring is gone: the lease ended or the device's worker restarted."""


class RingCore:
    """Requests into one ring's mapping (see the module docstring).

    Args:
        mapping: The ring file, mapped (the caller closes it after `release`).
        generation: The generation expected in its header (None: whatever it holds, for
            the ring's own maker).

    Raises:
        RingError: the mapping is not a ring of this layout (or not of that generation).
    """

    def __init__(self, mapping: mmap.mmap, generation: int | None = None) -> None:
        magic, version, max_ops, _, gen, *_ = HEADER.format.unpack_from(mapping, 0)
        expected = (RING_MAGIC, RING_VERSION, RING_MAX_OPS)
        if (magic, version, max_ops) != expected or generation not in (None, gen):
            raise RingError(
                f"not the register ring expected (magic {magic:#x}, version {version}, "
                f"max_ops {max_ops}, generation {gen})"
            )
        self._map = mapping
        at = HEADER.offsets
        # 8-byte words read and written whole (ctypes), as the simulator reads them.
        self._state = ctypes.c_uint32.from_buffer(mapping, at["state"])
        self._req_seq = ctypes.c_uint64.from_buffer(mapping, at["req_seq"])
        self._resp_seq = ctypes.c_uint64.from_buffer(mapping, at["resp_seq"])
        self._cycles = ctypes.c_uint64.from_buffer(mapping, at["cycles"])
        self._n_ops = 0

    @property
    def live(self) -> bool:
        return self._state.value == RingState.LIVE

    @property
    def cycles(self) -> int:
        """The device's simulated cycles after the last response."""
        return int(self._cycles.value)

    def put_batch(self, batch: RegBatch) -> int:
        """Write a register batch (1 to `RING_MAX_OPS` operations) as the next request;
        its sequence number."""
        if not 1 <= batch.n <= RING_MAX_OPS:
            raise ValueError(f"{batch.n} operations: a ring request takes 1..{RING_MAX_OPS}")
        self._map[OPS_OFFSET : OPS_OFFSET + len(batch.records)] = batch.records
        REQUEST.format.pack_into(self._map, REQUEST_OFFSET, RingKind.BATCH, batch.n, 0, 0, 0)
        self._n_ops = batch.n
        return self._next()

    def put_wait(self, max_cycles: int, timeout_s: float) -> int:
        """Write a wait for the interrupt (at most `max_cycles` simulated cycles and
        `timeout_s` of wall time) as the next request; its sequence number."""
        wall_ms = max(1, min(MAX_WALL_MS, int(timeout_s * 1000)))
        REQUEST.format.pack_into(
            self._map, REQUEST_OFFSET, RingKind.WAIT_IRQ, 0, max_cycles, wall_ms, 0
        )
        self._n_ops = 0
        return self._next()

    def _next(self) -> int:
        if not self.live:
            raise RingRevokedError("the register ring was revoked")
        seq = self._req_seq.value + 1
        self._req_seq.value = seq
        return seq

    def answered(self, seq: int) -> bool:
        return self._resp_seq.value == seq

    def _response(self) -> tuple[int, ...]:
        response = RESPONSE.format.unpack_from(self._map, RESPONSE_OFFSET)
        if response[0] != RingStatus.OK:
            raise RingError(refusal(self._map), response[0])
        return response

    def batch_results(self) -> RegResults:
        """The results of the batch answered (one per operation run)."""
        n = min(self._response()[1], self._n_ops)
        end = RESULTS_OFFSET + n * REGBUS_RESULT.size
        return RegResults(bytes(self._map[RESULTS_OFFSET:end]))

    def wait_result(self) -> WaitResult:
        """How the wait answered ended."""
        _, _, _, outcome, _, waited = self._response()
        return WaitResult(outcome, waited)

    def release(self) -> None:
        """Drop the views of the mapping (so it can be closed)."""
        for name in ("_state", "_req_seq", "_resp_seq", "_cycles"):
            if hasattr(self, name):
                delattr(self, name)  # the ctypes views hold the mapping open
