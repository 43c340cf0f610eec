"""A Ctrl-C that lands in a finalizer is not lost by ``xrt run`` (xrt._interrupt)."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator

import pytest

from xrt._interrupt import check_interrupt, sigint_caught, sigint_deferred


class _InterruptedWhileFreed:
    """SIGINT arrives while its ``__del__`` runs: Python "ignores" what a finalizer raises."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs here, between bytecodes of the finalizer
            pass


@pytest.fixture
def sigint_default() -> Iterator[None]:
    """Python's own SIGINT handler (a suite run as a background job has SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("sigint_default")
def test_a_sigint_swallowed_by_a_finalizer_is_raised_at_the_next_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = 0
    with pytest.raises(KeyboardInterrupt), sigint_caught():
        for _ in range(3):
            check_interrupt()
            runs += 1
            _InterruptedWhileFreed()  # freed at once: the KeyboardInterrupt is swallowed
            gc.collect()
    assert runs == 1  # the second run did not start
    assert "KeyboardInterrupt" not in capsys.readouterr().err  # not reported as ignored
    check_interrupt()  # outside the block nothing is pending
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_pending_sigint_nothing_is_raised() -> None:
    with sigint_caught():
        check_interrupt()


def test_an_ignored_sigint_stays_ignored() -> None:
    """A background job (SIGINT ignored by its shell) is not made interruptible."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with sigint_caught():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("sigint_default")
def test_a_deferred_sigint_is_raised_when_the_block_ends() -> None:
    inside = False
    with pytest.raises(KeyboardInterrupt), sigint_caught():
        with sigint_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler has run by now: it must not have raised
                pass
            inside = True
        pytest.fail("the deferred SIGINT was not raised at the end of the block")
    assert inside
