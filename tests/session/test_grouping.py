"""Subgraphs: consecutive operators on one non-host backend run as one unit.

`tinynpu.grouping_network` has two runs of TinyNpu operators with values crossing their
boundaries (an internal value, a value read by a later run, a network output produced
mid-run). Bindings, the units and their inputs and outputs, the `forward_subgraph` calls and
the numbers (against the host-only twin, bit for bit) are all checked.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest
from tinynpu import TinyNpuBackend, grouping_network, reference_twin

from xrt.backend import Backend, HostBackend, Subgraph
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, Operator, run_network_reference
from xrt.session import Session

NPU_OPS = {3, 4, 5, 6, 9, 10, 11}


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


def _out(net: Network, op_id: int) -> str:
    (v,) = net.op(op_id).outputs
    return v


@pytest.fixture(scope="module")
def net() -> Network:
    return grouping_network()


def _session(net: Network, merge: bool = True) -> Session:
    sess = Session.create([TinyNpuBackend, HostBackend], net)
    sess.backends[0].auto_merge = merge
    return sess.apply()


def _check_numbers(sess: Session, net: Network, seed: int) -> None:
    x = _x(seed)
    got = sess.forward([x])
    want = run_network_reference(reference_twin(net), [x])
    assert len(got) == len(want) == 3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_bindings_follow_registry_and_constraints(net: Network) -> None:
    sess = _session(net)
    bindings = sess.backend_bindings()
    assert {i for i, b in bindings.items() if isinstance(b, TinyNpuBackend)} == NPU_OPS
    assert all(isinstance(bindings[i], HostBackend) for i in set(net.op_ids) - NPU_OPS)


def test_units_and_subgraph_boundaries(net: Network) -> None:
    sess = _session(net)
    units = sess.execution_units()
    kinds = [u.op_ids if isinstance(u, Subgraph) else u.op_id for u in units]
    # The Input (0) and Output (15) ops are units of their own, on the host.
    assert kinds == [0, 1, 2, [3, 4, 5, 6], 7, 8, [9, 10, 11], 12, 13, 14, 15]
    first, second = (u for u in units if isinstance(u, Subgraph))
    assert first.backend is second.backend is sess.backends[0]
    # In: the quantized conv output. Out: the int8 ReLU output (read by op 11 in the next
    # run, and by op 14 on the host), the pool output (a network output) and the float
    # result (read by op 7). The program's output (op 5) stays inside.
    assert first.inputs == (_out(net, 2),)
    assert first.outputs == (_out(net, 3), _out(net, 4), _out(net, 6))
    assert second.inputs == (_out(net, 8), _out(net, 3))
    assert second.outputs == (_out(net, 10), _out(net, 11))
    plan = sess.memory_plan.placements
    assert _out(net, 5) not in plan and _out(net, 9) not in plan  # internal: not planned
    assert all(v in plan for u in (first, second) for v in u.outputs)


def test_subgraphs_run_as_one_call_and_match_the_host(net: Network) -> None:
    sess = _session(net)
    npu = sess.backends[0]
    assert isinstance(npu, TinyNpuBackend)
    _check_numbers(sess, net, 1)
    assert npu.launches == [(3, 4, 5, 6), (9, 10, 11)]
    _check_numbers(sess, net, 2)
    assert len(npu.launches) == 4


def test_without_auto_merge_every_op_is_its_own_unit(net: Network) -> None:
    sess = _session(net, merge=False)
    assert [u.op_id for u in sess.execution_units()] == net.op_ids
    assert not any(isinstance(u, Subgraph) for u in sess.execution_units())
    _check_numbers(sess, net, 3)
    npu = sess.backends[0]
    assert isinstance(npu, TinyNpuBackend) and npu.launches == []
    assert _out(net, 5) in sess.memory_plan.placements  # now every value crosses a unit


class CutAfterProgram(TinyNpuBackend):
    """An NPU whose compiler ends a program after each HardOp."""

    def partition(self, ops: Sequence[Operator]) -> list[tuple[Operator, ...]]:
        groups: list[tuple[Operator, ...]] = []
        current: list[Operator] = []
        for op in ops:
            current.append(op)
            if op.op_type == "HardOp":
                groups.append(tuple(current))
                current = []
        if current:
            groups.append(tuple(current))
        return groups


def test_partition_hook_cuts_runs(net: Network) -> None:
    sess = Session.create([CutAfterProgram, HostBackend], net).apply()
    subs = [u.op_ids for u in sess.execution_units() if isinstance(u, Subgraph)]
    assert subs == [[3, 4, 5], [6], [9, 10, 11]]
    _check_numbers(sess, net, 4)
    npu = sess.backends[0]
    assert isinstance(npu, CutAfterProgram) and npu.launches == [(3, 4, 5), (6,), (9, 10, 11)]


class BadPartition(TinyNpuBackend):
    def partition(self, ops: Sequence[Operator]) -> list[tuple[Operator, ...]]:
        return [tuple(ops[:-1])] if len(ops) > 1 else [tuple(ops)]


def test_a_partition_that_loses_ops_is_a_backend_error(net: Network) -> None:
    sess = Session.create([BadPartition, HostBackend], net)
    with pytest.raises(XrtError) as e:
        sess.apply()
    assert e.value.code == ErrorCode.BACKEND_INTERNAL and "partition" in e.value.message


def test_forked_sessions_run_concurrently_with_different_inputs(net: Network) -> None:
    sess = _session(net)
    twin = sess.fork()
    assert twin.memory_plan is sess.memory_plan and twin.arena is not sess.arena
    for a, b in zip(sess.backends, twin.backends, strict=True):
        assert a is not b and type(a) is type(b)
        assert a._states is b._states  # the prepared state is shared, not copied
    reference = reference_twin(net)
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def worker(s: Session, seed: int) -> None:
        try:
            barrier.wait()
            for i in range(6):
                x = _x(seed + i)
                got = s.forward([x])
                for g, w in zip(got, run_network_reference(reference, [x]), strict=True):
                    np.testing.assert_array_equal(g.numpy(), w)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(s, seed)) for s, seed in ((sess, 100), (twin, 200))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    launches = [b.launches for b in (sess.backends[0], twin.backends[0])]
    assert launches[0] == launches[1] == [(3, 4, 5, 6), (9, 10, 11)] * 6


def test_backend_of_a_value_is_what_constraints_see(net: Network) -> None:
    """Op 11 reads op 3's output from an earlier run: the constraint still sees TinyNpu."""
    seen: dict[int, object] = {}

    class Spy(TinyNpuBackend):
        pass

    original = TinyNpuBackend.lookup("Cast")
    assert original is not None and original.constraint is not None

    def spying(op: Operator, backend: Backend, ctx) -> bool:  # type: ignore[no-untyped-def]
        seen[op.op_id] = ctx.producer_backend(op.inputs[0])
        return original.constraint(op, backend, ctx)  # type: ignore[misc]

    Spy.add_op("Cast", original.forward, constraint=spying)
    sess = Session.create([Spy, HostBackend], net)
    npu = sess.backends[0]
    assert seen[11] is npu and seen[6] is npu and seen[10] is npu
    assert isinstance(seen[2], HostBackend) and isinstance(seen[8], HostBackend)
    assert TinyNpuBackend.lookup("Cast") is original  # the parent's registry is untouched
