"""The records of an `xrt.aic.InferenceSet`'s inferences (AIC100 names): `InferenceHandle`
(one inference's buffers and id), its `HandleState`, the `BufferTypes` its buffers are
checked against, the `InferenceSample` a finished inference leaves for profilers, and the
set's `InferenceSetProperties`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from xrt.errors import ErrorCode, XrtError

__all__ = [
    "BufferTypes",
    "HandleState",
    "InferenceHandle",
    "InferenceSample",
    "InferenceSetProperties",
]


@dataclass(frozen=True)
class InferenceSetProperties:
    """The AIC100 ``InferenceSetProperties`` that mean something here.

    Attributes:
        submit_retry_timeout_ms: How long one inference may run on a device before it
            counts as failed (the NPU backend's launch timeout); ``SubmitRetryTimeoutMs``.
        submit_num_retries: How many more activations a failed inference is tried on;
            ``SubmitNumRetries``.
        name: The set's name (profilers match it).
        dev_mapping: The context's devices the activations run on, by name, in activation
            order (``devMapping``); empty: the first free ones of the program's target.
        num_threads_per_queue: Threads taking each activation's inferences
            (``numThreadsPerQueue``; the seed's default is 4, ours 1). Each has a session
            of its own on the activation's device: their host work (inputs in, outputs
            out, host operators) overlaps, their NPU programs take turns on the device.
    """

    submit_retry_timeout_ms: int = 600_000
    submit_num_retries: int = 1
    name: str = ""
    dev_mapping: tuple[str, ...] = ()
    num_threads_per_queue: int = 1


class HandleState(Enum):
    """Where a handle is in its life cycle."""

    AVAILABLE = "available"  # in the available list
    HELD = "held"  # returned by get_available, not submitted yet
    QUEUED = "queued"  # submitted, waiting for an activation
    RUNNING = "running"  # on an activation
    COMPLETED = "completed"  # done (or failed), not yet fetched
    DELIVERED = "delivered"  # fetched by get_completed*, not yet put back


@dataclass(frozen=True)
class InferenceSample:
    """One finished inference, as profilers see it.

    Attributes:
        set_name: The set's name.
        id: The submission id.
        activation: Index of the activation that ran it last (-1: none did).
        device: That activation's device name.
        submitted_s / started_s / completed_s: ``time.perf_counter()`` instants.
        device_cycles: Engine busy cycles of its NPU launches (0 on the host).
        attempts: Activations it was tried on.
        ok: Whether it succeeded.
    """

    set_name: str
    id: int
    activation: int
    device: str
    submitted_s: float
    started_s: float
    completed_s: float
    device_cycles: int
    attempts: int
    ok: bool

    @property
    def latency_s(self) -> float:
        """Submission to completion."""
        return self.completed_s - self.submitted_s

    @property
    def run_s(self) -> float:
        """On the activation (upload, launch, readback)."""
        return self.completed_s - self.started_s


@dataclass(frozen=True)
class BufferTypes:
    """The buffers of one inference of a set: names, dtypes and shapes of its inputs and
    outputs, in mapping order (what `InferenceHandle.set_buffers` checks).

    Attributes:
        set_name: The set's name (errors name it).
        input_names / output_names: The values, in mapping order.
        inputs / outputs: (dtype, shape) of each.
    """

    set_name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    inputs: tuple[tuple[np.dtype[Any], tuple[int, ...]], ...]
    outputs: tuple[tuple[np.dtype[Any], tuple[int, ...]], ...]

    def check(self, buffers: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """(inputs, outputs or None) of `buffers`: the inputs, optionally followed by one
        array per output.

        Raises:
            XrtError: 11003 for a wrong count or shape; 11010 for a wrong dtype or a
                non-array (each naming the buffer).
        """
        n_in, n_out = len(self.inputs), len(self.outputs)
        if len(buffers) not in (n_in, n_in + n_out):
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"set_buffers: {len(buffers)} buffer(s); {self.set_name} takes {n_in} input(s) "
                f"{list(self.input_names)}, optionally followed by {n_out} output(s)",
            )
        names = [*self.input_names, *self.output_names]
        for name, buf, (dtype, shape) in zip(
            names, buffers, [*self.inputs, *self.outputs], strict=False
        ):
            if not isinstance(buf, np.ndarray):
                raise XrtError(ErrorCode.WRONG_TYPE, f"buffer {name!r}: {type(buf).__name__}")
            if buf.dtype != dtype:
                raise XrtError(
                    ErrorCode.WRONG_TYPE, f"buffer {name!r}: dtype {buf.dtype}, expected {dtype}"
                )
            if tuple(buf.shape) != shape:
                raise XrtError(
                    ErrorCode.OUT_OF_RANGE,
                    f"buffer {name!r}: shape {list(buf.shape)}, expected {list(shape)}",
                )
        return buffers[:n_in], buffers[n_in:] or None


class InferenceHandle:
    """One inference's buffers and id (the AIC100 ``InferenceHandle``); get one from
    `InferenceSet.get_available`, never construct it.

    Attributes:
        index: The handle's own number in its set (fixed).
        id: The id of its last submission (None before the first).
        state: Its `HandleState`.
        error: The XrtError of a failed inference, else None.
        activation: The activation that ran its last inference (-1: none).
    """

    def __init__(self, owner: object, index: int, types: BufferTypes) -> None:
        self._owner = owner  # the set that made it (which checks it is its own)
        self._types = types
        self.index = index
        self.id: int | None = None
        self.state = HandleState.AVAILABLE
        self.error: XrtError | None = None
        self.activation = -1
        self._inputs: list[np.ndarray] = []
        self._outputs: list[np.ndarray] | None = None  # caller's, written in place
        self._results: list[np.ndarray] = []
        self._attempts = 0
        self._times = [0.0, 0.0, 0.0]  # submitted, started, completed
        self._cycles = 0

    @property
    def attempts(self) -> int:
        """Activations its last submission was tried on (more than 1: it was retried)."""
        return self._attempts

    @property
    def ok(self) -> bool:
        """Completed without error."""
        return self.state in (HandleState.COMPLETED, HandleState.DELIVERED) and self.error is None

    def set_buffers(self, buffers: Sequence[np.ndarray]) -> None:
        """The inputs in mapping order, optionally followed by one array per output that
        the results are written into (else the set makes them).

        Raises:
            XrtError: 11012 unless the handle is HELD (from `get_available`); 11003 for a
                wrong count or shape; 11010 for a wrong dtype (each naming the buffer).
        """
        if self.state is not HandleState.HELD:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"set_buffers on {self!r}: only a handle from get_available takes buffers",
            )
        self._inputs, self._outputs = self._types.check(list(buffers))

    def get_buffers(self) -> list[np.ndarray]:
        """Inputs then outputs, in mapping order (outputs after completion)."""
        return [*self._inputs, *self._results]

    def outputs(self) -> list[np.ndarray]:
        """The outputs alone (after completion)."""
        return list(self._results)

    def __repr__(self) -> str:
        return f"InferenceHandle(index={self.index}, id={self.id}, {self.state.value})"
