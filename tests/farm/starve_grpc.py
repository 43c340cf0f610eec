"""Run a farm job with gRPC's request thread of its coordinator stream starved at the worst
moment of its give-back:

    python starve_grpc.py -m npuemu.farm.job TAGS WAIT_S

On a loaded machine a daemon thread can go without the CPU (or the GIL) for as long as the
main thread keeps running; the main thread waiting for it is what lets it run. This forces
one such schedule on the request thread of the job's `FarmClient` stream, once the job
sends ``giving_back``:

1. the main thread enters ``FarmClient.close`` only once the request thread has sent every
   request and waits for the next (the usual case: without it, the thread may leave through
   another path, under the same lock);
2. after its request iterator has ended, the request thread does not run until the main
   thread has returned from ``FarmClient.close`` or waits for it (``Thread.join``);
3. it then takes the call's lock, and does not run again until the main thread waits for it.

A ``close`` that returns without waiting for that thread leaves the lock held by a thread
the interpreter kills at exit, and the exit hangs when the finalizer collects the call
(``_Rendezvous.__del__`` takes that lock): issue 38, finding 9. Only when threads run is
controlled (a trace function in the request thread, a profile function in the main
thread); gRPC, xrt and the job run unchanged. The lines are found in gRPC's source: when it
changes shape, this fails at start instead of passing without forcing anything.
"""

from __future__ import annotations

import inspect
import runpy
import sys
import threading
from types import CodeType, FrameType
from typing import Any

import grpc._channel

BOUND_S = 300.0  # every wait of the schedule is bounded: a wrong guess ends, it does not hang
MARK = "starve_grpc: the request thread holds its call's lock"


class _RequestThread:
    """One gRPC request thread (the job has one per FarmClient) and where it is."""

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        self.idle = threading.Event()  # it waits for a request (or has ended)
        self.locked_or_ended = threading.Event()  # it holds the call's lock (or has ended)


request_threads: dict[threading.Thread, _RequestThread] = {}
starved: list[_RequestThread] = []  # the one alive at give-back: the schedule is forced on it
closed_or_joined = threading.Event()  # FarmClient.close returned, or it is joined
joined = threading.Event()  # the main thread waits for it


def _request_code() -> tuple[CodeType, int, int, int]:
    """gRPC's request-thread function; its line taking the next request, its last
    ``with state.condition:`` (after the requests ended) and the line inside that."""
    outer = grpc._channel._consume_request_iterator
    code = next(
        c
        for c in outer.__code__.co_consts
        if isinstance(c, CodeType) and c.co_name == "consume_request_iterator"
    )
    src, first = inspect.getsourcelines(outer)
    text = [line.strip() for line in src]
    nexts = [i for i, line in enumerate(text) if line == "request = next(request_iterator)"]
    withs = [i for i, line in enumerate(text) if line == "with state.condition:"]
    if len(nexts) != 1 or not withs or text[withs[-1] + 1] != "if state.code is None:":
        raise RuntimeError(f"grpc {grpc.__version__}: its request thread changed shape")
    return code, first + nexts[0], first + withs[-1], first + withs[-1] + 1


CODE, NEXT_LINE, WITH_LINE, INSIDE_LINE = _request_code()


def _in_request_thread(frame: FrameType, event: str, arg: Any) -> Any:
    me = request_threads[threading.current_thread()]
    if event == "return":
        me.idle.set()
        me.locked_or_ended.set()
    elif event == "line":
        if frame.f_lineno == NEXT_LINE:
            me.idle.set()
            return _in_request_thread
        me.idle.clear()
        if me not in starved:
            return _in_request_thread
        if frame.f_lineno == WITH_LINE:
            closed_or_joined.wait(BOUND_S)
        elif frame.f_lineno == INSIDE_LINE:
            me.locked_or_ended.set()
            print(MARK, file=sys.stderr, flush=True)
            joined.wait(BOUND_S)
    return _in_request_thread


def _thread_trace(frame: FrameType, event: str, arg: Any) -> Any:
    if frame.f_code is not CODE:
        return None
    request_threads[threading.current_thread()] = _RequestThread()
    return _in_request_thread


def _arm() -> None:
    """At give-back: the schedule applies to the request thread of the job's first
    FarmClient (hold_farm_device's, still open; its thread started first: the client's
    first sync needs it)."""
    first = next(iter(request_threads.values()))
    if not first.thread.is_alive():
        raise RuntimeError("the job's first gRPC request thread has ended before give-back")
    starved.append(first)


def _main_profile(frame: FrameType, event: str, arg: Any) -> None:
    code = frame.f_code
    if event == "call":
        if code.co_name == "say" and code.co_filename.endswith("npuemu/farm/job.py"):
            if frame.f_locals["event"].get("event") == "giving_back":
                _arm()
        elif not starved:
            return
        elif code is threading.Thread.join.__code__ and frame.f_locals["self"] is starved[0].thread:
            joined.set()
            closed_or_joined.set()
        elif code.co_qualname == "FarmClient.close":
            starved[0].idle.wait(BOUND_S)
    elif event == "return" and starved and code.co_qualname == "FarmClient.close":
        closed_or_joined.set()
        starved[0].locked_or_ended.wait(BOUND_S)  # it runs now, up to holding the lock


def main() -> None:
    if sys.argv[1] != "-m":
        raise SystemExit(f"usage: {sys.argv[0]} -m MODULE ARGS...")
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    threading.settrace(_thread_trace)
    sys.setprofile(_main_profile)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
