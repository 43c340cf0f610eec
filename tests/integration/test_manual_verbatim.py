"""The manual's four Python examples run as written, with no server: ``Device()`` is the
default device (``XRT_DEVICE`` unset: a private simulated Buyi NPU, ``sim://buyi``).

Each example's text (`manual_python_examples`, a verbatim copy checked against the manual
when it is beside the repository) is executed in a `unittest.TestCase`, with what the
manual leaves to its surroundings bound first: ``self`` (the test case), and for 1.2 and
1.1.3, which say "the omitted parts are as in 1.1.1", ``sess``, ``filepath``,
``snapshot_file`` and ``device``. Beyond the manual's own assertions, every session must
compute what the host computes, and the session restored from the snapshot what the one
that dumped it did.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import unittest
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from manual_python_examples import EXAMPLES

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
MANUAL = Path(
    os.environ.get("XRT_MANUAL_PATH", REPO.parent / "shared/seeds/000_15ee72ecd555691c.txt")
)


def test_the_examples_are_the_manuals_own_text() -> None:
    if not MANUAL.is_file():
        pytest.skip(f"the manual is not at {MANUAL} (set XRT_MANUAL_PATH)")
    blocks = re.findall(r"```python\n(.*?)```", MANUAL.read_text(encoding="utf-8"), re.S)
    assert blocks == list(EXAMPLES.values())


def _input(network: Any) -> np.ndarray:
    ttype = network.values[network.inputs[0]]
    return np.random.default_rng(7).standard_normal(ttype.shape).astype(np.float32)


def _outputs(sess: Any, x: np.ndarray) -> list[np.ndarray]:
    return [t.numpy() for t in sess.forward([x])]


class ManualExamples(unittest.TestCase):
    """Runs with ``XRT_DEVICE`` unset, so ``Device()`` is the embedded simulated Buyi."""

    def setUp(self) -> None:
        saved = os.environ.pop("XRT_DEVICE", None)
        if saved is not None:
            self.addCleanup(os.environ.__setitem__, "XRT_DEVICE", saved)
        self.spaces: list[dict[str, Any]] = []
        self.addCleanup(self._close_all)

    def _close_all(self) -> None:
        from xrt import Device, Session

        for space in self.spaces:
            for value in space.values():
                if isinstance(value, Session):
                    value.close()
        for space in self.spaces:
            for value in space.values():
                if isinstance(value, Device):
                    value.close()

    def run_example(self, name: str, **surroundings: Any) -> dict[str, Any]:
        space: dict[str, Any] = {"self": self, **surroundings}
        self.spaces.append(space)
        exec(compile(EXAMPLES[name], f"<manual {name}>", "exec"), space)
        return space

    def assert_host_equal(self, sess: Any, network: Any) -> None:
        """`sess` computes what the host computes on the same network with its HardOp left a
        QConv2d (`generate_network(target=None)`: the same weights)."""
        import xir

        from xrt import HostBackend, HostDevice, Session

        x = _input(network)
        twin = xir.generate_network(target=None)
        with Session.create([HostBackend], twin, [HostDevice.default()]).apply() as host:
            want = _outputs(host, x)
        for got, expected in zip(_outputs(sess, x), want, strict=True):
            np.testing.assert_array_equal(got, expected)

    def test_1_1_1_create_by_priority_and_by_order(self) -> None:
        space = self.run_example("CREATE_BY_PRIORITY")
        network = space["network"]
        self.assertEqual(
            [op.op_type for op in network.ops],
            ["Input", "Conv2d", "Cast", "HardOp", "Cast", "Relu", "MaxPool2d", "Output"],
        )
        self.assertEqual([op.op_id for op in network.ops], list(range(8)))
        self.assert_host_equal(space["sess1"], network)
        sess2 = space["sess2"]
        sess2.apply()
        self.assertEqual(
            {i: type(b) for i, b in sess2.backendBindings().items() if 1 <= i <= 6},
            {i: type(b) for i, b in space["sess1"].backendBindings().items() if 1 <= i <= 6},
        )
        self.assert_host_equal(sess2, network)

    def test_1_1_2_create_with_backends(self) -> None:
        space = self.run_example("CREATE_WITH_BACKENDS")
        self.assert_host_equal(space["sess"], space["network"])

    def test_1_2_dump_then_1_1_3_create_with_snapshot(self) -> None:
        from xrt import Device

        # "The omitted parts are as in 1.1.1": its session, sess1, is the one dumped.
        made = self.run_example("CREATE_BY_PRIORITY")
        folder = Path(tempfile.mkdtemp(prefix="xrt-manual-"))
        self.addCleanup(shutil.rmtree, folder, True)
        filepath = str(folder / "manual.snapshot")
        self.run_example("DUMP_SNAPSHOT", sess=made["sess1"], filepath=filepath)
        self.assertTrue(Path(filepath).is_file())
        star = self.run_example("CREATE_BY_PRIORITY")  # the imports and names of 1.1.1
        surroundings = {k: v for k, v in star.items() if not k.startswith("__") and k != "self"}
        surroundings.update(snapshot_file=filepath, device=Device())
        restored = self.run_example("CREATE_WITH_SNAPSHOT", **surroundings)["sess"]
        x = _input(made["network"])
        for got, want in zip(_outputs(restored, x), _outputs(made["sess1"], x), strict=True):
            np.testing.assert_array_equal(got, want)
