"""The NPU as a `Device`: `BuyiDevice` and `ZG330Device`, built on any `NpuTransport`.

Regions (docs/hardware.md has the memory map):

=========  ==============  ==============================================================
name       kind            what
=========  ==============  ==============================================================
``npu``    RegRegion       the NPU's CSR block, generated map attached (default RegRegion)
``dma``    RegRegion       the DMA engine's CSR block, generated map attached
``udma``   MemRegion       host-visible DMA window: the CPU reads and writes it directly
``plddr``  MemRegion       device DDR, default MemRegion: bytes move by DMA (`DmaMemRegion`)
``ocm``    MemRegion       on-chip memory, ZG330 only, by DMA like ``plddr``
=========  ==============  ==============================================================

At open the device reads the ``npu`` and ``dma`` MAGIC registers, ``NPU.TARGET`` and
``NPU.HW_VERSION`` (one batch per block) and refuses a device that is not the NPU it
expects (11014). It reserves the DMA bounce buffer at the top of ``udma``
(`DEFAULT_BOUNCE_BYTES`, or the URL's ``bounce=``): that chunk shows in ``udma``'s memory
manager, and the rest of ``udma`` is free for the caller. Then, as the manual's device
``init`` does, it logs (logger ``xrt.device``, INFO) its versions (`NpuDevice.version`), the
protocol (the URL's scheme), the device's name and the URL's parameters, and resets the
device (``reset(0)``): every register back to its reset value, memories kept. ``reset=0``
in the URL skips the reset, to attach to a device something else has set up; a board
(``axi://``), whose reset is not mapped, is not reset unless ``reset=1`` asks (then 11012),
nor is a device whose leases start from a warm server's checkpoint (`NpuInfo.warm_start`).

The classes know nothing of the transport: ``grpc://`` (the emulator) and ``axi://`` (a
board through ``/dev/mem``) build the same ones (`xrt.npu_device.open_device`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import ClassVar

from xrt._checks import as_seconds
from xrt._version import runtime_version
from xrt.device import Device, DeviceURL, ServerLogCallback
from xrt.errors import ErrorCode, XrtError
from xrt.hw.regs import DMA, FAULT, NPU
from xrt.hw.targets import HW_VERSION
from xrt.hw.targets import target as target_config
from xrt.memptr import MemPtr
from xrt.npu_device.debugger import Debugger
from xrt.npu_device.dma_region import DmaEngine, DmaMemRegion
from xrt.npu_device.faults import Fault, FaultController, FaultStatus
from xrt.registers import RegRead, RegRegion
from xrt.transport import HostRegion, NpuTransport

__all__ = [
    "DEFAULT_BOUNCE_BYTES",
    "DEVICE_URL_PARAMS",
    "BuyiDevice",
    "NpuDevice",
    "ZG330Device",
    "device_class",
]

DEFAULT_BOUNCE_BYTES = 8 << 20
"""Bytes of ``udma`` reserved for staging DMA transfers (two halves when double-buffered)."""

DEVICE_URL_PARAMS = ("bounce", "double_buffer", "probe", "reset")
"""URL parameters the device classes read (the transports read their own)."""

_BOUNCE_ALIGN = 4096
_SECRET_PARAMS = frozenset({"token"})  # never written to a log
_NOT_READ = "(not read: probe=0)"
_log = logging.getLogger("xrt.device")


def _version_text(reg_value: int) -> str:
    """``MAJOR.MINOR.PATCH`` of an ``NPU.HW_VERSION`` value."""
    reg = NPU.register("HW_VERSION")
    return ".".join(str(reg.field(f).extract(reg_value)) for f in ("MAJOR", "MINOR", "PATCH"))


class NpuDevice(Device):
    """An NPU reached through a transport (see the module docstring).

    Args:
        transport: An open transport; the device owns it from now on (closing the device
            closes it, and so does a failure here).
        url: The URL the device was opened with, if any.
        bounce_bytes: Bytes of ``udma`` reserved for the DMA bounce buffer.
        double_buffer: Overlap host copies with DMA transfers in staged reads and writes.
        probe: Check the MAGIC and TARGET registers at open.
        reset: Reset the device once it is open, as the manual's device ``init`` does
            (None: where the transport can, `NpuTransport.can_reset`, unless the device
            comes in a state to keep, `NpuInfo.warm_start`).

    Raises:
        XrtError: 11014 when the probe finds no NPU (or another target), 11003 for a bounce
            buffer that does not fit ``udma``, 11012 for ``reset=True`` on a transport that
            cannot reset.
    """

    TARGET: ClassVar[str] = ""
    """The target a subclass is for (``"buyi"``, ``"zg330"``); empty: any."""

    def __init__(
        self,
        transport: NpuTransport,
        url: DeviceURL | str | None = None,
        *,
        bounce_bytes: int = DEFAULT_BOUNCE_BYTES,
        double_buffer: bool = True,
        probe: bool = True,
        reset: bool | None = None,
    ) -> None:
        super().__init__(url)
        self._transport = transport
        self._rtl_version: str | None = None
        # One NPU program at a time, with its transfers: sessions sharing the device (an
        # AIC100 queue's threads) take turns through it (xrt.backend.npu).
        self.run_lock = threading.RLock()
        try:
            self._build(bounce_bytes, double_buffer, probe)
            default = transport.can_reset and not transport.info.warm_start
            self._init(default if reset is None else reset)
        except BaseException:
            self.close()
            raise

    def _build(self, bounce_bytes: int, double_buffer: bool, probe: bool) -> None:
        t = self._transport
        info = t.info
        if self.TARGET and info.target != self.TARGET:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"{type(self).__name__} is for {self.TARGET}, but {info.name} is {info.target}",
            )
        npu = t.reg_region("npu", NPU)
        dma = t.reg_region("dma", DMA)
        self.add_region(npu, default=True)
        self.add_region(dma)
        self._faults: FaultController | None = None
        if "fault" in info.register_blocks:  # a simulated device: the fault controller
            fault = t.reg_region("fault", FAULT)
            self.add_region(fault)
            self._faults = FaultController(fault, target_config(info.target))
        if probe:
            self._probe(npu, dma)
        udma = t.host_region("udma")
        self.add_region(udma)
        if not isinstance(bounce_bytes, int) or isinstance(bounce_bytes, bool):
            raise XrtError(ErrorCode.WRONG_TYPE, f"bounce must be an int: {bounce_bytes!r}")
        n = bounce_bytes // _BOUNCE_ALIGN * _BOUNCE_ALIGN
        if not _BOUNCE_ALIGN <= n <= udma.size // 2:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE,
                f"bounce buffer of {bounce_bytes} B: between {_BOUNCE_ALIGN} B and half of "
                f"udma ({udma.size // 2} B), please",
            )
        bounce = udma.malloc(MemPtr(udma.end - n), n, None, False)
        self._engine = DmaEngine(
            dma, t, bounce, bus_bytes=info.dma_bus_bytes, double_buffer=double_buffer
        )
        self._engine.attach(udma)
        udma.copy_engine = self._engine
        for m in info.memories.values():
            if not m.host_visible:
                region = DmaMemRegion(m.name, m.base, m.size, self._engine)
                self.add_region(region, default=m.name == "plddr")

    def _probe(self, npu: RegRegion, dma: RegRegion) -> None:
        npu_magic, target, version = npu.execute(
            [
                RegRead(npu.regs.MAGIC.address),
                RegRead(npu.regs.TARGET.address),
                RegRead(npu.regs.HW_VERSION.address),
            ]
        )
        self._rtl_version = _version_text(version or 0)
        (dma_magic,) = dma.execute([RegRead(dma.regs.MAGIC.address)])
        want_target = target_config(self._transport.info.target).id
        problems = []
        if npu_magic != NPU.register("MAGIC").reset:
            problems.append(f"npu MAGIC at {npu.base:#x} reads {npu_magic:#x}")
        if dma_magic != DMA.register("MAGIC").reset:
            problems.append(f"dma MAGIC at {dma.base:#x} reads {dma_magic:#x}")
        got_target = NPU.register("TARGET").field("ID").extract(target or 0)
        if not problems and got_target != want_target:
            problems.append(f"NPU_TARGET.ID is {got_target}, expected {want_target}")
        if problems:
            raise XrtError(
                ErrorCode.DEVICE_INTERNAL,
                f"no {self._transport.info.target} NPU at {self._transport.info.name}: "
                + "; ".join(problems),
            )

    def _init(self, reset: bool) -> None:
        """The manual's device ``init``: log the versions, the protocol, the device's name
        and the URL's parameters, then ``reset(0)`` (see the module docstring)."""
        if reset and not self._transport.can_reset:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                f"{self.name}: reset=1 asks for a reset at open, but "
                f"{type(self._transport).__name__} cannot pulse this device's reset; "
                "open it with reset=0",
            )
        versions = self._versions(read=False)  # probe=0: no register read at open
        if versions["rtl"] not in (versions["hardware"], _NOT_READ):
            _log.warning(
                "%s: its RTL is version %s; this runtime compiles for %s",
                self.name,
                versions["rtl"],
                versions["hardware"],
            )
        _log.info("device opened, versions:")
        for key, value in versions.items():
            _log.info("\t%s: %s", key, value)
        url = self._url
        _log.info("protocol: %s", url.scheme if url is not None else "-")
        _log.info("device: %s", self.name)
        _log.info("params:")
        for key, value in (url.params if url is not None else {}).items():
            _log.info("\t%s: %s", key, "(hidden)" if key in _SECRET_PARAMS else value)
        if reset:
            self.reset()
            _log.info("%s: reset", self.name)
        else:
            why = (
                "the transport cannot reset it"
                if not self._transport.can_reset
                else "a warm start: its lease begins from the server's checkpoint"
                if self._transport.info.warm_start
                and "reset" not in (self._url.params if self._url else {})
                else "reset=0"
            )
            _log.info("%s: not reset (%s)", self.name, why)

    # -- what it is ------------------------------------------------------------------------

    def version(self) -> dict[str, str]:
        """The versions of the device and the runtime (the manual's ``version()``, which
        its device ``init`` prints), in this order:

        - ``target``: ``buyi`` or ``zg330``;
        - ``hardware``: the hardware version this runtime compiles for
          (``rtl/config/npu.toml``, generated into `xrt.hw.targets.HW_VERSION`);
        - ``rtl``: what the device's ``NPU.HW_VERSION`` register reads;
        - ``emulator``: the simulator's software (``npu-emu 0.1.0``), for a simulated
          device only;
        - ``runtime``: this runtime's version.

        Raises:
            XrtError: 11012 on a closed device.
        """
        self._check_open()
        return self._versions(read=True)

    def _versions(self, read: bool) -> dict[str, str]:
        if self._rtl_version is None and read:  # opened with probe=0: read it now
            npu = self.get_reg_region("npu")
            self._rtl_version = _version_text(npu.read(npu.regs.HW_VERSION.address))
        out = {
            "target": self.target,
            "hardware": ".".join(map(str, HW_VERSION)),
            "rtl": self._rtl_version or _NOT_READ,
        }
        if self._transport.info.emulator_version:
            out["emulator"] = self._transport.info.emulator_version
        out["runtime"] = runtime_version()
        return out

    @property
    def transport(self) -> NpuTransport:
        """The transport under the device."""
        return self._transport

    @property
    def target(self) -> str:
        """``"buyi"`` or ``"zg330"``."""
        return self._transport.info.target

    @property
    def name(self) -> str:
        """The device's name (``"npu0"`` on the emulator)."""
        return self._transport.info.name

    @property
    def hw_version(self) -> str | None:
        """The hardware version the transport reports (None when it does not say)."""
        return self._transport.info.hw_version or None

    def follow_server_log(self, callback: ServerLogCallback) -> Callable[[], None]:
        """Device log capture: the server's log lines about this device (its lease, worker
        restarts, checkpoints, faults) and the device's own (``[device, cycle N] ...``:
        interrupts raised, engine and DMA errors, resets; those of the lease so far come
        first) go to ``callback(level, device, message)`` from a background thread until the
        lease ends; returns the function that stops it.

        Raises:
            XrtError: 11010 on a transport without a server log (a board).
        """
        # `NpuTransport` declares no log hook: only the emulator's gRPC transport has one.
        follow = getattr(self._transport, "follow_log", None)
        if follow is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE, f"{self.name}: {self._transport!r} has no server log"
            )
        return follow(callback)

    @property
    def dma_engine(self) -> DmaEngine:
        """The DMA engine the DMA-only regions use (bounce buffer, transfer count)."""
        self._check_open()
        return self._engine

    @property
    def cycles(self) -> int | None:
        """Simulated cycles at the transport's last response (None on real hardware)."""
        return self._transport.cycles

    @property
    def udma(self) -> HostRegion:
        """The host-visible region."""
        region = self.get_mem_region("udma")
        assert isinstance(region, HostRegion)
        return region

    # -- interrupts and reset --------------------------------------------------------------

    @property
    def has_irq(self) -> bool:
        return self._transport.has_irq

    def wait_irq(self, timeout_s: float, max_cycles: int | None = None) -> bool:
        """Wait for the NPU's interrupt line; True if it is high, False on timeout.

        Args:
            timeout_s: Wall-clock seconds (0: just look).
            max_cycles: Simulated cycles at most (emulator only).

        Raises:
            XrtError: 11003 for a negative timeout, 11012 on a closed device.
        """
        t = as_seconds(timeout_s, "timeout_s")
        self._check_open()
        return self._transport.wait_irq(t, max_cycles)

    # -- faults on cue (simulated devices) -------------------------------------------------

    def _fault_controller(self) -> FaultController:
        self._check_open()
        if self._faults is None:
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"{self.name} has no fault controller: faults on cue are a simulated "
                "device's (sim://, or grpc:// to npu-emu serve)",
            )
        return self._faults

    def inject_fault(self, fault: Fault | str) -> Fault:
        """Arm a fault in the simulation (`xrt.npu_device.faults`: ``KIND[:ARG...][@TRIGGER]``,
        e.g. ``"dma-error"``, ``"delay-irq:500"``, ``"bus-error:decerr@3"``), replacing the
        last one of its family (memory, interrupt, register); returns it parsed.

        Raises:
            XrtError: 11003 naming what is wrong in the text; 11010 on a device without a
                fault controller (a board).
        """
        return self._fault_controller().inject(fault)

    def faults(self) -> list[FaultStatus]:
        """The faults armed on this device, each with how often it fired."""
        return self._fault_controller().status()

    def clear_faults(self) -> None:
        """Disarm every fault (a lease's end does too: the device's state goes with it)."""
        self._fault_controller().clear()

    # -- the debugger (simulated devices) --------------------------------------------------

    @property
    def debugger(self) -> Debugger:
        """Breakpoints, steps and looks into the simulation (`xrt.npu_device.debugger`;
        a board's transport refuses each request with 11010)."""
        self._check_open()
        return Debugger(self._transport, target_config(self._transport.info.target))

    def reset(self) -> None:
        """Pulse the device's reset: registers return to their reset values, memories keep
        their contents (as DDR does). Raises 11012 where the transport cannot (``axi://``)."""
        self._check_open()
        self._transport.reset()

    # -- checkpoints (the emulator's devices) ----------------------------------------------

    def checkpoint(self, path: str | os.PathLike[str], *, wait_cycles: int = 0) -> int:
        """Save the device's whole state into the file `path`: every register, the engines
        and their buffers, the OCM, every byte of memory, the cycle counter. Taken with the
        engines idle (waits up to `wait_cycles` simulated cycles for them, else refuses).
        A later `restore`, on this device or another of the same target, hardware version
        and model build, puts all of it back.

        Returns:
            The cycle the state was saved at.

        Raises:
            XrtError: 11012 when an engine runs, or on a device that is not the emulator's.
        """
        self._check_open()
        return self._transport.checkpoint(path, wait_cycles)

    def restore(self, path: str | os.PathLike[str], *, portable: bool = False) -> int:
        """Put the state saved by `checkpoint` into the device. The whole file is checked
        first (checksum, sizes, target, hardware version, model build): a corrupt or foreign
        file is refused with the reason and changes nothing.

        The whole state (every flop, the engines' buffers) is restored only from a file the
        server itself sealed (the server that took it, or one sharing its key); with
        `portable`, any file of this target restores its memories and configuration
        registers onto the device's pristine state (docs/emulator.md, "Checkpoints").

        Returns:
            The cycle the checkpoint was taken at.

        Raises:
            XrtError: 11011 when the file is refused (the reason in the message).
        """
        self._check_open()
        return self._transport.restore(path, portable)

    def _close(self) -> None:
        self._transport.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__} {self._transport.info.name} via {self._transport!r}{state}>"


class BuyiDevice(NpuDevice):
    """Buyi: NPU and DMA; every tensor lives in external memory (``udma``, ``plddr``)."""

    TARGET = "buyi"


class ZG330Device(NpuDevice):
    """ZG330: Buyi plus on-chip memory (``ocm``) that tensors may live in."""

    TARGET = "zg330"


_CLASSES: dict[str, type[NpuDevice]] = {"buyi": BuyiDevice, "zg330": ZG330Device}


def device_class(target: str) -> type[NpuDevice]:
    """The device class of `target`.

    Raises:
        XrtError: 11010 for an unknown target.
    """
    try:
        return _CLASSES[target]
    except KeyError:
        raise XrtError(
            ErrorCode.WRONG_TYPE, f"no device class for target {target!r} (known: buyi, zg330)"
        ) from None
