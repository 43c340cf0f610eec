"""A quantized network for the fault and debugger tests, and a forward run in a thread of
its own (as `npu-emu debug`'s ``run`` starts one), shared by those test files."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from xrt import Network, Session
from xrt.backend import HostBackend
from xrt.quant import quantize_network

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "network"))

from netutil import random_feeds
from onnx_zoo import COMPOSITES


def quantized_small_cnn() -> tuple[Network, Any, list[np.ndarray]]:
    """The small CNN quantized on two random input sets, an input, and the host's outputs."""
    model = COMPOSITES["small_cnn"]()
    net = quantize_network(Network.from_onnx(model), [random_feeds(model, seed=s) for s in (0, 1)])
    feeds = random_feeds(model, seed=7)
    with Session.create([HostBackend], net).apply() as sess:
        want = [t.numpy() for t in sess.forward(feeds)]
    return net, feeds, want


class Run:
    """A forward in a thread of its own."""

    def __init__(self, sess: Session, feeds: Any) -> None:
        self.out: list[np.ndarray] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(sess, feeds), daemon=True)
        self.thread.start()

    def _run(self, sess: Session, feeds: Any) -> None:
        try:
            self.out = [t.numpy() for t in sess.forward(feeds)]
        except BaseException as exc:  # reported by finish(), or read by the test
            self.error = exc

    def finish(self, want: list[np.ndarray], timeout_s: float) -> None:
        """Wait for the forward; it must end without error, bit-exact with `want`."""
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the network did not finish after continue"
        assert self.error is None, self.error
        assert self.out is not None
        for got, w in zip(self.out, want, strict=True):
            np.testing.assert_array_equal(got, w)
