"""Bad input and wrong call order: each is a clear XrtError with the right code."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from tinynpu import TinyNpuBackend, manual_network

from xrt import DataType, Device, HostDevice, QuantParams, Tensor, TensorType
from xrt.backend import Backend, HostBackend
from xrt.errors import ErrorCode, XrtError
from xrt.network import Network, NetworkBuilder
from xrt.session import Session


def _two_inputs() -> Network:
    """y declared first but used second: inputs go in declared order, not first use."""
    b = NetworkBuilder("two")
    y = b.input("y", TensorType("FP32", [2, 3]))
    x = b.input("x", TensorType("FP32", [2, 3]))
    (r,) = b.add("Relu", [x])
    (s,) = b.add("Mul", [r, y])
    return b.build([s])


def _code(fn, *args, **kw) -> XrtError:  # type: ignore[no-untyped-def]
    with pytest.raises(XrtError) as e:
        fn(*args, **kw)
    return e.value


@pytest.fixture
def sess() -> Session:
    return Session.create([HostBackend], _two_inputs()).apply()


def test_inputs_follow_the_declared_order(sess: Session) -> None:
    assert sess.inputs == ("y", "x")
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = -np.ones((2, 3), np.float32) * np.array([[1], [-1]], np.float32)
    (out,) = sess.forward([y, x])
    np.testing.assert_array_equal(out.numpy(), np.maximum(x, 0) * y)
    (same,) = sess.forward({"x": x, "y": y})
    np.testing.assert_array_equal(same.numpy(), out.numpy())


def test_wrong_input_count_shape_dtype_and_type(sess: Session) -> None:
    good = np.zeros((2, 3), np.float32)
    cases = [
        ([good], ErrorCode.OUT_OF_RANGE, "expects 2 input(s)"),
        ([good, good, good], ErrorCode.OUT_OF_RANGE, "got 3"),
        ([good, np.zeros((3, 2), np.float32)], ErrorCode.OUT_OF_RANGE, "shape [2, 3]"),
        ([good, np.zeros((2, 3), np.float64)], ErrorCode.WRONG_TYPE, "float64"),
        ([good, [[0.0] * 3] * 2], ErrorCode.WRONG_TYPE, "numpy array, got list"),
        (good, ErrorCode.WRONG_TYPE, "a list or a dict"),
        ({"x": good}, ErrorCode.OUT_OF_RANGE, "missing ['y']"),
        ({"x": good, "y": good, "z": good}, ErrorCode.OUT_OF_RANGE, "unknown ['z']"),
        (
            [good, Tensor.from_numpy(np.zeros((2, 3), np.int32))],
            ErrorCode.WRONG_TYPE,
            "int32",
        ),
        ([good, Tensor.from_numpy(np.zeros((1, 3), np.float32))], ErrorCode.OUT_OF_RANGE, "[1, 3]"),
        ([good, Tensor(TensorType("FP32", [2, 3]))], ErrorCode.WRONG_ORDER, "no data"),
    ]
    for inputs, code, text in cases:
        err = _code(sess.forward, inputs)
        assert err.code == code, (inputs, err)
        assert text in err.message, (text, err.message)


def test_tensor_inputs_from_device_memory_and_quantization_checks() -> None:
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    b = NetworkBuilder("q")
    x = b.input("x", TensorType("SInt8", [4], quant=QuantParams(0.5)))
    (y,) = b.add("Relu", [x])
    sess = Session.create([HostBackend], b.build([y])).apply()
    board = Device.open("mem://q")
    try:
        q = np.array([-3, -1, 2, 5], np.int8)
        on_board = Tensor.from_numpy(q, quant=QuantParams(0.5), region=board.default_mem_region())
        (out,) = sess.forward([on_board])  # read from device memory
        np.testing.assert_array_equal(out.numpy(), np.maximum(q, 0))
        assert out.quant == QuantParams(0.5) and out.dtype is DataType.SINT8
        plain = Tensor.from_numpy(q)  # no quantization parameters: accepted
        np.testing.assert_array_equal(sess.forward([plain])[0].numpy(), np.maximum(q, 0))
        other = Tensor.from_numpy(q, quant=QuantParams(0.25))
        assert _code(sess.forward, [other]).code == ErrorCode.WRONG_TYPE
    finally:
        board.close()


def test_output_tensors_are_checked(sess: Session) -> None:
    x = np.zeros((2, 3), np.float32)
    region = HostDevice.default_region()
    good = Tensor(TensorType("FP32", [2, 3])).malloc_on(region)
    cases = [
        ([], ErrorCode.OUT_OF_RANGE),
        ([good, good], ErrorCode.OUT_OF_RANGE),
        ([np.zeros((2, 3), np.float32)], ErrorCode.WRONG_TYPE),
        ([Tensor(TensorType("FP16", [2, 3])).malloc_on(region)], ErrorCode.WRONG_TYPE),
        ([Tensor(TensorType("FP32", [3, 2])).malloc_on(region)], ErrorCode.OUT_OF_RANGE),
        ([Tensor(TensorType("FP32", [2, 3]))], ErrorCode.WRONG_ORDER),
        (good, ErrorCode.WRONG_TYPE),
    ]
    for outputs, code in cases:
        assert _code(sess.forward, [x, x], outputs).code == code, outputs
    assert sess.forward([x, x], [good])[0] is good


def test_call_order() -> None:
    sess = Session.create([HostBackend], _two_inputs())
    x = np.zeros((2, 3), np.float32)
    for fn, args in (
        (sess.forward, ([x, x],)),
        (sess.step_to, (1, [x, x])),
        (sess.execution_units, ()),
    ):
        err = _code(fn, *args)
        assert err.code == ErrorCode.WRONG_ORDER and "apply()" in err.message
    assert _code(lambda: sess.memory_plan).code == ErrorCode.WRONG_ORDER
    sess.apply()
    sess.forward([x, x])
    sess.close()
    sess.close()  # idempotent
    assert _code(sess.forward, [x, x]).code == ErrorCode.WRONG_ORDER
    assert _code(sess.apply).code == ErrorCode.WRONG_ORDER
    assert _code(sess.fork).code == ErrorCode.WRONG_ORDER
    assert all(not b.initialized for b in sess.backends)  # deinit'ed


def test_create_errors() -> None:
    net = manual_network()
    cases = [
        (lambda: Session.create([], net), ErrorCode.OUT_OF_RANGE),
        (lambda: Session.create(HostBackend, net), ErrorCode.WRONG_TYPE),  # type: ignore[arg-type]
        (lambda: Session.create([int], net), ErrorCode.WRONG_TYPE),  # type: ignore[list-item]
        (lambda: Session.create([Backend], net), ErrorCode.WRONG_TYPE),
        (lambda: Session.create([HostBackend], "net"), ErrorCode.WRONG_TYPE),  # type: ignore[arg-type]
        (lambda: Session.create([HostBackend], net, []), ErrorCode.OUT_OF_RANGE),
        (lambda: Session.create([HostBackend], net, ["host://"]), ErrorCode.WRONG_TYPE),  # type: ignore[list-item]
        (lambda: Session.create([HostBackend], net, HostDevice.default()), ErrorCode.WRONG_TYPE),  # type: ignore[arg-type]
        # TinyNpu alone cannot run the float Conv2d.
        (lambda: Session.create([TinyNpuBackend], net), ErrorCode.WRONG_TYPE),
        (lambda: Session.create_by_order(net, [HostBackend]), ErrorCode.WRONG_TYPE),  # type: ignore[list-item]
    ]
    for make, code in cases:
        err = _code(make)
        assert err.code == code, (err, code)
    err = _code(Session.create, [TinyNpuBackend], net)
    assert "op 1 (Conv2d 'conv')" in err.message and "TinyNpuBackend" in err.message
    closed = HostDevice()
    closed.close()
    assert _code(Session.create, [HostBackend], net, [closed]).code == ErrorCode.WRONG_ORDER
    bound = HostBackend.create(net.view([1]))
    assert _code(Session.create_by_order, net, [bound]).code == ErrorCode.WRONG_ORDER
    twice = HostBackend()
    assert _code(Session.create_by_order, net, [twice, twice]).code == ErrorCode.OUT_OF_RANGE


def test_create_with_backends_checks_the_bindings() -> None:
    net = manual_network()
    host = HostBackend.create(net.view([1, 2, 5, 6]))
    npu = TinyNpuBackend.create(net.view([3, 4]))
    # Not initialised; bound to another network; an op twice; an op missing; an op outside.
    err = _code(Session.create_with_backends, net, [host, TinyNpuBackend()])
    assert err.code == ErrorCode.WRONG_ORDER
    other = manual_network()
    err = _code(
        Session.create_with_backends, net, [host, TinyNpuBackend.create(other.view([3, 4]))]
    )
    assert err.code == ErrorCode.WRONG_TYPE
    err = _code(Session.create_with_backends, net, [host, npu, HostBackend.create(net.view([2]))])
    assert err.code == ErrorCode.OUT_OF_RANGE and "op 2" in err.message
    err = _code(Session.create_with_backends, net, [host])
    assert err.code == ErrorCode.OUT_OF_RANGE and "[3, 4]" in err.message
    err = _code(Session.create_with_backends, net.view([1, 2, 3, 4]), [host, npu])
    assert err.code == ErrorCode.OUT_OF_RANGE and "op 5" in err.message
    # TinyNpu's Cast constraint: op 4's input must come from TinyNpu, not the host.
    host2 = HostBackend.create(net.view([1, 2, 3, 5, 6]))
    with pytest.raises(XrtError):  # HardOp on the host is refused when applied...
        Session.create_with_backends(net, [host2, TinyNpuBackend.create(net.view([4]))]).apply()
    err = _code(Session.create_with_backends, net, [host2, TinyNpuBackend.create(net.view([4]))])
    assert err.code == ErrorCode.WRONG_TYPE and "op 4 (Cast 'dequantize')" in err.message
    assert _code(Session.create_with_backends, net, []).code == ErrorCode.WRONG_TYPE


def test_an_npu_program_bound_to_the_host_fails_at_apply() -> None:
    sess = Session.create([HostBackend], manual_network())  # binds: the host has HardOp
    assert sess.backend_bindings()[3].is_type(HostBackend)
    err = _code(sess.apply)
    assert err.code == ErrorCode.BACKEND_INTERNAL and "op 3 (HardOp" in err.message
    assert _code(sess.forward, [np.zeros((1, 3, 8, 8), np.float32)]).code == (ErrorCode.WRONG_ORDER)


def test_unknown_op_ids_for_views_and_steps() -> None:
    net = manual_network()
    assert _code(net.view, [1, 9]).code == ErrorCode.OUT_OF_RANGE
    sess = Session.create([TinyNpuBackend, HostBackend], net).apply()
    assert _code(sess.backends[0].view, [1]).code == ErrorCode.OUT_OF_RANGE  # not bound there
    assert _code(sess.step_to, 8, [np.zeros((1, 3, 8, 8), np.float32)]).code == (
        ErrorCode.OUT_OF_RANGE
    )
    part = Session.create([TinyNpuBackend, HostBackend], net.view([1, 2])).apply()
    err = _code(part.step_to, 3, [np.zeros((1, 3, 8, 8), np.float32)])
    assert err.code == ErrorCode.OUT_OF_RANGE and "op 3" in err.message


def test_callback_failures_name_the_op() -> None:
    net = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], net).apply()
    x = np.zeros((1, 3, 8, 8), np.float32)

    def bad(s: Session, unit: object, backend: object, tensors: list[Tensor]) -> None:
        if getattr(unit, "op_id", None) == 3:
            raise RuntimeError("inspect failed")

    sess.set_post_callback(bad)
    err = _code(sess.forward, [x])
    assert err.code == ErrorCode.BACKEND_INTERNAL
    assert "post callback" in err.message and "subgraph [3, 4]" in err.message
    assert "inspect failed" in err.message
    sess.set_post_callback(None)
    sess.set_pre_callback(lambda s, unit, backend, tensors: s.forward([x]))  # re-entrant
    err = _code(sess.forward, [x])
    assert err.code == ErrorCode.BACKEND_INTERNAL and "[11012]" in err.message
    sess.set_pre_callback(None)
    sess.forward([x])  # usable again
    assert _code(sess.set_pre_callback, 42).code == ErrorCode.WRONG_TYPE
    assert _code(sess.set_post_callback, "f").code == ErrorCode.WRONG_TYPE


def test_one_session_refuses_a_second_thread() -> None:
    net = manual_network()
    sess = Session.create([TinyNpuBackend, HostBackend], net).apply()
    x = np.zeros((1, 3, 8, 8), np.float32)
    inside, release = threading.Event(), threading.Event()

    def hold(s: Session, unit: object, backend: object, tensors: list[Tensor]) -> None:
        inside.set()
        assert release.wait(30)

    sess.set_pre_callback(hold)
    worker = threading.Thread(target=sess.forward, args=([x],))
    worker.start()
    try:
        assert inside.wait(30)
        err = _code(sess.forward, [x])
        assert err.code == ErrorCode.WRONG_ORDER and "fork()" in err.message
    finally:
        release.set()
        worker.join()


def test_option_errors(tmp_path: Path) -> None:
    sess = Session.create([HostBackend], _two_inputs())
    assert _code(sess.set_dump_outputs, True, tmp_path, "XYZ").code == ErrorCode.WRONG_TYPE
    assert _code(sess.set_dump_outputs, 1, tmp_path).code == ErrorCode.WRONG_TYPE
    assert _code(sess.set_dump_outputs, True, 42).code == ErrorCode.WRONG_TYPE
    afile = tmp_path / "file"
    afile.write_text("x")
    err = _code(sess.set_dump_outputs, True, afile / "sub")
    assert err.code == ErrorCode.FILE_NOT_FOUND and "sub" in err.message
    sess.set_dump_outputs(False, afile / "sub")  # turning dumps off needs no folder
    assert _code(sess.set_log_io, "yes").code == ErrorCode.WRONG_TYPE
    assert _code(sess.enable_time_profile, None).code == ErrorCode.WRONG_TYPE


def test_kernel_failure_is_a_backend_error() -> None:
    """An exception from a forward function becomes 11013 naming the op and the backend."""
    b = NetworkBuilder("overflow")
    x = b.input("x", TensorType("FP32", [1, 1, 1, 1]))
    (q,) = b.add("Cast", [x], {"to": "SInt32"})
    (y,) = b.add("Relu", [q])
    net = b.build([y])

    class Faulty(HostBackend):
        pass

    def broken(op, ins, outs, backend):  # type: ignore[no-untyped-def]
        raise IndexError("table index out of range")

    Faulty.add_op("Relu", broken)
    sess = Session.create([Faulty], net).apply()
    err = _code(sess.forward, [np.ones((1, 1, 1, 1), np.float32)])
    assert err.code == ErrorCode.BACKEND_INTERNAL and "op 2 (Relu)" in err.message
    assert "Faulty" in err.message
