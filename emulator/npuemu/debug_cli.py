"""``npu-emu debug --device URL [NETWORK] [--input ...]``: a gdb-like debugger of a simulated
NPU (docs/debugging.md, "Debugger").

Commands come from ``-x FILE`` first, then standard input (a prompt when it is a terminal),
so a script or a test drives it as a real process::

    break reg CORE_CTRL write      break cycle N | break irq | break insn N | break dma N
    run                            the network starts in a thread of this process, on the
                                   debugger's own lease (as gdb runs the program)
    step [N] / stepi [N]           N engine instructions / N cycles (also: step cycles N)
    info engine | info breakpoints | info registers [NAME]
    x/Nx ADDR                      N 32-bit words of host-visible memory
    waves on                       a waveform window from now (a traced model: serve --waves)
    waves FILE [after N]           close it (N more cycles first) into FILE
    delete [N] | continue | quit

``run`` and ``continue`` return when the device stops (a breakpoint, a step) or the network
ends; at its end the outputs are compared with the host backend's (bit-exact, or exit 4).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from xrt import exitcodes
from xrt.device_url import DEFAULT_DEVICE_ENV
from xrt.errors import ErrorCode, XrtError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["add_debug_command", "main"]

PROMPT = "(npu-dbg) "
RUN_END_S = 600.0  # the longest `run`/`continue` waits for a stop or the network's end
_SLICE_S = 0.25  # between two looks at the network's thread while waiting for a stop


def add_debug_command(sub: argparse._SubParsersAction, formatter: type) -> None:
    """Add ``debug`` to `npu-emu`'s sub-command parser."""
    d = sub.add_parser(
        "debug",
        help="debug a simulated NPU: breakpoints, steps, the engine's state (gdb-like)",
        description=__doc__,
        formatter_class=formatter,
    )
    d.add_argument(
        "--device", "-d", metavar="URL", default=None,
        help="the device: grpc://HOST:PORT[/DEVICE] or sim://TARGET (default $XRT_DEVICE)",
    )  # fmt: skip
    d.add_argument(
        "network", nargs="?", default=None, help="the network `run` starts (.json, .onnx)"
    )
    d.add_argument(
        "--input", action="append", default=[], metavar="FILE.npy|NAME=FILE.npy",
        help="an input of the network (repeatable; default: random, --seed)",
    )  # fmt: skip
    d.add_argument("--seed", type=int, default=0, help="seed of random inputs and calibration")
    d.add_argument(
        "--quantize",
        action="store_true",
        help="quantize a float network first (random calibration)",
    )
    d.add_argument(
        "-x", dest="script", type=Path, default=None, help="run the commands of FILE first"
    )


class _Run:
    """The network in a thread of this process (gdb's inferior)."""

    def __init__(self, sess: Any, feeds: dict[str, np.ndarray]) -> None:
        self.out: list[np.ndarray] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(sess, feeds), daemon=True)
        self._thread.start()

    def _main(self, sess: Any, feeds: dict[str, np.ndarray]) -> None:
        try:
            self.out = [t.numpy() for t in sess.forward(feeds)]
        except BaseException as exc:  # reported by the debugger
            self.error = exc
        finally:
            self.done.set()


class Debug:
    """One debugging session of a device (see the module docstring)."""

    def __init__(self, dev: Any, args: argparse.Namespace, out: TextIO) -> None:
        self.dev = dev
        self.dbg = dev.debugger
        self.args = args
        self.out = out
        self.run: _Run | None = None
        self.want: list[np.ndarray] | None = None
        self.sessions: list[Any] = []
        self.status = exitcodes.OK

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # -- commands --------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run one command line; False for quit."""
        words = shlex.split(line, comments=True)
        if not words:
            return True
        head, rest = words[0], words[1:]
        if head.startswith("x/") or head == "x":
            self.examine(head, rest)
        elif head in ("q", "quit"):
            return False
        elif head in ("b", "break"):
            self.break_(rest)
        elif head == "info" and rest:
            self.info(rest[0], rest[1:])
        elif head in ("d", "delete"):
            self.dbg.delete(_int(rest[0]) if rest else None)
            self.say("deleted " + (f"breakpoint {rest[0]}" if rest else "every breakpoint"))
        elif head in ("r", "run"):
            self.start()
        elif head in ("c", "continue"):
            after = self.dbg.stops
            self.dbg.continue_()
            self.wait(after)
        elif head in ("s", "step", "si", "stepi"):
            self.step(head, rest)
        elif head == "waves" and rest:
            self.waves(rest)
        else:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"unknown command {line.strip()!r}")
        return True

    def break_(self, rest: list[str]) -> None:
        if not rest:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, "break what? cycle N, reg NAME, irq, insn N, dma N"
            )
        what, more = rest[0], rest[1:]
        if what == "cycle" and more:
            point = self.dbg.break_at(cycle=_int(more[0]))
        elif what in ("reg", "register") and more:
            point = self.dbg.break_at(
                register=more[0], access=more[1] if len(more) > 1 else "write"
            )
        elif what == "irq":
            point = self.dbg.break_at(irq=True)
        elif what == "insn" and more:
            point = self.dbg.break_at(insn=_int(more[0]))
        elif what == "dma" and more and more[0] == "addr" and len(more) > 1:
            point = self.dbg.break_at(dma_addr=_int(more[1]))
        elif what == "dma" and more:
            point = self.dbg.break_at(dma=_int(more[0]))
        else:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"break {' '.join(rest)!r}: not a breakpoint")
        self.say(f"Breakpoint {point.describe().split(' (hit')[0]}")

    def info(self, what: str, more: list[str]) -> None:
        if what in ("b", "breakpoints", "break"):
            points = self.dbg.breakpoints()
            self.say("\n".join(p.describe() for p in points) if points else "no breakpoints")
        elif what == "engine":
            self.say(self.dbg.engine_state().describe())
        elif what in ("registers", "reg", "r"):
            self.registers(more)
        else:
            raise XrtError(
                ErrorCode.OUT_OF_RANGE, f"info {what!r}: breakpoints, engine or registers"
            )

    def registers(self, names: list[str]) -> None:
        """Registers by a bus read: only while the device runs (a stopped model takes no bus
        cycle; its engine state is `info engine`)."""
        if self.dbg.stopped:
            raise XrtError(
                ErrorCode.WRONG_ORDER,
                "the device is stopped: registers are read over the bus, which needs cycles "
                "(see `info engine` for the stopped engine's state)",
            )
        from xrt.hw.regs import read_side_effects
        from xrt.hw.targets import target
        from xrt.npu_device.debugger import register_address

        cfg = target(self.dev.target)
        effects = read_side_effects(cfg.npu_base, cfg.dma_base)
        for name in names or ["STATUS", "CORE_STATUS", "PROG_INSNS", "CORE_ERR_PC"]:
            addr = register_address(name, cfg)
            if addr in effects:  # the debugger changes nothing the driver sees
                raise XrtError(ErrorCode.OUT_OF_RANGE, f"not read: {effects[addr]}")
            block = "dma" if cfg.dma_base <= addr < cfg.dma_base + cfg.reg_block_size else "npu"
            value = self.dev.get_reg_region(block).read(addr)
            self.say(f"{name:<14} {addr:#010x}  {value:#010x}")

    def examine(self, head: str, rest: list[str]) -> None:
        count = _int(head[2:].rstrip("xw") or "1") if head.startswith("x/") else 1
        if not rest or count < 1 or count > 4096:
            raise XrtError(ErrorCode.OUT_OF_RANGE, f"{head} {' '.join(rest)}: x/Nx ADDR, N 1..4096")
        import numpy as np

        addr = _int(rest[0])
        data = self.dbg.read_memory(addr, 4 * count)
        words = np.frombuffer(data, dtype="<u4")
        for i in range(0, count, 4):
            row = " ".join(f"{int(w):#010x}" for w in words[i : i + 4])
            self.say(f"{addr + 4 * i:#x}: {row}")

    def step(self, head: str, rest: list[str]) -> None:
        if rest[:1] == ["cycles"]:
            state = self.dbg.step(cycles=_int(rest[1]) if len(rest) > 1 else 1)
        elif head in ("si", "stepi"):
            state = self.dbg.step(cycles=_int(rest[0]) if rest else 1)
        else:
            state = self.dbg.step(instructions=_int(rest[0]) if rest else 1)
        self.report_stop(state)

    def waves(self, rest: list[str]) -> None:
        if rest == ["on"]:
            self.dbg.waves_on()
            self.say(f"Recording waveforms from cycle {self.dbg.engine_state().cycle}")
            return
        if len(rest) not in (1, 3) or (len(rest) == 3 and rest[1] != "after"):
            raise XrtError(ErrorCode.OUT_OF_RANGE, "waves on | waves FILE [after N]")
        after = _int(rest[2]) if len(rest) == 3 else 0
        window = self.dbg.waves(rest[0], after=after)
        self.say(f"Waveforms of cycles {window.first_cycle}..{window.last_cycle} in {window.path}")

    # -- the network -----------------------------------------------------------------------

    def start(self) -> None:
        if self.run is not None and not self.run.done.is_set():
            raise XrtError(ErrorCode.WRONG_ORDER, "the network is running already")
        if self.args.network is None:
            raise XrtError(ErrorCode.WRONG_ORDER, "no network to run: give NETWORK")
        from xrt import Session
        from xrt.backend import BuyiBackend, HostBackend, ZG330Backend
        from xrt.model_input import inputs, load_network

        net = load_network(self.args.network)
        feeds, _ = inputs(net, self.args.input, self.args.seed)
        if self.args.quantize:
            from xrt.quant import quantize_network

            net = quantize_network(net, [inputs(net, [], self.args.seed + i)[0] for i in (1, 2)])
        with Session.create([HostBackend], net).apply() as host:
            self.want = [t.numpy() for t in host.forward(feeds)]
        backend = BuyiBackend if self.dev.target == "buyi" else ZG330Backend
        sess = Session.create([backend, HostBackend], net, [self.dev, None]).apply()
        self.sessions.append(sess)
        self.say(f"Starting {Path(self.args.network).name} on {self.dev.name}")
        after = self.dbg.stops
        self.run = _Run(sess, feeds)
        self.wait(after)

    def wait(self, after: int) -> None:
        """Until the device stops (more than `after` times in all) or the network ends."""
        run = self.run
        for _ in range(int(RUN_END_S / _SLICE_S)):
            if run is not None and run.done.is_set():
                self.report_end(run)
                return
            if self.dbg.wait_stop_after(after, _SLICE_S):
                self.report_stop(self.dbg.engine_state())
                return
        raise XrtError(
            ErrorCode.TIMEOUT, f"neither a stop nor the network's end in {RUN_END_S:g} s"
        )

    def report_stop(self, state: Any) -> None:
        why = f"Breakpoint {state.hit}" if state.hit else "Stopped (step)"
        where = f"instruction {state.pc}" if state.decoding else "decode empty"
        self.say(f"{why} at cycle {state.cycle}: {where}")

    def report_end(self, run: _Run) -> None:
        if run.error is not None:
            self.say(f"The network failed: {run.error}")
            self.status = exitcodes.FAILED
            return
        import numpy as np

        assert run.out is not None and self.want is not None
        same = all(np.array_equal(g, w) for g, w in zip(run.out, self.want, strict=True))
        shapes = ", ".join("x".join(map(str, o.shape)) for o in run.out)
        verdict = "bit-exact with the host backend" if same else "DIFFERS from the host backend"
        self.say(f"The network finished: {len(run.out)} output(s) ({shapes}), {verdict}")
        if not same:
            self.status = exitcodes.MISMATCH


def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise XrtError(ErrorCode.OUT_OF_RANGE, f"{text!r} is not a number") from None


def _lines(script: Path | None, stdin: TextIO) -> Iterator[str]:
    if script is not None:
        try:
            text = script.read_text(errors="replace")
        except OSError as exc:
            raise XrtError(ErrorCode.FILE_NOT_FOUND, f"-x {script}: {exc.strerror}") from None
        yield from text.splitlines()
    interactive = stdin.isatty()
    while True:
        if interactive:
            print(PROMPT, end="", flush=True)
        line = stdin.readline()
        if not line:
            return
        yield line


def main(args: argparse.Namespace, stdin: TextIO = sys.stdin, out: TextIO = sys.stdout) -> int:
    """Run a debugging session; the exit code (`xrt.exitcodes`)."""
    from xrt import Device

    url = args.device or os.environ.get(DEFAULT_DEVICE_ENV, "").strip()
    if not url:
        print("npu-emu debug: give --device URL (or set $XRT_DEVICE)", file=sys.stderr)
        return exitcodes.BAD_INPUT
    try:
        dev = Device.open(url)
    except XrtError as exc:
        print(f"npu-emu debug: {exc}", file=sys.stderr)
        return exitcodes.FAILED
    session = Debug(dev, args, out)
    try:
        for line in _commands(session, _lines(args.script, stdin)):
            try:
                if not session.command(line):
                    break
            except XrtError as exc:
                session.say(f"error: {exc.message}")
                if not stdin.isatty():
                    session.status = session.status or exitcodes.FAILED
    finally:
        with contextlib.suppress(XrtError):  # the network runs to its end, then the lease ends
            session.dbg.clear()
        if session.run is not None:
            session.run.done.wait(RUN_END_S)
        for sess in session.sessions:
            sess.close()
        dev.close()
    return session.status


def _commands(session: Debug, lines: Iterable[str]) -> Iterator[str]:
    echo = not sys.stdin.isatty()  # a transcript of a script shows its commands
    for line in lines:
        if echo and line.strip():
            session.say(f"{PROMPT}{line.strip()}")
        yield line
