"""Backends: the per-class operator registry, the life cycle, fork and view, HostBackend."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from tinynpu import TinyNpuBackend, manual_network

from xrt import Device, HostDevice, Tensor, TensorType
from xrt.backend import (
    BOUNDARY_ENTRY,
    Backend,
    BindContext,
    HostBackend,
    HostOpState,
    backend_types,
    get_backend_type,
    register_backend_type,
)
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkBuilder, Operator, run_network_reference
from xrt.ops import op_types


def _relu_fwd(op: Operator, ins: list[Tensor], outs: list[Tensor], b: Backend) -> list[np.ndarray]:
    return [np.maximum(ins[0].numpy(), 0)]


def _add_fwd(op: Operator, ins: list[Tensor], outs: list[Tensor], b: Backend) -> list[np.ndarray]:
    return [ins[0].numpy() + ins[1].numpy()]


def _chain(n: int = 3) -> Network:
    b = NetworkBuilder("chain")
    v = b.input("x", TensorType("FP32", [2, 5]))
    w = v
    for _ in range(n):
        (w,) = b.add("Relu", [w])
    (y,) = b.add("Add", [w, v])
    return b.build([y])


def _errcode(fn, *args, **kw) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as e:
        fn(*args, **kw)
    return e.value.code


# -- registry -------------------------------------------------------------------------------


def test_registries_are_per_class_and_subclasses_extend_without_mutating() -> None:
    class Parent(Backend):
        pass

    class Child(Parent):
        pass

    def other_relu(op, ins, outs, b):  # type: ignore[no-untyped-def]
        return [np.maximum(ins[0].numpy(), 1)]

    Parent.add_op("Relu", _relu_fwd)
    Child.op("Add")(_add_fwd)
    Child.add_op("Relu", other_relu)  # overrides the parent's entry for Child only
    assert set(Parent.op_registry()) == {"Relu"}
    assert set(Child.op_registry()) == {"Relu", "Add"}
    assert Parent.lookup("Relu").forward is _relu_fwd  # type: ignore[union-attr]
    assert Child.lookup("Relu").forward is other_relu  # type: ignore[union-attr]
    assert Parent.lookup("Add") is None and not Parent.supports("Add")
    assert Child.supports("Add") and not HostBackend.supports("NoSuchOp")
    # Registration on a sibling class or on Backend itself changes nothing here.
    assert "Relu" not in Backend.op_registry()


def test_registration_errors() -> None:
    class Mine(Backend):
        pass

    Mine.add_op("Relu", _relu_fwd)
    assert _errcode(Mine.add_op, "Relu", _relu_fwd) == ErrorCode.WRONG_TYPE  # twice
    Mine.add_op("Relu", _add_fwd, replace=True)
    assert Mine.lookup("Relu").forward is _add_fwd  # type: ignore[union-attr]
    assert _errcode(Mine.add_op, "NoSuchOp", _relu_fwd) == ErrorCode.WRONG_TYPE
    assert _errcode(Mine.add_op, "Add", 42) == ErrorCode.WRONG_TYPE
    assert _errcode(Mine.add_op, "Add", _add_fwd, init="no") == ErrorCode.WRONG_TYPE
    assert _errcode(Backend.add_op, "Add", _add_fwd) == ErrorCode.WRONG_TYPE


def test_host_backend_registers_every_op_type() -> None:
    # Every op type but Input and Output, which every backend passes through with one entry.
    assert set(HostBackend.op_registry()) == set(op_types()) - {"Input", "Output"}
    assert HostBackend.lookup("Input") is BOUNDARY_ENTRY is TinyNpuBackend.lookup("Output")
    assert Backend.supports("Input") and Backend.lookup("Output") is BOUNDARY_ENTRY
    assert HostBackend.is_host and not TinyNpuBackend.is_host


def test_backend_types_by_name() -> None:
    assert get_backend_type("host") is HostBackend
    assert backend_types()["host"] is HostBackend
    assert _errcode(get_backend_type, "nosuch") == ErrorCode.WRONG_TYPE
    with pytest.raises(XrtError):
        register_backend_type("host")(TinyNpuBackend)  # the name is taken
    with pytest.raises(XrtError):
        register_backend_type("notabackend")(int)  # type: ignore[type-var]


def test_constraints_are_checked_and_their_failures_reported() -> None:
    net = _chain(1)
    relu = net.op(1)

    class Picky(Backend):
        pass

    Picky.add_op("Relu", _relu_fwd, constraint=lambda op, b, ctx: op.op_id > 1)
    assert not Picky().is_op_supported(relu)
    Picky.add_op("Relu", _relu_fwd, constraint=lambda op, b, ctx: 1 / 0, replace=True)
    assert _errcode(Picky().is_op_supported, relu) == ErrorCode.BACKEND_INTERNAL
    Picky.add_op("Relu", _relu_fwd, constraint=lambda op, b, ctx: "yes", replace=True)
    assert _errcode(Picky().is_op_supported, relu) == ErrorCode.BACKEND_INTERNAL
    Picky.add_op(
        "Relu",
        _relu_fwd,
        constraint=lambda op, b, ctx: ctx.producer(op.inputs[0]) is None,
        replace=True,
    )
    assert Picky().is_op_supported(relu, BindContext(net, {}))


# -- life cycle -----------------------------------------------------------------------------


def test_life_cycle_order_is_enforced() -> None:
    net = _chain()
    b = HostBackend()
    assert not b.initialized and "not initialised" in repr(b)
    assert _errcode(b.apply) == ErrorCode.WRONG_ORDER
    assert _errcode(b.fork) == ErrorCode.WRONG_ORDER
    assert _errcode(b.view, [0]) == ErrorCode.WRONG_ORDER
    b.init(net)
    assert b.device is HostDevice.default() and b.network_view is not None
    assert _errcode(b.init, net) == ErrorCode.WRONG_ORDER  # twice
    assert _errcode(b.op_state, 1) == ErrorCode.WRONG_ORDER  # before apply
    x = Tensor.from_numpy(np.ones((2, 5), np.float32))
    out = Tensor(net.values[net.op(1).outputs[0]]).malloc_on(HostDevice.default_region())
    assert _errcode(b.forward_op, net.op(1), [x], [out]) == ErrorCode.WRONG_ORDER
    b.apply()
    assert b.applied and isinstance(b.op_state(1), HostOpState)
    assert b.op_state(0) is None  # the Input op computes nothing: no state
    b.forward_op(net.op(1), [x], [out])
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 5), np.float32))
    b.deinit()
    assert not b.initialized and not b.applied
    b.deinit()  # idempotent
    assert _errcode(b.forward_op, net.op(1), [x], [out]) == ErrorCode.WRONG_ORDER
    b.init(net.view([1, 2]))  # may be bound again
    assert b.network_view is not None and b.network_view.op_ids == [1, 2]


def test_init_checks_device_and_registry() -> None:
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    net = _chain()
    board = Device.open("mem://board")
    try:
        assert _errcode(HostBackend().init, net, board) == ErrorCode.WRONG_TYPE
    finally:
        board.close()
    closed = HostDevice()
    closed.close()
    assert _errcode(HostBackend().init, net, closed) == ErrorCode.WRONG_ORDER
    assert _errcode(HostBackend().init, net, "host://") == ErrorCode.WRONG_TYPE
    assert _errcode(HostBackend().init, "net") == ErrorCode.WRONG_TYPE
    # TinyNpu has no float Conv2d kernel.
    with pytest.raises(XrtError) as e:
        TinyNpuBackend().init(manual_network().view([1, 3]))
    assert e.value.code == ErrorCode.WRONG_TYPE and "op 1 (Conv2d" in e.value.message


def test_hardop_on_the_host_is_a_backend_error() -> None:
    b = HostBackend.create(manual_network().view([3]))
    with pytest.raises(XrtError) as e:
        b.apply()
    assert e.value.code == ErrorCode.BACKEND_INTERNAL
    assert "op 3 (HardOp 'npu_program')" in e.value.message and "tinynpu" in e.value.message


def test_forward_function_failures_name_the_op() -> None:
    net = _chain(1)

    class Broken(Backend):
        def default_device(self) -> Device:
            return HostDevice.default()

    def raises(op, ins, outs, b):  # type: ignore[no-untyped-def]
        raise ValueError("boom")

    def wrong_shape(op, ins, outs, b):  # type: ignore[no-untyped-def]
        return [np.zeros((5, 2), np.float32)]

    def wrong_dtype(op, ins, outs, b):  # type: ignore[no-untyped-def]
        return [np.zeros((2, 5), np.float64)]

    def too_many(op, ins, outs, b):  # type: ignore[no-untyped-def]
        return [np.zeros((2, 5), np.float32)] * 2

    relu = net.op(1)
    x = Tensor.from_numpy(np.ones((2, 5), np.float32))
    out = Tensor(net.values[relu.outputs[0]]).malloc_on(HostDevice.default_region())
    for fn, text in (
        (raises, "boom"),
        (wrong_shape, "float32[5, 2]"),
        (wrong_dtype, "float64"),
        (too_many, "2 results"),
    ):
        Broken.add_op("Relu", fn, replace=True)
        b = Broken.create(net.view([1]))
        b.apply()
        with pytest.raises(XrtError) as e:
            b.forward_op(relu, [x], [out])
        assert e.value.code == ErrorCode.BACKEND_INTERNAL
        assert "op 1 (Relu)" in e.value.message and text in e.value.message


def test_view_is_a_fork_on_some_of_the_ops() -> None:
    net = _chain(3)
    b = HostBackend.create(net)
    b.apply()
    v = b.view([1, 2])
    assert v is not b and v.network_view is not None and v.network_view.op_ids == [1, 2]
    assert v.op_state(1) is b.op_state(1) and v.op_state(3) is None
    assert HostBackend.create(net).view(1, 3).network_view.op_ids == [1, 2]  # type: ignore[union-attr]
    assert HostBackend.create(net).view(3).network_view.op_ids == [3, 4, 5]  # type: ignore[union-attr]
    part = HostBackend.create(net.view([0, 1]))
    assert _errcode(part.view, [2]) == ErrorCode.OUT_OF_RANGE  # not bound to this backend
    assert _errcode(part.view, 7) == ErrorCode.OUT_OF_RANGE
    assert _errcode(part.view, 0, 0) == ErrorCode.OUT_OF_RANGE  # selects nothing
    assert _errcode(part.view, ["0"]) == ErrorCode.WRONG_TYPE
    assert _errcode(part.view, "0") == ErrorCode.WRONG_TYPE


def test_forks_share_prepared_state_and_run_in_threads() -> None:
    """Two forks of one backend run the same operators concurrently on different inputs."""
    net = _chain(6)
    base = HostBackend.create(net)
    base.apply()
    forks = [base.fork(), base.fork()]
    assert all(f is not base and f._states is base._states for f in forks)
    assert all(f.op_state(2) is base.op_state(2) for f in forks)
    region = HostDevice.default_region()
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(forks))

    def run(backend: Backend, seed: int) -> None:
        try:
            barrier.wait()
            for i in range(20):
                x = np.random.default_rng(seed + i).standard_normal((2, 5)).astype(np.float32)
                env = {"x": Tensor.from_numpy(x)}
                backend.forward_op(net.input_op(), [env["x"]], [env["x"]])  # yields the feed
                for op in net.ops[1:]:  # the Output op reads the outputs and makes none
                    outs = [Tensor(net.values[v]).malloc_on(region) for v in op.outputs]
                    backend.forward_op(op, [env[v] for v in op.inputs], outs)
                    env.update(zip(op.outputs, outs, strict=True))
                (want,) = run_network_reference(net, [x])
                np.testing.assert_array_equal(env[net.outputs[0]].numpy(), want)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f, 10 * k)) for k, f in enumerate(forks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_host_parameters_are_read_only_views() -> None:
    net = manual_network()
    b = HostBackend.create(net.view([1]))
    b.apply()
    state = b.op_state(1)
    w = state.params["weight"]
    assert not w.flags.writeable and np.shares_memory(w, net.params["w"])
    assert net.params["w"].flags.writeable  # the network's own array is untouched


def test_default_subgraph_runs_ops_in_order_with_temporaries() -> None:
    """Backend.forward_subgraph's default: op by op, internal values in temporaries."""
    net = _chain(3)

    class Loop(Backend):
        def default_device(self) -> Device:
            return HostDevice.default()

    Loop.add_op("Relu", _relu_fwd)
    Loop.add_op("Add", _add_fwd)
    from xrt.backend import Subgraph

    b = Loop.create(net)
    b.apply()
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    y = Tensor(net.values[net.outputs[0]]).malloc_on(HostDevice.default_region())
    sub = Subgraph(b, net.ops[1:-1], ("x",), tuple(net.outputs))
    b.forward_subgraph(sub, {"x": Tensor.from_numpy(x)}, {net.outputs[0]: y})
    np.testing.assert_array_equal(y.numpy(), run_network_reference(net, [x])[0])
    assert sub.op_type == "Subgraph" and sub.name == "1..4" and sub.op_id == 1
    assert sub.describe() == "subgraph [1, 2, 3, 4] (Relu, Relu, Relu, Add) on Loop"
    # With the Input and Output ops too (the session never merges them): they pass through.
    y2 = Tensor(net.values[net.outputs[0]]).malloc_on(HostDevice.default_region())
    whole = Subgraph(b, net.ops, ("x",), tuple(net.outputs))
    b.forward_subgraph(whole, {"x": Tensor.from_numpy(x)}, {net.outputs[0]: y2})
    np.testing.assert_array_equal(y2.numpy(), y.numpy())
