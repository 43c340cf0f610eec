"""Networks: the model, its file format, the reference executor and the ONNX importer.

* `Network`: operators with stable ids in topological order, values, parameters;
  `Network.load` / `save` (docs/network-format.md), `Network.from_onnx`, `Network.view`.
  The first op is the ``Input`` op (id 0, `Network.input_op`), the last the ``Output`` op
  (`Network.output_op`), as the Icraft manual numbers them (`xrt.ops.boundary`).
* `save_network` / `load_network` (= `Network.save` / `Network.load`): the file format.
* `Framework`: the framework a network came from, a label (`Network.framework`).
* `NetworkView`: a subset of a network's operators with derived inputs and outputs.
* `NetworkBuilder`: builds a network op by op, inferring types.
* `run_network_reference`: runs a network or view with the numpy host kernels.
* Run-time parameters (``Operator.fed``): `FedResolver` resolves operators whose roles are
  fed at run time, `bind_fed` sets fed data into an operator, `runtime_note` says why an
  operator needs a backend that takes them, `needs_resolution` which ones resolve.
* `is_quantized_op`, `is_float_op`: what arithmetic an operator does (placement reports).
* `import_onnx` (= `Network.from_onnx`): ONNX models, opset >= 7 (upgraded to 11). The ``onnx``
  package is imported only when a model is imported.
"""

from xrt.network._builder import NetworkBuilder
from xrt.network._fed import FedResolver, bind_fed, needs_resolution, runtime_note
from xrt.network._format import FORMAT_NAME, FORMAT_VERSION, load_network, save_network
from xrt.network._graph import Network, NetworkView, as_view
from xrt.network._onnx_limits import ONNX_FED_INPUTS, ONNX_OP_LIMITS
from xrt.network._operator import Operator
from xrt.network.classify import is_float_op, is_quantized_op
from xrt.network.framework import Framework
from xrt.network.onnx_import import MIN_OPSET, SUPPORTED_ONNX_OPS, import_onnx
from xrt.network.reference import check_inputs, run_network_reference

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MIN_OPSET",
    "ONNX_FED_INPUTS",
    "ONNX_OP_LIMITS",
    "SUPPORTED_ONNX_OPS",
    "FedResolver",
    "Framework",
    "Network",
    "NetworkBuilder",
    "NetworkView",
    "Operator",
    "as_view",
    "bind_fed",
    "check_inputs",
    "import_onnx",
    "is_float_op",
    "is_quantized_op",
    "load_network",
    "needs_resolution",
    "run_network_reference",
    "runtime_note",
    "save_network",
]
