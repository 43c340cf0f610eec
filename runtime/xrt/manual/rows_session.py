"""The manual's names for networks, backends and sessions (chapters 1, 2.7, 2.8) and its
modules beside ours: rows of the table (`xrt.manual.table`)."""

from __future__ import annotations

from xrt.manual.table import Kind, ManualName, Section

N = ManualName
K = Kind

__all__ = ["BACKENDS", "MODULES", "NETWORKS", "SESSIONS"]

_NET = "xrt.Network"
_OP = "xrt.Operator"
_EXAMPLE = "xrt.manual.example.generate_network"

# fmt: off
NETWORKS = Section(
    "networks",
    (
        N("xir", "Network", "xrt.network.Network", K.MODULE,
          "operators with stable ids, values, parameters (docs/network-format.md)"),
        N(_NET, "CreateFromJsonFile", "load", K.STATIC,
          "validates everything: 11011 naming what is wrong, 11002 for a missing file",
          doc_manual="`Network::CreateFromJsonFile(json)`",
          doc_ours="`Network.load(json_path, raw_path=None)`"),
        N(_NET, "loadParamsFromFile", "load", K.DIFFERS, "",
          differs="`Network.load` reads the JSON and its raw parameter file in one call "
          "(the raw file defaults to the one the JSON names)",
          doc_manual="`network.loadParamsFromFile(raw)`",
          doc_ours="`Network.load(json_path, raw_path)`"),
        N(_NET, "view", "view", K.SAME,
          "by op ids (a list), from an id on, or a half-open range",
          doc_manual="`network.view(ids)`", doc_ours="`network.view(ids, end=None)`"),
        N("xir", "NetworkView", "xrt.network.NetworkView", K.MODULE,
          "some operators of a network, with their own inputs and outputs"),
        N("xrt.NetworkView", "ops", "ops", K.SAME, "in network order",
          doc_manual="`network_view->ops`", doc_ours="`view.ops`"),
        N(_NET, "inputOp", "input_op", K.SAME, "the Input operator (op 0)",
          doc_manual="`network.inputOp()`", doc_ours="`network.input_op()`"),
        N(_NET, "outputOp", "output_op", K.SAME, "the Output operator (the last op)",
          doc_manual="`network.outputOp()`", doc_ours="`network.output_op()`"),
        N(_OP, "[i]", "outputs", K.DIFFERS, "",
          differs="an operator is not indexed for its output values: values are named, "
          "`op.outputs[i]` is a name and `network.values[name]` its type, so the manual's "
          "`network.inputOp()[0].dtype()` is `network.input_types()[0]`",
          doc_manual="`op[i]`, `network.inputOp()[0].dtype()`",
          doc_ours="`network.values[op.outputs[i]]`, `network.input_types()[0]`"),
        N(_NET, "outputs", "outputs", K.DIFFERS, "",
          differs="`network.outputs` is a tuple of value names (an attribute); their types "
          "are `network.output_types()`",
          doc_manual="`network.outputs()`",
          doc_ours="`network.outputs`, `network.output_types()`"),
        N("xir", "Operator", "xrt.network.Operator", K.MODULE,
          "a frozen record: `op_id`, `op_type`, `inputs`, `outputs`, `attrs`, `params`, "
          "`name`"),
        N("xir", "Operation", "xrt.network.Operator", K.CLASS,
          "the manual's callback signatures name it `Operation`"),
        N(_OP, "opId", "op_id", K.PROPERTY, "", doc_manual="`op.opId()`", doc_ours="`op.op_id`"),
        N(_OP, "op_id", "op_id", K.SAME, "", doc_manual="`op->op_id`", doc_ours="`op.op_id`"),
        N(_OP, "outputsNum", "", K.DIFFERS, "", differs="a tuple's length",
          doc_manual="`op.outputsNum()`", doc_ours="`len(op.outputs)`"),
        N(_OP, "getInput", "inputs", K.DIFFERS, "",
          differs="values are named: `op.inputs[i]` is a value name, "
          "`network.values[name]` its type",
          doc_manual="`op.getInput(i)`, `op[i]`", doc_ours="`op.inputs[i]`, `op.outputs[i]`"),
        N(_OP, "v_id", "outputs", K.DIFFERS, "", differs="values have names, not ids",
          doc_manual="`value->v_id`", doc_ours="the value's name (`op.outputs[i]`)"),
        N("xir", "Framework", "xrt.network.Framework", K.MODULE,
          "`PYTORCH`, `CAFFE`, `TENSORFLOW`, `DARKNET`, `ONNX`: a label on the network "
          "(`network.framework`); ONNX import is the one front end and records `ONNX`"),
        N("xrt.network.Framework", "PYTORCH", "PYTORCH", K.SAME, "a label only",
          doc_manual="`Framework::PYTORCH`", doc_ours="`Framework.PYTORCH`"),
        N("xir", "generate_network", _EXAMPLE, K.MODULE,
          "the manual's example network: Input -> Conv2d -> Cast -> HardOp -> Cast -> ReLU "
          "-> MaxPool2d -> Output, deterministic weights, the HardOp compiled for `target`",
          doc_manual='`generate_network("whatever", Framework::PYTORCH, "v1.9")`',
          doc_ours='`xir.generate_network(name="network", framework=Framework.PYTORCH, '
          'version="v1.9", *, target="buyi")`'),
        N("xir", "GenerateNetwork", _EXAMPLE, K.MODULE, "the same function, defaults only",
          doc_manual="`GenerateNetwork()`", doc_ours="`xir.generate_network()`"),
        N("xrt", "GenerateNetwork", _EXAMPLE, K.MODULE,
          "also bound by `from xrt import *`: the manual's Python examples call "
          "`GenerateNetwork()` after their star imports, with no `xir.` before it",
          doc_manual="`GenerateNetwork()` (1.1.1, 1.1.2)", doc_ours="`xrt.GenerateNetwork()`"),
    ),
)

_B = "xrt.Backend"

BACKENDS = Section(
    "backends",
    (
        N("xrt", "Backend", "xrt.backend.Backend", K.MODULE,
          "`is_host` class attribute; NPU backends set False",
          doc_manual="`Backend`", doc_ours="`xrt.backend.Backend`"),
        N("host_backend", "HostBackend", "xrt.backend.HostBackend", K.MODULE,
          "every op type of `xrt.ops`; `HardOp` binds but fails at `apply` (11013)",
          doc_manual="`HostBackend`", doc_ours="`xrt.backend.HostBackend`"),
        N(_B, "Init", "create", K.STATIC, "an unbound backend",
          doc_manual="`HostBackend::Init()` / `BuyiBackend::Init()`",
          doc_ours="`HostBackend()` / `BuyiBackend()` (= `T.create()`)"),
        N("buyi_backend", "BuyiBackend", "xrt.backend.BuyiBackend", K.MODULE,
          "quantized operators compiled at `apply` into NPU programs, launched at `forward` "
          "through the device's regions (docs/session.md \"BuyiBackend and ZG330Backend\"); "
          "name `buyi` for `xrt run --backends`",
          doc_manual="`BuyiBackend`", doc_ours="`xrt.backend.BuyiBackend`"),
        N("zg330_backend", "ZG330Backend", "xrt.backend.ZG330Backend", K.MODULE,
          "as Buyi, with the on-chip memory; name `zg330` for `xrt run --backends`",
          doc_manual="`ZG330Backend`", doc_ours="`xrt.backend.ZG330Backend`"),
        N("xrt.backend.ZG330Backend", "", "ocm_optimize", K.ADDED,
          "on (ZG330's default): the memory planner packs intermediates by lifetime into the "
          "OCM first and the loader puts code and buffers there while it has room; off: "
          "everything in `plddr`, as on Buyi (set before `apply`); "
          "`backend.placement(op_ids)` shows it; a snapshot keeps it (manual 1.1.3); "
          "Buyi has no OCM: turning it on there is 11010",
          doc_manual='ZG330 "ocm optimisation" (intermediates on chip)',
          doc_ours="`backend.ocm_optimize = True / False`"),
        N("xrt.backend.BuyiBackend", "", "mmu_mode", K.ADDED,
          "always True on this NPU: it has no MMU, and its programs address memory as a base "
          "register plus a 32-bit offset, set per launch (what MMU mode gives); turning it "
          "off (absolute addresses, which 32 bits cannot hold: `plddr` starts at "
          "0x100000000) is 11010; a snapshot records it (manual 1.1.3)",
          doc_manual="the MMU mode (manual 1.1.3)",
          doc_ours="`backend.mmu_mode` (True)"),
        N("xrt.backend.npu", "", "to_hardop", K.FORM,
          "the manual's BY-stage networks; the program is the op's `program` parameter",
          doc_manual="`HardOp` (a compiled NPU program in the network)",
          doc_ours="`xrt.backend.npu.to_hardop(network, op_ids, target)`"),
        N(_B, "Create", "xrt.backend.create_backend", K.STATIC, "`init` on a new object",
          differs="Python passes the class first, as the manual's Python does: "
          "`Backend.Create(HostBackend, view, device)`; `T.create(view, device)` is ours",
          doc_manual="`Backend::Create<T>(view, device)` / `Backend.Create(T, view, device)`",
          doc_ours="`T.create(view, device=None)`, `create_backend(T, view, device)`"),
        N(_B, "init", "init", K.SAME, "a `Network` means all its ops; None: the backend's "
          "default device", doc_manual="`init(network_view, device)`",
          doc_ours="`backend.init(view, device=None)`"),
        N(_B, "deinit", "deinit", K.SAME, "idempotent",
          doc_manual="`deinit()`", doc_ours="`backend.deinit()`"),
        N(_B, "apply", "apply", K.SAME,
          "runs the per-op init functions; states in `backend.op_state(op_id)`",
          doc_manual="`apply()`", doc_ours="`backend.apply()`"),
        N(_B, "fork", "fork", K.SAME, "shares the prepared (read-only) states",
          doc_manual="`fork()`", doc_ours="`backend.fork()`"),
        N(_B, "view", "view", K.SAME, "by op id (half-open range) or list; a fork",
          doc_manual="`view(start_index, end_index)`",
          doc_ours="`backend.view(start, end)` / `backend.view([ids])`"),
        N(_B, "autoMerge", "auto_merge", K.DIFFERS, "grouping into `Subgraph`s",
          differs="a flag plus a hook (*decided*, see docs/session.md)",
          doc_manual="`autoMerge()`", doc_ours="`backend.auto_merge` (bool), "
          "`backend.partition(ops)`"),
        N(_B, "time_profile", "time_profile", K.SAME, "set by the session while profiling",
          doc_manual="`backend->time_profile`", doc_ours="`backend.time_profile`"),
        N(_B, "setTimeElapses", "add_time", K.DIFFERS,
          "the session files the times per unit",
          differs="the backend reports seconds of memory and hardware time; the session "
          "knows the op", doc_manual="`setTimeElapses(op_id, ...)`",
          doc_ours="`backend.add_time(memory=, hardware=)`"),
        N(_B, "isOpSupported", "is_op_supported", K.SAME, "",
          doc_manual="`isOpSupported`",
          doc_ours="`backend.is_op_supported(op, ctx=None)`, `T.supports(op_type)`"),
        N(_B, "is_type", "is_type", K.SAME, "",
          doc_manual="`is_type<T>()`", doc_ours="`backend.is_type(T)`"),
        N(_B, "cast", "", K.DIFFERS, "", differs="Python objects need no cast",
          doc_manual="`cast<T>()`", doc_ours="the object itself"),
        N(_B, "ICRAFT_ADD_OP_TO_BACKEND", "add_op", K.DIFFERS,
          "per-class registries; subclasses extend without changing parents",
          differs="a C++ macro; in Python a decorator or a call",
          doc_manual="`ICRAFT_ADD_OP_TO_BACKEND(Op, T).set_init(f).set_forward(g)"
          ".set_constraint(h)`",
          doc_ours='`@T.op("Op", init=f, constraint=h)` on `g`, or '
          '`T.add_op("Op", g, init=f, constraint=h)`'),
        N(_B, "set_init", "add_op", K.DIFFERS, "", differs="the `init=` keyword",
          doc_manual="`.set_init(f)`", doc_ours="`init=f`"),
        N(_B, "set_forward", "add_op", K.DIFFERS, "",
          differs="the decorated function, or `add_op`'s second argument",
          doc_manual="`.set_forward(g)`", doc_ours="`g`"),
        N(_B, "set_constraint", "add_op", K.DIFFERS, "", differs="the `constraint=` keyword",
          doc_manual="`.set_constraint(h)`", doc_ours="`constraint=h`"),
        N(_B, "", "", K.FORM, "fills `outputs` or returns arrays (the 3.x four-argument form)",
          doc_manual="forward `(op, inputs, backend) -> outputs`",
          doc_ours="`forward(op, inputs, outputs, backend)`"),
        N(_B, "mtype", "", K.DIFFERS,
          "`ctx` (`BindContext`) says which backend produces each input",
          differs="our stand-in for the manual's memory types (`mtype`, `ExternalMem`)",
          doc_manual="constraint `(op, backend) -> bool`",
          doc_ours="`constraint(op, backend, ctx) -> bool`"),
        N(_B, "", "forward_subgraph", K.ADDED,
          "one call per merged run: the hook NPU backends override",
          doc_ours="`backend.forward_subgraph(subgraph, inputs, outputs)`"),
    ),
)

_S = "xrt.Session"

SESSIONS = Section(
    "sessions",
    (
        N("xrt", "Session", "xrt.session.Session", K.MODULE,
          "a network bound to backends, ready to run", doc_ours="`xrt.Session`"),
        N(_S, "Create", "create", K.STATIC,
          "devices pair with backends by position, else by the one pairing in which each "
          "backend accepts its device (the manual's Python gives `[HostDevice.Default(), "
          "Device()]` for `[BuyiBackend, HostBackend]`); None: default",
          doc_manual="`Session::Create<A, B>(network, {dev_a, dev_b})` / "
          "`Session.Create([A, B], view, devices)`",
          doc_ours="`Session.create([A, B], network_or_view, [dev_a, dev_b])`"),
        N(_S, "CreateByOrder", "create_by_order", K.STATIC, "devices pair as in `create`",
          doc_manual="`Session::CreateByOrder(view, backends, devices)`",
          doc_ours="`Session.create_by_order(view, backends, devices)`"),
        N(_S, "CreateWithBackends", "create_with_backends", K.STATIC, "",
          doc_manual="`Session::CreateWithBackends(view, backends)`",
          doc_ours="`Session.create_with_backends(view, backends)`"),
        N(_S, "dumpSnapshot", "dump_snapshot", K.SAME,
          "after `apply`; one zip file: network, bindings, backend options and prepared "
          "artefacts (docs/session.md)",
          doc_manual="`sess.dumpSnapshot(path)`", doc_ours="`session.dump_snapshot(path)`"),
        N(_S, "CreateWithSnapshot", "create_with_snapshot", K.STATIC,
          "`path` or the file's bytes; backend classes or fresh objects in any order "
          "(matched by class; each device stays with its backend); returns an applied "
          "session; the MMU mode, merging and OCM options come "
          "from the snapshot (manual 1.1.3); corrupt or mismatched (a device of another "
          "target, other hardware): 11011 with the reason; a program container "
          "(`xrt compile`) loads the same way",
          doc_manual="`Session::CreateWithSnapshot(file, backends, devices)`",
          doc_ours="`Session.create_with_snapshot(path, backends, devices=None)`"),
        N(_S, "backends", "backends", K.SAME, "in the order given, unused ones included",
          doc_manual="`sess->backends`", doc_ours="`session.backends`"),
        N(_S, "network_view", "network_view", K.SAME, "",
          doc_manual="`sess->network_view`",
          doc_ours="`session.network_view`; also `session.inputs`, `session.outputs`"),
        N(_S, "backendBindings", "backend_bindings", K.SAME,
          "op id -> backend (Input, op 0, and Output, the last, included)",
          doc_manual="`backendBindings()`", doc_ours="`session.backend_bindings()`"),
        N(_S, "apply", "apply", K.SAME,
          "also groups units, plans memory, allocates the arena",
          doc_manual="`apply()`", doc_ours="`session.apply()`"),
        N(_S, "forward", "forward", K.SAME,
          "Tensors or numpy arrays; returns Tensors (copies, or the given output tensors); "
          "with `outputs`, a session using BuyiBackend is 11012 (manual 1.3.2: ZG330 only); "
          "on ZG330 an output tensor in the engine's layout (`hw_layout=ChannelTiled(16)` "
          "over NCHW) is written by the engine itself, others are copied in; "
          "`session.output_paths()` says which (an addition)",
          doc_manual="`forward(inputs)` / `forward(inputs, outputs)`",
          doc_ours="`session.forward(inputs, outputs=None)`"),
        N(_S, "stepTo", "step_to", K.SAME,
          "continues; new input objects or going back restart (*decided*)",
          doc_manual="`stepTo(op_id, inputs)`", doc_ours="`session.step_to(op_id, inputs=None)`"),
        N(_S, "setLogIO", "set_log_io", K.SAME, "logger `xrt.session`, INFO",
          doc_manual="`setLogIO(bool)`", doc_ours="`set_log_io(bool)`"),
        N(_S, "setLogTime", "set_log_time", K.SAME, "logger `xrt.session`, INFO",
          doc_manual="`setLogTime(bool)`", doc_ours="`set_log_time(bool)`"),
        N(_S, "setDumpOutputs", "set_dump_outputs", K.SAME,
          "files `<op id>_<value>.<fmt>`; impossible formats fall back; in an `H` format "
          "(the manual's `HQB`) the NPU backends' values are written as the engine stores "
          "them (channel tiles of 16 over NCHW, padding included: `Backend.stored_values`), "
          "the host's as S; with merging on, the NPU backends also dump a merged program's "
          "intermediates, read back from where they live (ZG330: the OCM, manual 1.4.3)",
          doc_manual="`setDumpOutputs(bool, path, format)`",
          doc_ours="`set_dump_outputs(enabled, folder, format)`"),
        N(_S, "setPreCallBack", "set_pre_callback", K.SAME,
          "`f(session, op, backend, tensors)` as the manual's `preFunc(sess, op, backend, "
          "output_tensors)`: `op` is the operator or the merged `Subgraph`, `tensors` its "
          "inputs (pre) or outputs (post); an exception is 11013",
          doc_manual="`setPreCallBack(f)`", doc_ours="`set_pre_callback(f)`"),
        N(_S, "setPostCallBack", "set_post_callback", K.SAME, "as `set_pre_callback`",
          doc_manual="`setPostCallBack(f)`", doc_ours="`set_post_callback(f)`"),
        N(_S, "enableTimeProfile", "enable_time_profile", K.SAME, "",
          doc_manual="`enableTimeProfile(bool)`", doc_ours="`enable_time_profile(bool)`"),
        N(_S, "timeProfileResults", "time_profile_results", K.SAME,
          "op id -> `OpTime` (`wall, memory, hardware, other = t`), milliseconds as the "
          "manual prints them",
          doc_manual="`timeProfileResults()`", doc_ours="`time_profile_results()`"),
        N(_S, "totalTime", "total_time", K.SAME, "always measured",
          differs="the unit is an argument, not a template parameter",
          doc_manual="`totalTime<seconds>()` / `<milliseconds>`",
          doc_ours='`total_time()` / `total_time("ms")` (`"s"`, `"ms"`, `"us"`)'),
        N(_S, "", "profile_table", K.ADDED, "",
          doc_ours="`profile_table()`, `memory_plan`, `execution_units()`, `fork()`, "
          "`close()`"),
        N(_S, "", "enable_trace", K.ADDED,
          "the forward's timeline as Chrome trace JSON (ui.perfetto.dev); "
          "`xrt run --trace FILE`",
          doc_ours="`enable_trace(bool)`, `trace_events()`, `write_trace(path)`; "
          "`Backend.trace(...)`"),
    ),
)

MODULES = Section(
    "modules",
    (
        N("xrt", "HostBackend", "xrt.backend.HostBackend", K.MODULE,
          "also `from host_backend import *`"),
        N("xrt", "TensorType", "xrt.dtypes.TensorType", K.MODULE, "also in `xir`"),
        N("xrt", "DataType", "xrt.dtypes.DataType", K.MODULE,
          "also in `xir`, with `FloatType` and `IntegerType`"),
        N("xrt", "Network", "xrt.network.Network", K.MODULE, "also in `xir`"),
        N("xrt", "MemManager", "xrt.memory.MemManager", K.MODULE, "a region's `mem_manager`"),
        N("xir", "DataType", "xrt.dtypes.DataType", K.MODULE, ""),
        N("xir", "QuantParams", "xrt.dtypes.QuantParams", K.MODULE,
          "a quantized type's scale and zero point"),
        N("xir", "NetworkBuilder", "xrt.network.NetworkBuilder", K.MODULE,
          "builds a network op by op"),
    ),
)
# fmt: on
