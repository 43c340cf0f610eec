"""Tuning records (InfiniTensor's PerfEngine): measure choices once, record, reuse.

* `TuningRecords` (``load(path)`` / ``save(path)``, JSON, atomic): `TuningRecord` per
  `TuningKey` (op type, shapes, dtypes, attributes, hardware hash), versioned; stale,
  foreign or malformed records are passed over with a line in ``notes``.
* `NpuTuner`: the NPU compiler's tilings per convolution, measured on the golden model's
  cost model (`CostModelMeasure`) or a device's RTL cycles, checked whole per run.
* `HostTuner`: the host backend's kernel variants (``QConv2d``: im2col + matmul or per-tap
  accumulation), timed.

PerfEngine's per-op-type time summary is `xrt.session.profile.op_type_summary`.

docs/compiler.md ("Tuning") and docs/session.md ("Tuning records") describe the use.
"""

from xrt.tuning._host import HostTuner, host_code_fingerprint
from xrt.tuning._npu import CostModelMeasure, Measure, NpuTuner, TuneReport, npu_code_fingerprint
from xrt.tuning._records import (
    FORMAT_VERSION,
    MEASURES,
    TuningKey,
    TuningRecord,
    TuningRecords,
    code_fingerprint,
    hardware_hash,
    host_hardware_hash,
    runtime_version,
)

__all__ = [
    "FORMAT_VERSION",
    "MEASURES",
    "CostModelMeasure",
    "HostTuner",
    "Measure",
    "NpuTuner",
    "TuneReport",
    "TuningKey",
    "TuningRecord",
    "TuningRecords",
    "code_fingerprint",
    "hardware_hash",
    "host_code_fingerprint",
    "host_hardware_hash",
    "npu_code_fingerprint",
    "runtime_version",
]
