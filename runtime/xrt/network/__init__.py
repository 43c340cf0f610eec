"""Networks: the model, its file format, the reference executor and the ONNX importer.

* `Network`: operators with stable ids in topological order, values, parameters;
  `Network.load` / `save` (docs/network-format.md), `Network.from_onnx`, `Network.view`.
* `NetworkView`: a subset of a network's operators with derived inputs and outputs.
* `NetworkBuilder`: builds a network op by op, inferring types.
* `run_network_reference`: runs a network or view with the numpy host kernels.
"""

from xrt.network._format import FORMAT_NAME, FORMAT_VERSION
from xrt.network._graph import Network, NetworkBuilder, NetworkView, Operator
from xrt.network.reference import check_inputs, run_network_reference

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Network",
    "NetworkBuilder",
    "NetworkView",
    "Operator",
    "check_inputs",
    "run_network_reference",
]
