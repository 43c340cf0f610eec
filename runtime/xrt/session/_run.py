"""`SessionRun`: a forward that does not block until it is done (OneFlow XRT's
``Executable::Run(inputs, options, block_until_done=false)``).

``Session.forward(inputs, block_until_done=False)`` checks what it can at once and returns a
`SessionRun`; the run itself (inputs copied in, every unit, the NPU's programs launched and
waited for, outputs copied out) goes on in a thread of its own while the caller does
something else, such as preparing the next inputs. Runs of one session are in order, as
work on one stream is: the session's next call (another forward, ``step_to``, ``close``)
first waits for the run before it. The inputs must not change until the run is done
(OneFlow's and CUDA's rule for asynchronous work): they are read while it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from xrt._checks import as_seconds
from xrt.errors import ErrorCode, XrtError
from xrt.tensor import Tensor

__all__ = ["SessionRun"]


class SessionRun:
    """A forward under way (see the module docstring); made by `Session.forward`."""

    def __init__(self, run: Callable[[], list[Tensor]], name: str) -> None:
        self._name = name
        self._done = threading.Event()
        self._outputs: list[Tensor] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(run,), name=name, daemon=True)
        self._thread.start()

    def _main(self, run: Callable[[], list[Tensor]]) -> None:
        try:
            self._outputs = run()
        except BaseException as exc:  # the caller's to see, through `result`
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        """True once the run has ended (its outputs are ready, or it failed)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run ends (OneFlow's synchronise); False if `timeout` seconds passed
        first (None: no limit).

        Raises:
            XrtError: 11003 for a negative timeout.
        """
        t = None if timeout is None else as_seconds(timeout, "timeout")
        return self._done.wait(t)

    def result(self, timeout: float | None = None) -> list[Tensor]:
        """The run's outputs once it is done (as `Session.forward` returns them).

        Raises:
            XrtError: 11015 when `timeout` passed first; whatever the run raised (11003,
                11010 for bad inputs, 11013 for a failing kernel, ...).
        """
        if not self.wait(timeout):
            raise XrtError(ErrorCode.TIMEOUT, f"{self._name}: not done after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._outputs is not None
        return self._outputs

    def __repr__(self) -> str:
        state = "failed" if self._error else "done" if self.done() else "running"
        return f"<SessionRun {self._name} {state}>"
