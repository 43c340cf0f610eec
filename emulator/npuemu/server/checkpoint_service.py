"""The checkpoint RPCs of the device service (`npuemu.server.service` delegates to these).

SaveCheckpoint seals the file with the server's key (`npuemu.server.checkpoint_seal`).
RestoreCheckpoint receives the whole file (its declared size bounded first), parses it
against what this server's devices allow (`npuemu.server.checkpoint.Limits`: the target's
memories, its configuration registers, the worker's own state size), and only then, if
nothing is refused, changes the device:

- scope WHOLE: the model state must be sealed by this server's key (or the server runs
  with ``--allow-foreign-checkpoints``); otherwise the restore is refused with 11011, saying
  why and that the PORTABLE scope restores the memories and registers anyway;
- scope PORTABLE: memories and configuration registers, from the device's pristine state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import cast

import grpc

from npuemu.server import checkpoint_device
from npuemu.server.checkpoint import Checkpoint, CheckpointError, Limits
from npuemu.server.devices import SimDevice
from npuemu.server.errors import ServiceError
from npuemu.server.handlers import refuse_undecodable
from npuemu.server.leases import Lease
from npuemu.server.limits import StreamBudget
from npuemu.server.manager import DeviceManager
from npuemu.worker.protocol import STATE_SLACK_BYTES
from xrt.errors import ErrorCode
from xrt.hw.port import StateSaved, StateTime
from xrt.hw.targets import MIN_SIM_CYCLES_PER_S
from xrt.hw.wire import MAX_CHUNK, CheckpointScope, pb

__all__ = ["restore_checkpoint", "save_checkpoint"]

log = logging.getLogger("npuemu.server")


async def save_checkpoint(
    m: DeviceManager, request: pb.SaveCheckpointRequest, peer: str
) -> tuple[Lease, SimDevice, bytes, int]:
    """Take the device's checkpoint and seal its file: (lease, device, file, cycle)."""
    refuse_undecodable(request)
    lease, d = m.use(request.lease_id)
    taken, reply = await checkpoint_device.take(
        d, d.bind(lease, request.wait_cycles / MIN_SIM_CYCLES_PER_S), request.wait_cycles
    )
    data = await asyncio.to_thread(taken.to_bytes, m.seal_key)
    m.check_live(lease)  # else the recording below is the next holder's
    if d.recording is not None:
        d.recording.checkpoint(
            saved=True,
            start_ps=reply.start_ps,
            cycles=reply.cycles,
            time_ps=reply.body_as(StateSaved).time_ps,
            data=data,
        )
    log.info(
        "%s saved a checkpoint of %s (%d bytes, cycle %d) from %s",
        lease.holder,
        d.name,
        len(data),
        taken.cycle,
        peer,
    )
    return lease, d, data, taken.cycle


async def restore_checkpoint(
    m: DeviceManager,
    streams: StreamBudget,
    request_iterator: AsyncIterator[pb.RestoreCheckpointRequest],
) -> pb.RestoreCheckpointResponse:
    """The whole file is received and checked before the device is touched: a refused one
    changes nothing."""
    admitted: list[tuple[str, int]] = []
    try:
        lease, d, data, scope = await _receive(m, streams, request_iterator, admitted)
        limits = Limits.for_target(d.target, _model_state_bound(d))
        try:
            ckpt = await asyncio.to_thread(Checkpoint.parse, data, limits)
            if scope == CheckpointScope.WHOLE:
                _check_whole(m, d, ckpt)
            else:
                ckpt.check_portable(d.target)
        except CheckpointError as exc:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"checkpoint refused, nothing changed: {exc}",
                xrt_code=ErrorCode.LOAD_FAILED,
            ) from None
        m.check_live(lease)
        reply = await checkpoint_device.apply(d, ckpt, d.bind(lease), scope)
        # A lease that ended meanwhile: its (renewed) files took the pages, not the next
        # holder's; the caller learns it was cut short.
        m.check_live(lease)
        if d.recording is not None:
            d.recording.checkpoint(
                saved=False,
                start_ps=reply.start_ps,
                cycles=reply.cycles,
                time_ps=reply.body_as(StateTime).time_ps,
                data=bytes(data),
                scope=int(scope),
            )
    finally:
        for lease_id, nbytes in admitted:
            streams.release(lease_id, nbytes)
    log.info(
        "%s restored a checkpoint into %s (cycle %d, %s)",
        lease.holder,
        d.name,
        ckpt.cycle,
        scope.name.lower(),
    )
    return pb.RestoreCheckpointResponse(
        cycles=reply.cycles, saved_cycle=ckpt.cycle, scope=cast(pb.CheckpointScope, int(scope))
    )


def _model_state_bound(d: SimDevice) -> int:
    """The largest model state this device's worker can hold (its own state's size, plus
    what context strings may add); any model state before the worker said."""
    worker = d.worker
    if worker is None or not worker.state_bytes:
        return Limits.for_target(d.target).model_state_bytes
    return worker.state_bytes + STATE_SLACK_BYTES


def _check_whole(m: DeviceManager, d: SimDevice, ckpt: Checkpoint) -> None:
    """The model state may be restored only when this server sealed it (or it trusts
    every file: --allow-foreign-checkpoints); and it must be of this very model."""
    if not m.allow_foreign_checkpoints:
        why = ckpt.authenticate(m.seal_key)
        if why is not None:
            raise CheckpointError(
                f"its model state {why}; this server restores only the model states it "
                "sealed: restore its memories and configuration registers with the portable "
                "scope (Device.restore(path, portable=True); npu-emu checkpoint restore "
                "--portable), or serve with the key of the server that took it "
                "(--checkpoint-key-file) or --allow-foreign-checkpoints"
            )
    ckpt.check_fits(d.target, d.model.digest)


async def _receive(
    m: DeviceManager,
    streams: StreamBudget,
    request_iterator: AsyncIterator[pb.RestoreCheckpointRequest],
    admitted: list[tuple[str, int]],
) -> tuple[Lease, SimDevice, bytearray, CheckpointScope]:
    lease = d = None
    total = 0
    scope = CheckpointScope.WHOLE
    staged = bytearray()
    async for msg in request_iterator:
        refuse_undecodable(msg)
        if lease is None:
            lease, d = m.use(msg.lease_id)
            total = msg.total_bytes
            limit = Limits.for_target(d.target, _model_state_bound(d)).max_file_bytes()
            if not 0 < total <= limit:
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"a checkpoint of {total} bytes; a {d.target.name} device's is at most "
                    f"{limit} (nothing changed)",
                    xrt_code=ErrorCode.LOAD_FAILED,
                )
            if msg.scope not in (0, *map(int, CheckpointScope)):
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT, f"unknown checkpoint scope {msg.scope}"
                )
            scope = CheckpointScope(msg.scope or CheckpointScope.WHOLE)
            streams.admit(lease.id, total)
            admitted.append((lease.id, total))
        else:
            m.check_live(lease)
        if len(msg.data) > MAX_CHUNK or len(staged) + len(msg.data) > total:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the stream carries more than {MAX_CHUNK} bytes in a message or more "
                f"than the {total} bytes it declared (nothing changed)",
            )
        staged += msg.data
        lease.touch()
    if lease is None or d is None:
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "empty RestoreCheckpoint stream")
    if len(staged) != total:
        raise ServiceError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the stream declared {total} bytes but carried {len(staged)} (nothing changed)",
        )
    return lease, d, staged, scope
