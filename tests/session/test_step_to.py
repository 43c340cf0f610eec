"""step_to: run up to an operator, continue later, restart on new inputs or going back."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from tinynpu import TinyNpuBackend, grouping_network, reference_twin

from xrt import Tensor
from xrt.backend import HostBackend
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, run_network_reference
from xrt.session import Session


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


@pytest.fixture
def net() -> Network:
    return grouping_network()


def _all_values(net: Network, x: np.ndarray) -> dict[str, np.ndarray]:
    out = run_network_reference(reference_twin(net), [x], return_all=True)
    assert isinstance(out, dict)
    return out


class Counting:
    """A session with a post-callback counting how often each op ran."""

    def __init__(self, net: Network, merge: bool = False) -> None:
        self.sess = Session.create([TinyNpuBackend, HostBackend], net)
        self.sess.backends[0].auto_merge = merge
        self.sess.apply()
        self.runs: Counter[int] = Counter()
        self.sess.set_post_callback(self._note)

    def _note(self, sess: Session, unit: object, backend: object, outs: list[Tensor]) -> None:
        self.runs.update(getattr(unit, "op_ids", [getattr(unit, "op_id", -1)]))


def _check(net: Network, op_id: int, got: list[Tensor], values: dict[str, np.ndarray]) -> None:
    op = net.op(op_id)
    yields = op.inputs if op.op_type == "Output" else op.outputs  # Output yields its inputs
    assert len(got) == len(yields)
    for v, t in zip(yields, got, strict=True):
        np.testing.assert_array_equal(t.numpy(), values[v])


def test_stepping_through_runs_each_op_once(net: Network) -> None:
    c = Counting(net)
    x = _x(1)
    values = _all_values(net, x)
    for op_id in net.op_ids:
        _check(net, op_id, c.sess.step_to(op_id, [x]), values)
    assert c.runs == Counter(net.op_ids)


def test_skipping_ahead_and_continuing_without_inputs(net: Network) -> None:
    c = Counting(net)
    x = _x(2)
    values = _all_values(net, x)
    _check(net, 5, c.sess.step_to(5, [x]), values)
    assert set(c.runs) == {0, 1, 2, 3, 4, 5}
    _check(net, 9, c.sess.step_to(9), values)  # continues: no inputs needed
    _check(net, 15, c.sess.step_to(15, [x]), values)  # the same input object: continues
    assert c.runs == Counter(net.op_ids)


def test_new_inputs_or_going_back_restart(net: Network) -> None:
    c = Counting(net)
    x1, x2 = _x(3), _x(4)
    c.sess.step_to(6, [x1])
    # Equal values in a new list of the same array continue; a new array restarts.
    _check(net, 7, c.sess.step_to(7, [x1]), _all_values(net, x1))
    assert c.runs[1] == 1
    _check(net, 8, c.sess.step_to(8, [x2]), _all_values(net, x2))
    assert c.runs[1] == 2 and c.runs[8] == 1
    # Going back to an op that already ran restarts with the run's inputs.
    _check(net, 3, c.sess.step_to(3), _all_values(net, x2))
    assert c.runs[1] == 3 and c.runs[3] == 3
    # Asking for the op just run restarts too (it already ran).
    c.sess.step_to(3)
    assert c.runs[3] == 4


def test_a_finished_run_restarts_and_forward_ends_a_run(net: Network) -> None:
    c = Counting(net)
    x = _x(5)
    last = net.op_ids[-1]
    c.sess.step_to(last, [x])
    c.sess.step_to(2)  # the run had finished: a new one, with the same inputs
    assert c.runs[1] == 2 and c.runs[2] == 2 and c.runs[3] == 1
    outs = c.sess.forward([x])
    assert c.runs[1] == 3
    for t, w in zip(outs, run_network_reference(reference_twin(net), [x]), strict=True):
        np.testing.assert_array_equal(t.numpy(), w)
    with pytest.raises(XrtError):  # forward ended the step run; nothing to continue
        Counting(net).sess.step_to(4)
    c.sess.step_to(4)  # after forward: restarts from the previous run's inputs
    assert c.runs[1] == 4


def test_stepping_into_a_merged_subgraph_splits_it(net: Network) -> None:
    c = Counting(net, merge=True)
    npu = c.sess.backends[0]
    assert isinstance(npu, TinyNpuBackend)
    x = _x(6)
    values = _all_values(net, x)
    _check(net, 4, c.sess.step_to(4, [x]), values)
    assert npu.launches == [(3, 4)]
    _check(net, 5, c.sess.step_to(5), values)  # op 5's output is internal to [3..6]
    assert npu.launches == [(3, 4), (5,)]
    _check(net, 10, c.sess.step_to(10), values)
    assert npu.launches == [(3, 4), (5,), (6,), (9, 10)]
    _check(net, 14, c.sess.step_to(14), values)
    assert npu.launches[-1] == (11,)
    _check(net, 15, c.sess.step_to(15), values)  # the Output op
    assert c.runs == Counter(net.op_ids)
    # A forward afterwards runs whole subgraphs again.
    c.sess.forward([x])
    assert npu.launches[-2:] == [(3, 4, 5, 6), (9, 10, 11)]


def test_step_to_errors(net: Network) -> None:
    sess = Session.create([TinyNpuBackend, HostBackend], net)
    with pytest.raises(XrtError) as e:
        sess.step_to(1, [_x(0)])
    assert e.value.code == ErrorCode.WRONG_ORDER  # before apply
    sess.apply()
    for bad, code in ((99, ErrorCode.OUT_OF_RANGE), (16, ErrorCode.OUT_OF_RANGE)):
        with pytest.raises(XrtError) as e:
            sess.step_to(bad, [_x(0)])
        assert e.value.code == code and str(bad) in e.value.message
    for bad in ("3", 3.0, True, None):
        with pytest.raises(XrtError) as e:
            sess.step_to(bad, [_x(0)])  # type: ignore[arg-type]
        assert e.value.code == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError) as e:
        sess.step_to(3)  # nothing to continue and no inputs
    assert e.value.code == ErrorCode.WRONG_ORDER
    with pytest.raises(XrtError) as e:
        sess.step_to(3, [_x(0), _x(1)])
    assert e.value.code == ErrorCode.OUT_OF_RANGE


def test_step_to_on_a_view_session() -> None:
    """A session over part of a network takes the view's inputs: values made before it."""
    net = grouping_network()
    view = net.view(7, 11)  # ops 7..10
    sess = Session.create([TinyNpuBackend, HostBackend], view).apply()
    x = _x(7)
    values = _all_values(net, x)
    assert list(sess.inputs) == list(view.inputs)
    feeds = {n: values[n] for n in sess.inputs}
    _check(net, 9, sess.step_to(9, feeds), values)
    outs = sess.forward(feeds)
    assert list(sess.outputs) == list(view.outputs)
    for name, t in zip(sess.outputs, outs, strict=True):
        np.testing.assert_array_equal(t.numpy(), values[name])


def test_step_to_the_input_and_output_ops(net: Network) -> None:
    """The manual's stepTo loop visits the Input op (id 0) and the Output op (the last id):
    the first yields the input as fed, the second the network's outputs."""
    c = Counting(net)
    x = _x(7)
    (fed,) = c.sess.step_to(0, [x])
    np.testing.assert_array_equal(fed.numpy(), x)
    assert c.runs == Counter([0])  # nothing else ran
    last = net.output_op()
    assert last.op_id == 15 and last.op_type == "Output"
    outs = c.sess.step_to(last.op_id)  # continues from op 0
    want = run_network_reference(reference_twin(net), [x])
    assert [t.numpy().tolist() for t in outs] == [w.tolist() for w in want]
    assert c.runs == Counter(net.op_ids)
    # stepping to the Input op again restarts the run, with new inputs too
    (fed2,) = c.sess.step_to(0, [_x(8)])
    np.testing.assert_array_equal(fed2.numpy(), _x(8))
    assert c.runs[0] == 2 and c.runs[1] == 1
