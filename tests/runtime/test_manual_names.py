"""The Icraft XRT manual's names: every one is in the table, and every row of the table works.

The table is `xrt.manual` (docs/api-mapping.md is generated from it). Three checks:

1. every row resolves: the manual's name on its class or module is what our name gives
   (the very function, classmethod or property), a property adapter returns the property,
   a module face exports the object;
2. a scan of the manual's code blocks (C++ and Python) finds no name the table lacks,
   apart from `NOT_API` (names the manual uses that are not the runtime's, each with its
   reason); the manual sits beside the repository (``../shared/seeds/...``) or at
   ``$XRT_MANUAL_PATH``;
3. the names the issue lists (`ISSUE_NAMES`) are in the table and work, even where the
   manual's file is absent.

Then the manual's own C++ examples of chapters 1.5, 2.1 and 2.6, in Python with the
manual's names.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xrt
from xrt import (
    Device,
    ErrorCode,
    HostDevice,
    MemPtr,
    Network,
    NetworkBuilder,
    Session,
    Tensor,
    TensorType,
    XrtError,
)
from xrt.backend import HostBackend
from xrt.manual import NAMES, Kind, ManualName, install_aliases, module_face, resolve
from xrt.network import Framework

REPO = Path(__file__).resolve().parents[2]
MANUAL = REPO.parent / "shared" / "seeds" / "000_15ee72ecd555691c.txt"
MODULES = ("xrt", "xir", "host_backend", "buyi_backend", "zg330_backend")

NOT_API = {
    "REQUIRE": "Catch2's assertion in the C++ examples; Python asserts",
    "ICRAFT_LOG": "Icraft's logging macro; the runtime logs through `logging` (xrt.session)",
    "append": "ICRAFT_LOG's message builder",
    "img2Tensor": "the examples' own image loader",
    "preFunc": "the example's own callback",
    "postFunc": "the example's own callback",
    "setFakeQF": "the sample backend's own option (a backend's options are its attributes)",
    "tik": "the example's timer (utils::Timer); Python has time.perf_counter",
    "tok": "the example's timer",
    "elapsed": "the example's timer",
    "emplace_back": "std::vector's",
    "is": "the memory-type check `mtype.is<ExternalMem>()` (see the `mtype` row)",
    "assertTrue": "unittest's assertion in the Python examples",
    "unittest": "the Python examples' test framework",
}
NOT_API_NAMESPACES = {
    "std": "the C++ standard library",
    "fmt": "the fmt formatting library",
    "spdlog": "the spdlog logging library",
    "utils": "Icraft's utilities (utils::Timer)",
}

ISSUE_NAMES = [
    ("xrt.Session", "Create"),
    ("xrt.Session", "CreateByOrder"),
    ("xrt.Session", "CreateWithBackends"),
    ("xrt.Session", "CreateWithSnapshot"),
    ("xrt.Session", "apply"),
    ("xrt.Session", "forward"),
    ("xrt.Session", "stepTo"),
    ("xrt.Session", "backendBindings"),
    ("xrt.Session", "dumpSnapshot"),
    ("xrt.Session", "enableTimeProfile"),
    ("xrt.Session", "timeProfileResults"),
    ("xrt.Session", "setLogTime"),
    ("xrt.Session", "setLogIO"),
    ("xrt.Session", "setDumpOutputs"),
    ("xrt.Session", "setPreCallBack"),
    ("xrt.Session", "setPostCallBack"),
    ("xrt.HostDevice", "Default"),
    ("xrt.HostDevice", "MemRegion"),
    ("xrt.Device", "Open"),
    ("xrt.Backend", "Create"),
    ("xrt.Backend", "Init"),
    ("xrt.MemPtr", "NullPtr"),
    ("xrt.MemPtr", "Init"),
    ("xrt.MemPtr", "isNull"),
    ("xrt.MemPtr", "ptype"),
    ("xrt.MemPtr", "cptr"),
    ("xrt.MemPtr", "addr"),
    ("xrt.MemRegion", "memManager"),
    ("xrt.MemManager", "getMemChunk"),
    ("xrt.MemManager", "getAllMemChunk"),
    ("xrt.MemChunk", "isOn"),
    ("xrt.Tensor", "isOn"),
    ("xrt.Device", "defaultMemRegion"),
    ("xrt.Device", "getMemRegion"),
    ("xrt.Tensor", "mallocOn"),
    ("xrt.Tensor", "isReady"),
    ("xrt.Tensor", "waitForReady"),
    ("xrt.Tensor", "hasData"),
    ("xrt.Tensor", "setData"),
    ("xrt.TensorType", "storageBytes"),
    ("xrt.Tensor", "memRegion"),
    ("xrt.Tensor", "to"),
    ("xrt.Tensor", "dump"),
    ("xrt.Tensor", "data"),
    ("xrt.Network", "CreateFromJsonFile"),
    ("xrt.Network", "loadParamsFromFile"),
    ("xrt.Network", "inputOp"),
    ("xir", "FloatType"),
    ("xir", "IntegerType"),
    ("xrt", "PtrType"),
    ("xir", "Framework"),
]
"""The names issue 39 lists (owner, manual name): checked even without the manual's file."""


# -- samples: one object of each class the table names -----------------------------------


@pytest.fixture(scope="module")
def samples() -> Iterator[dict[str, Any]]:
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    host = HostDevice()
    board = Device.open("mem://")
    region = host.default_mem_region()
    chunk = region.malloc(64)
    b = NetworkBuilder("tiny")
    x = b.input("x", TensorType("FP32", [1, 4]))
    (y,) = b.add("Relu", [x])
    net = b.build([y])
    view = net.view(net.ops[0].op_id)
    sess = Session.create([HostBackend], net, [host])
    yield {
        "xrt.MemPtr": MemPtr(bytearray(8), 0x1000),
        "xrt.MemRegion": region,
        "xrt.MemManager": region.mem_manager,
        "xrt.MemChunk": chunk,
        "xrt.RegRegion": board.get_reg_region("npu"),
        "xrt.Device": host,
        "xrt.HostDevice": host,
        "xrt.Tensor": Tensor(TensorType("FP32", [2, 4]), chunk),
        "xrt.TensorType": TensorType("SInt8", [3, 5]),
        "xrt.Network": net,
        "xrt.NetworkView": view,
        "xrt.Operator": net.ops[0],
        "xrt.Backend": HostBackend.create(view, host),
        "xrt.Session": sess,
    }
    sess.close()
    chunk.free()
    board.close()
    host.close()


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _same(a: object, b: object) -> bool:
    """The same object, or the same bound method (bound methods are made at each access)."""
    return a is b or (inspect.ismethod(a) and a == b)


def _row_id(row: ManualName) -> str:
    return f"{row.owner}.{row.manual or row.ours or 'form'}:{row.kind.value}"


@pytest.mark.parametrize("row", NAMES, ids=[_row_id(r) for r in NAMES])
def test_every_row_resolves(row: ManualName, samples: dict[str, Any]) -> None:
    if row.kind in (Kind.CLASS, Kind.MODULE):
        module = importlib.import_module(row.owner)
        assert getattr(module, row.manual) is resolve(row.ours)
        assert row.manual in module.__all__  # `from xir import *` gives it
        return
    owner = resolve(row.owner)
    sample = samples.get(row.owner)
    if row.kind in (Kind.FORM, Kind.ADDED, Kind.DIFFERS):
        if "." in row.ours:
            resolve(row.ours)
        elif row.ours:
            assert hasattr(sample if sample is not None else owner, row.ours)
        return
    if row.kind is Kind.ACCESSOR:
        assert sample is not None, f"a sample {row.owner} is needed to call {row.manual}()"
        value = getattr(sample, row.ours)
        assert row.manual == row.ours and not inspect.ismethod(value)  # ours: an attribute
        called = getattr(sample, row.manual)()
        assert called is value or (called == value and type(called) is int)
        return
    if row.kind is Kind.PROPERTY:
        assert sample is not None, f"a sample {row.owner} is needed to call {row.manual}()"
        assert _same(getattr(sample, row.manual)(), getattr(sample, row.ours)) or (
            getattr(sample, row.manual)() == getattr(sample, row.ours)
        )
        assert not inspect.ismethod(getattr(sample, row.ours))  # ours is the property
        return
    if row.kind is Kind.STATIC and "." in row.ours:
        assert getattr(owner, row.manual) is resolve(row.ours)
        return
    # SAME and STATIC: the manual's name gives what ours gives, on the class, its
    # subclasses (overrides included) and an object.
    if row.kind is Kind.STATIC:
        assert isinstance(inspect.getattr_static(owner, row.ours), classmethod | staticmethod)
    if sample is not None:
        assert _same(getattr(sample, row.manual), getattr(sample, row.ours)) or (
            getattr(sample, row.manual) == getattr(sample, row.ours)
        )
    if row.manual == row.ours:
        assert sample is not None or hasattr(owner, row.ours)
        return
    for cls in [owner, *_subclasses(owner)]:
        assert _same(getattr(cls, row.manual), getattr(cls, row.ours)), cls


def test_rows_are_unique_and_sections_are_named() -> None:
    keys = [(r.owner, r.manual, r.kind) for r in NAMES if r.kind not in (Kind.FORM, Kind.ADDED)]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1]


# -- the manual's text: no name missing -----------------------------------------------------


def manual_path() -> Path | None:
    path = Path(os.environ.get("XRT_MANUAL_PATH") or MANUAL)
    return path if path.is_file() else None


def manual_names(text: str) -> set[str]:
    """The identifiers the manual's code blocks use as API: ``X::Y`` chains, ``.y(``,
    ``->y``, calls ``Y(`` of camelCase/PascalCase names, ``X.y`` on PascalCase names, and
    the Python examples' imports."""
    found: set[str] = set()
    for lang, code in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        code = re.sub(r'"[^"\n]*"', '""', code)
        comment = r"#[^\n]*" if lang == "python" else r"//[^\n]*|/\*.*?\*/"
        code = re.sub(comment, "", code, flags=re.S)
        template = r"\s*(?:<[^<>()]*>)?\s*\("
        for chain in re.findall(r"\b[A-Za-z_]\w*(?:::[A-Za-z_]\w*)+", code):
            parts = chain.split("::")
            if parts[0] not in NOT_API_NAMESPACES:
                found.update(parts)
        found.update(re.findall(r"\.\s*([A-Za-z_]\w*)" + template, code))
        found.update(re.findall(r"->\s*([A-Za-z_]\w*)\b(?!\s*::)", code))  # not `-> std::`
        calls = re.findall(r"(?<![\w.:>])([A-Za-z_]\w*)" + template, code)
        found.update(c for c in calls if any(ch.isupper() for ch in c))
        found.update(re.findall(r"(?<![\w.:])([A-Z]\w*)\s*\.(?=\s*[A-Za-z_])", code))
        found.update(re.findall(r"^\s*(?:from|import)\s+(\w+)", code, re.M))
    return found


def test_the_manual_uses_no_name_the_table_lacks() -> None:
    path = manual_path()
    if path is None:
        pytest.skip(f"the manual is not at {MANUAL} (set XRT_MANUAL_PATH to check it)")
    used = manual_names(path.read_text(encoding="utf-8"))
    known = {r.manual for r in NAMES if r.manual} | set(MODULES)
    missing = sorted(used - known - set(NOT_API))
    assert not missing, f"names of the manual missing from the table (xrt.manual): {missing}"
    stale = sorted(set(NOT_API) - used)
    assert not stale, f"NOT_API names the manual does not use: {stale}"


def test_the_scan_finds_the_manual_names_it_should() -> None:
    """The scanner itself: a name of each shape is found, the non-API ones are not."""
    text = (
        "```cpp\nauto s = Session::Create<BuyiBackend>(net, {d}); s.stepTo(op.opId(), {});\n"
        'c->begin; std::vector<Tensor> v; fmt::print("a.b()"); // x.hidden()\n'
        'auto t = Tensor(TensorType(FloatType::FP32(), {1}, Layout("NHWC")));\n```\n'
        "```python\nimport xir\nfrom xrt import *\nsess = Session.Create([A], v)  # y.no()\n```\n"
    )
    found = manual_names(text)
    want = {"Session", "Create", "stepTo", "opId", "begin", "Tensor", "TensorType"}
    want |= {"FloatType", "FP32", "Layout", "xir", "xrt"}
    assert want <= found
    assert not {"vector", "print", "hidden", "no", "b", "std", "fmt"} & found


@pytest.mark.parametrize("owner, name", ISSUE_NAMES, ids=[f"{o}.{n}" for o, n in ISSUE_NAMES])
def test_the_issue_names_are_in_the_table_and_work(owner: str, name: str) -> None:
    rows = [r for r in NAMES if r.owner == owner and r.manual == name]
    assert rows, f"{owner}.{name} is not in the table"
    if all(r.kind is Kind.DIFFERS for r in rows):
        assert all(r.differs for r in rows)  # says why, and what to write instead
        return
    target = importlib.import_module(owner) if owner in MODULES else resolve(owner)
    assert hasattr(target, name)


# -- the manual's modules and `from xrt import *` ------------------------------------------


def test_star_imports_give_what_the_manual_examples_use() -> None:
    names: dict[str, Any] = {}
    exec("from xrt import *", names)
    for n in ("Session", "Device", "HostDevice", "Backend", "Tensor", "MemPtr", "PtrType"):
        assert n in names, n
    assert names["PtrType"] is xrt.PtrKind
    exec(
        "from host_backend import *; from buyi_backend import *; from zg330_backend import *", names
    )
    from xrt.backend import BuyiBackend, ZG330Backend

    assert names["HostBackend"] is HostBackend
    assert (names["BuyiBackend"], names["ZG330Backend"]) == (BuyiBackend, ZG330Backend)
    exec("import xir", names)
    assert names["xir"].Network is Network and names["xir"].FloatType is xrt.DataType


def test_module_faces_import_from_any_directory(tmp_path: Path) -> None:
    """The faces are installed packages, not files found from the repository's folder."""
    import subprocess

    code = "import xir, host_backend, buyi_backend, zg330_backend; print(xir.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().endswith(os.path.join("xir", "__init__.py"))


def test_a_module_face_refuses_a_module_the_manual_does_not_have() -> None:
    with pytest.raises(XrtError) as err:
        module_face("numpy", NAMES, {})
    assert err.value.code == ErrorCode.WRONG_TYPE and "numpy" in err.value.message


# -- the installer ---------------------------------------------------------------------------


@pytest.fixture
def fixture_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("manual_fixture")

    class Thing:
        def do_it(self) -> str:
            return "done"

        def doIt(self) -> str:  # noqa: N802 - real code the table must not shadow
            return "other"

        @property
        def size(self) -> int:
            return 3

    class Twin(Thing):
        def do_it(self) -> str:
            return "twin"

    module.Thing = Thing  # type: ignore[attr-defined]
    module.Twin = Twin  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "manual_fixture", module)
    return module


def test_an_alias_never_shadows_real_code(fixture_module: types.ModuleType) -> None:
    row = ManualName("manual_fixture.Thing", "doIt", "do_it", Kind.SAME)
    with pytest.raises(XrtError) as err:
        install_aliases([row], {})
    assert "Thing.doIt exists already" in err.value.message


def test_an_alias_of_a_missing_name_is_refused(fixture_module: types.ModuleType) -> None:
    row = ManualName("manual_fixture.Thing", "goNow", "go_now", Kind.SAME)
    with pytest.raises(XrtError) as err:
        install_aliases([row], {})
    assert "go_now" in err.value.message


def test_an_alias_follows_overrides_and_installs_once(fixture_module: types.ModuleType) -> None:
    rows = [
        ManualName("manual_fixture.Thing", "runIt", "do_it", Kind.SAME),
        ManualName("manual_fixture.Thing", "byteSize", "size", Kind.PROPERTY),
    ]
    install_aliases(rows, {})
    install_aliases(rows, {})  # idempotent
    thing, twin = fixture_module.Thing(), fixture_module.Twin()
    assert (thing.runIt(), twin.runIt()) == ("done", "twin")
    assert fixture_module.Twin.runIt is fixture_module.Twin.do_it
    assert twin.byteSize() == 3


def test_host_device_close_alias_is_its_own_close() -> None:
    """``Device.Close`` on the process-wide host device is HostDevice's close, which keeps
    it open: an alias bound to the base class's ``close`` would close it."""
    dev = HostDevice.default()
    HostDevice.Close(dev)
    dev.Close()
    assert not dev.closed
    other = HostDevice()
    Device.Close(other)
    assert other.closed


def test_backend_create_takes_the_class_first(samples: dict[str, Any]) -> None:
    """``Backend.Create(HostBackend, view, device)``, as the manual's Python writes it; the
    class-less ``HostBackend.Create(view)`` is refused saying so (``HostBackend.create(view)``
    is ours); ``HostBackend.Init()`` is an unbound backend."""
    from xrt import Backend

    view = samples["xrt.NetworkView"]
    bound = Backend.Create(HostBackend, view, HostDevice.Default())
    assert bound.is_type(HostBackend) and bound.network_view is view
    with pytest.raises(XrtError) as err:
        HostBackend.Create(view)
    assert err.value.code == ErrorCode.WRONG_TYPE and "class first" in err.value.message
    fresh = HostBackend.Init()
    assert fresh.is_type(HostBackend) and not fresh.initialized
    with pytest.raises(XrtError) as err:
        HostBackend.create(None, HostDevice.Default())
    assert "without a network view" in err.value.message


# -- the manual's examples, in the manual's names ------------------------------------------


def test_manual_2_1_memptr_in_the_manuals_names() -> None:
    assert MemPtr.Init().isNull() and MemPtr.NullPtr().isNull()
    tmp = bytearray(8)
    c_ptr1 = MemPtr(tmp)
    assert c_ptr1.ptype() == xrt.PtrType.CPTR and not c_ptr1.isNull()
    assert c_ptr1.cptr().obj is tmp  # REQUIRE(c_ptr1.cptr() == tmp)
    addr_ptr1 = MemPtr(0x40000000)
    assert addr_ptr1.ptype() == xrt.PtrType.ADDR and addr_ptr1.addr() == 0x40000000
    assert addr_ptr1.addr == 0x40000000 and repr(addr_ptr1.addr) == "1073741824"
    both_ptr1 = MemPtr(tmp, 0x40000000)
    assert both_ptr1.ptype() == xrt.PtrType.BOTH
    assert both_ptr1.cptr().obj is tmp and both_ptr1.addr() == 0x40000000
    both_ptr2 = 40 + both_ptr1
    assert both_ptr2 - both_ptr1 == 40 and both_ptr2 - 40 == both_ptr1


def test_manual_2_6_tensor_in_the_manuals_names() -> None:
    import xir

    host_mregion = HostDevice.MemRegion()
    ttype1 = TensorType(xir.FloatType.FP32(), [1, 4, 4, 3], xir.Layout("NHWC"))
    chunk1 = host_mregion.malloc(ttype1.bytes())
    tensor1 = Tensor(ttype1, chunk1)
    data1 = tensor1.data()
    assert data1 == chunk1.begin
    assert tensor1.isReady() and tensor1.isOn(host_mregion)
    assert tensor1.memRegion() is host_mregion
    assert tensor1.chunk() is tensor1.chunk is chunk1 and tensor1.offset() == 0
    assert host_mregion.device() is host_mregion.device
    assert tensor1.to(host_mregion) is tensor1
    ttype2 = TensorType(xir.IntegerType.SInt8(), [8], xir.Layout("*"))
    tensor5 = Tensor(ttype2)
    assert not tensor5.hasData()
    tensor5.setData(host_mregion.malloc(8))
    assert tensor5.hasData() and tensor5.tensorType() is ttype2
    checked = False
    tensor6 = Tensor(TensorType("FP16", [1, 2, 3, 4]), lambda device: checked)
    tensor6.mallocOn(HostDevice.MemRegion())
    assert not tensor6.waitForReady(0.01, 0.001)
    checked = True
    assert tensor6.waitForReady(1.0) and tensor6.isReady()


def test_manual_1_5_memory_info_in_the_manuals_names() -> None:
    import xrt.testing.memory_transport  # noqa: F401 - registers mem://

    buyi_device = Device.Open("mem://ql100aiu?npu=0x40000000&dma=0x80000000")
    try:
        plddr_region = buyi_device.getMemRegion("plddr")
        chunk1 = plddr_region.malloc(1024)
        chunk2 = plddr_region.malloc(MemPtr(8192), 1024)
        pl_chunks = plddr_region.memManager().getAllMemChunk()
        assert chunk1 in pl_chunks and chunk2 in pl_chunks
        assert plddr_region.memManager().getMemChunk(MemPtr(4096), 1024) is None
        assert plddr_region.memManager().getMemChunk(MemPtr(8192), 1024) is chunk2
        assert buyi_device.defaultMemRegion() is plddr_region
    finally:
        Device.Close(buyi_device)


def test_data_types_called_as_the_manual_calls_them() -> None:
    import xir

    assert xir.FloatType.FP32() is xrt.DataType.FP32 and xir.FloatType.FP16() is xrt.DataType.FP16
    assert xir.IntegerType.SInt8() is xrt.DataType.SINT8
    assert TensorType(xir.IntegerType.SInt8(), [2]).bytes() == 2
    assert TensorType("SInt8", [2]).storageBytes() == 2


# -- the manual's example network ------------------------------------------------------------

MANUAL_OP_TYPES = ["Conv2d", "Cast", "HardOp", "Cast", "Relu", "MaxPool2d"]


def test_generate_network_is_the_manuals_network() -> None:
    import xir

    network = xir.GenerateNetwork()
    ops = [op for op in network.ops if op.op_type not in ("Input", "Output")]
    assert [op.op_type for op in ops] == MANUAL_OP_TYPES
    if network.ops[0].op_type == "Input":  # networks carry Input (0) and Output (last)
        assert [op.op_id for op in ops] == [1, 2, 3, 4, 5, 6]
        assert [network.ops[0].op_id, network.ops[-1].op_id] == [0, 7]
    else:  # the builder's own numbering, from 0, until they do
        assert [op.op_id for op in ops] == [0, 1, 2, 3, 4, 5]
    hard = ops[2]
    assert hard.attrs["target"] == "buyi"
    assert network.framework is Framework.PYTORCH and network.framework_version == "v1.9"
    assert network.input_types() == [TensorType("FP32", [1, 3, 12, 12])]
    assert network.output_types() == [TensorType("FP32", [1, 16, 6, 6])]
    again = xir.generate_network("whatever", xir.Framework.CAFFE, "v1.0", target="zg330")
    assert again.name == "whatever" and again.framework is Framework.CAFFE
    assert [op.attrs["target"] for op in again.ops if op.op_type == "HardOp"] == ["zg330"]
    for name, array in network.params.items():  # deterministic weights
        if name in again.params and not name.endswith("_program"):
            np.testing.assert_array_equal(array, again.params[name])


@pytest.mark.parametrize(
    "args, kwargs, bad",
    [
        ((3,), {}, "3"),
        (("n", "PYTORCH"), {}, "'PYTORCH'"),
        (("n", Framework.ONNX, 1.9), {}, "1.9"),
        ((), {"target": "gpu"}, "'gpu'"),
    ],
)
def test_generate_network_names_a_bad_argument(args: tuple, kwargs: dict, bad: str) -> None:
    import xir

    with pytest.raises(XrtError) as err:
        xir.generate_network(*args, **kwargs)
    assert err.value.code == ErrorCode.WRONG_TYPE and bad in err.value.message


def test_onnx_import_records_its_framework() -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    net = Network.from_onnx(model.SerializeToString())
    assert net.framework is Framework.ONNX and net.framework_version == "opset 13"
