"""npuemu: the simulated NPU (verilated RTL under cocotb) and its device server."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("npu-emu")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
