from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEVICE_STATE_UNSPECIFIED: _ClassVar[DeviceState]
    DEVICE_STATE_STARTING: _ClassVar[DeviceState]
    DEVICE_STATE_FREE: _ClassVar[DeviceState]
    DEVICE_STATE_LEASED: _ClassVar[DeviceState]
    DEVICE_STATE_RESTARTING: _ClassVar[DeviceState]
    DEVICE_STATE_RESETTING: _ClassVar[DeviceState]

class DeviceLogSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEVICE_LOG_SOURCE_UNSPECIFIED: _ClassVar[DeviceLogSource]
    DEVICE_LOG_SOURCE_SERVER: _ClassVar[DeviceLogSource]
    DEVICE_LOG_SOURCE_DEVICE: _ClassVar[DeviceLogSource]

class RegisterStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGISTER_STATUS_UNSPECIFIED: _ClassVar[RegisterStatus]
    REGISTER_STATUS_OK: _ClassVar[RegisterStatus]
    REGISTER_STATUS_SLVERR: _ClassVar[RegisterStatus]
    REGISTER_STATUS_DECERR: _ClassVar[RegisterStatus]
    REGISTER_STATUS_POLL_TIMEOUT: _ClassVar[RegisterStatus]

class WaitOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAIT_OUTCOME_UNSPECIFIED: _ClassVar[WaitOutcome]
    WAIT_OUTCOME_INTERRUPT: _ClassVar[WaitOutcome]
    WAIT_OUTCOME_CYCLE_LIMIT: _ClassVar[WaitOutcome]
    WAIT_OUTCOME_DEADLINE: _ClassVar[WaitOutcome]

class CheckpointScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHECKPOINT_SCOPE_UNSPECIFIED: _ClassVar[CheckpointScope]
    CHECKPOINT_SCOPE_WHOLE: _ClassVar[CheckpointScope]
    CHECKPOINT_SCOPE_PORTABLE: _ClassVar[CheckpointScope]

class ObserverWindowState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OBSERVER_WINDOW_STATE_UNSPECIFIED: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_NONE: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_RECORDING: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_STOPPED: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_FULL: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_CUT_BY_HOLDER: _ClassVar[ObserverWindowState]
    OBSERVER_WINDOW_STATE_CUT_BY_LEASE_END: _ClassVar[ObserverWindowState]
DEVICE_STATE_UNSPECIFIED: DeviceState
DEVICE_STATE_STARTING: DeviceState
DEVICE_STATE_FREE: DeviceState
DEVICE_STATE_LEASED: DeviceState
DEVICE_STATE_RESTARTING: DeviceState
DEVICE_STATE_RESETTING: DeviceState
DEVICE_LOG_SOURCE_UNSPECIFIED: DeviceLogSource
DEVICE_LOG_SOURCE_SERVER: DeviceLogSource
DEVICE_LOG_SOURCE_DEVICE: DeviceLogSource
REGISTER_STATUS_UNSPECIFIED: RegisterStatus
REGISTER_STATUS_OK: RegisterStatus
REGISTER_STATUS_SLVERR: RegisterStatus
REGISTER_STATUS_DECERR: RegisterStatus
REGISTER_STATUS_POLL_TIMEOUT: RegisterStatus
WAIT_OUTCOME_UNSPECIFIED: WaitOutcome
WAIT_OUTCOME_INTERRUPT: WaitOutcome
WAIT_OUTCOME_CYCLE_LIMIT: WaitOutcome
WAIT_OUTCOME_DEADLINE: WaitOutcome
CHECKPOINT_SCOPE_UNSPECIFIED: CheckpointScope
CHECKPOINT_SCOPE_WHOLE: CheckpointScope
CHECKPOINT_SCOPE_PORTABLE: CheckpointScope
OBSERVER_WINDOW_STATE_UNSPECIFIED: ObserverWindowState
OBSERVER_WINDOW_STATE_NONE: ObserverWindowState
OBSERVER_WINDOW_STATE_RECORDING: ObserverWindowState
OBSERVER_WINDOW_STATE_STOPPED: ObserverWindowState
OBSERVER_WINDOW_STATE_FULL: ObserverWindowState
OBSERVER_WINDOW_STATE_CUT_BY_HOLDER: ObserverWindowState
OBSERVER_WINDOW_STATE_CUT_BY_LEASE_END: ObserverWindowState

class MemoryRegion(_message.Message):
    __slots__ = ("name", "base", "size", "host_visible")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    HOST_VISIBLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    base: int
    size: int
    host_visible: bool
    def __init__(self, name: _Optional[str] = ..., base: _Optional[int] = ..., size: _Optional[int] = ..., host_visible: _Optional[bool] = ...) -> None: ...

class RegisterBlock(_message.Message):
    __slots__ = ("name", "base", "size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    base: int
    size: int
    def __init__(self, name: _Optional[str] = ..., base: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class DeviceInfo(_message.Message):
    __slots__ = ("name", "target", "target_id", "hw_version", "protocol_version", "register_blocks", "regions", "state", "holder", "clock_period_ps", "dma_bus_bytes", "warm_start")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    HW_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REGISTER_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    CLOCK_PERIOD_PS_FIELD_NUMBER: _ClassVar[int]
    DMA_BUS_BYTES_FIELD_NUMBER: _ClassVar[int]
    WARM_START_FIELD_NUMBER: _ClassVar[int]
    name: str
    target: str
    target_id: int
    hw_version: str
    protocol_version: int
    register_blocks: _containers.RepeatedCompositeFieldContainer[RegisterBlock]
    regions: _containers.RepeatedCompositeFieldContainer[MemoryRegion]
    state: DeviceState
    holder: str
    clock_period_ps: int
    dma_bus_bytes: int
    warm_start: bool
    def __init__(self, name: _Optional[str] = ..., target: _Optional[str] = ..., target_id: _Optional[int] = ..., hw_version: _Optional[str] = ..., protocol_version: _Optional[int] = ..., register_blocks: _Optional[_Iterable[_Union[RegisterBlock, _Mapping]]] = ..., regions: _Optional[_Iterable[_Union[MemoryRegion, _Mapping]]] = ..., state: _Optional[_Union[DeviceState, str]] = ..., holder: _Optional[str] = ..., clock_period_ps: _Optional[int] = ..., dma_bus_bytes: _Optional[int] = ..., warm_start: _Optional[bool] = ...) -> None: ...

class ListDevicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDevicesResponse(_message.Message):
    __slots__ = ("devices", "protocol_version", "server_version")
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceInfo]
    protocol_version: int
    server_version: str
    def __init__(self, devices: _Optional[_Iterable[_Union[DeviceInfo, _Mapping]]] = ..., protocol_version: _Optional[int] = ..., server_version: _Optional[str] = ...) -> None: ...

class OpenDeviceRequest(_message.Message):
    __slots__ = ("device", "client", "protocol_version", "lease_ttl_ms", "local_host")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_HOST_FIELD_NUMBER: _ClassVar[int]
    device: str
    client: str
    protocol_version: int
    lease_ttl_ms: int
    local_host: LocalHost
    def __init__(self, device: _Optional[str] = ..., client: _Optional[str] = ..., protocol_version: _Optional[int] = ..., lease_ttl_ms: _Optional[int] = ..., local_host: _Optional[_Union[LocalHost, _Mapping]] = ...) -> None: ...

class LocalHost(_message.Message):
    __slots__ = ("hostname", "boot_id")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    boot_id: str
    def __init__(self, hostname: _Optional[str] = ..., boot_id: _Optional[str] = ...) -> None: ...

class LocalMapping(_message.Message):
    __slots__ = ("region", "size", "socket")
    REGION_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    region: str
    size: int
    socket: str
    def __init__(self, region: _Optional[str] = ..., size: _Optional[int] = ..., socket: _Optional[str] = ...) -> None: ...

class OpenDeviceResponse(_message.Message):
    __slots__ = ("lease_id", "lease_ttl_ms", "info", "local_mappings")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    LOCAL_MAPPINGS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    lease_ttl_ms: int
    info: DeviceInfo
    local_mappings: _containers.RepeatedCompositeFieldContainer[LocalMapping]
    def __init__(self, lease_id: _Optional[str] = ..., lease_ttl_ms: _Optional[int] = ..., info: _Optional[_Union[DeviceInfo, _Mapping]] = ..., local_mappings: _Optional[_Iterable[_Union[LocalMapping, _Mapping]]] = ...) -> None: ...

class HoldLeaseRequest(_message.Message):
    __slots__ = ("lease_id", "heartbeats")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    heartbeats: bool
    def __init__(self, lease_id: _Optional[str] = ..., heartbeats: _Optional[bool] = ...) -> None: ...

class HoldLeaseResponse(_message.Message):
    __slots__ = ("beat",)
    BEAT_FIELD_NUMBER: _ClassVar[int]
    beat: int
    def __init__(self, beat: _Optional[int] = ...) -> None: ...

class FollowDeviceLogRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class DeviceLogRecord(_message.Message):
    __slots__ = ("unix_time_ns", "level", "device", "message", "dropped", "source", "cycle")
    UNIX_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    unix_time_ns: int
    level: int
    device: str
    message: str
    dropped: int
    source: DeviceLogSource
    cycle: int
    def __init__(self, unix_time_ns: _Optional[int] = ..., level: _Optional[int] = ..., device: _Optional[str] = ..., message: _Optional[str] = ..., dropped: _Optional[int] = ..., source: _Optional[_Union[DeviceLogSource, str]] = ..., cycle: _Optional[int] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ("lease_ttl_ms",)
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    lease_ttl_ms: int
    def __init__(self, lease_ttl_ms: _Optional[int] = ...) -> None: ...

class CloseDeviceRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class CloseDeviceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadRegisterRequest(_message.Message):
    __slots__ = ("lease_id", "address")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    address: int
    def __init__(self, lease_id: _Optional[str] = ..., address: _Optional[int] = ...) -> None: ...

class ReadRegisterResponse(_message.Message):
    __slots__ = ("value", "cycles", "status")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    value: int
    cycles: int
    status: RegisterStatus
    def __init__(self, value: _Optional[int] = ..., cycles: _Optional[int] = ..., status: _Optional[_Union[RegisterStatus, str]] = ...) -> None: ...

class WriteRegisterRequest(_message.Message):
    __slots__ = ("lease_id", "address", "value")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    address: int
    value: int
    def __init__(self, lease_id: _Optional[str] = ..., address: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...

class WriteRegisterResponse(_message.Message):
    __slots__ = ("cycles", "status")
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    status: RegisterStatus
    def __init__(self, cycles: _Optional[int] = ..., status: _Optional[_Union[RegisterStatus, str]] = ...) -> None: ...

class RegisterRead(_message.Message):
    __slots__ = ("address",)
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    address: int
    def __init__(self, address: _Optional[int] = ...) -> None: ...

class RegisterWrite(_message.Message):
    __slots__ = ("address", "value")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    address: int
    value: int
    def __init__(self, address: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...

class RegisterMaskedWrite(_message.Message):
    __slots__ = ("address", "value", "mask")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    address: int
    value: int
    mask: int
    def __init__(self, address: _Optional[int] = ..., value: _Optional[int] = ..., mask: _Optional[int] = ...) -> None: ...

class RegisterPoll(_message.Message):
    __slots__ = ("address", "mask", "expected", "max_cycles")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    MAX_CYCLES_FIELD_NUMBER: _ClassVar[int]
    address: int
    mask: int
    expected: int
    max_cycles: int
    def __init__(self, address: _Optional[int] = ..., mask: _Optional[int] = ..., expected: _Optional[int] = ..., max_cycles: _Optional[int] = ...) -> None: ...

class RegisterOp(_message.Message):
    __slots__ = ("read", "write", "masked_write", "poll")
    READ_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    MASKED_WRITE_FIELD_NUMBER: _ClassVar[int]
    POLL_FIELD_NUMBER: _ClassVar[int]
    read: RegisterRead
    write: RegisterWrite
    masked_write: RegisterMaskedWrite
    poll: RegisterPoll
    def __init__(self, read: _Optional[_Union[RegisterRead, _Mapping]] = ..., write: _Optional[_Union[RegisterWrite, _Mapping]] = ..., masked_write: _Optional[_Union[RegisterMaskedWrite, _Mapping]] = ..., poll: _Optional[_Union[RegisterPoll, _Mapping]] = ...) -> None: ...

class RegisterResult(_message.Message):
    __slots__ = ("status", "value")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    status: RegisterStatus
    value: int
    def __init__(self, status: _Optional[_Union[RegisterStatus, str]] = ..., value: _Optional[int] = ...) -> None: ...

class RegisterBatchRequest(_message.Message):
    __slots__ = ("lease_id", "ops")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    ops: _containers.RepeatedCompositeFieldContainer[RegisterOp]
    def __init__(self, lease_id: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[RegisterOp, _Mapping]]] = ...) -> None: ...

class RegisterBatchResponse(_message.Message):
    __slots__ = ("results", "cycles")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RegisterResult]
    cycles: int
    def __init__(self, results: _Optional[_Iterable[_Union[RegisterResult, _Mapping]]] = ..., cycles: _Optional[int] = ...) -> None: ...

class WriteMemoryRequest(_message.Message):
    __slots__ = ("lease_id", "address", "length", "data")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    address: int
    length: int
    data: bytes
    def __init__(self, lease_id: _Optional[str] = ..., address: _Optional[int] = ..., length: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class WriteMemoryResponse(_message.Message):
    __slots__ = ("bytes_written",)
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    def __init__(self, bytes_written: _Optional[int] = ...) -> None: ...

class ReadMemoryRequest(_message.Message):
    __slots__ = ("lease_id", "address", "length", "chunk_size")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    address: int
    length: int
    chunk_size: int
    def __init__(self, lease_id: _Optional[str] = ..., address: _Optional[int] = ..., length: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class ReadMemoryResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class WaitInterruptRequest(_message.Message):
    __slots__ = ("lease_id", "timeout_ms", "max_cycles")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_CYCLES_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    timeout_ms: int
    max_cycles: int
    def __init__(self, lease_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., max_cycles: _Optional[int] = ...) -> None: ...

class WaitInterruptResponse(_message.Message):
    __slots__ = ("outcome", "waited_cycles", "cycles")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    WAITED_CYCLES_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    outcome: WaitOutcome
    waited_cycles: int
    cycles: int
    def __init__(self, outcome: _Optional[_Union[WaitOutcome, str]] = ..., waited_cycles: _Optional[int] = ..., cycles: _Optional[int] = ...) -> None: ...

class ResetDeviceRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class ResetDeviceResponse(_message.Message):
    __slots__ = ("cycles",)
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    def __init__(self, cycles: _Optional[int] = ...) -> None: ...

class SaveCheckpointRequest(_message.Message):
    __slots__ = ("lease_id", "wait_cycles")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_CYCLES_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    wait_cycles: int
    def __init__(self, lease_id: _Optional[str] = ..., wait_cycles: _Optional[int] = ...) -> None: ...

class SaveCheckpointResponse(_message.Message):
    __slots__ = ("data", "total_bytes", "cycles")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    total_bytes: int
    cycles: int
    def __init__(self, data: _Optional[bytes] = ..., total_bytes: _Optional[int] = ..., cycles: _Optional[int] = ...) -> None: ...

class RestoreCheckpointRequest(_message.Message):
    __slots__ = ("lease_id", "total_bytes", "data", "scope")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    total_bytes: int
    data: bytes
    scope: CheckpointScope
    def __init__(self, lease_id: _Optional[str] = ..., total_bytes: _Optional[int] = ..., data: _Optional[bytes] = ..., scope: _Optional[_Union[CheckpointScope, str]] = ...) -> None: ...

class RestoreCheckpointResponse(_message.Message):
    __slots__ = ("cycles", "saved_cycle", "scope")
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    SAVED_CYCLE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    saved_cycle: int
    scope: CheckpointScope
    def __init__(self, cycles: _Optional[int] = ..., saved_cycle: _Optional[int] = ..., scope: _Optional[_Union[CheckpointScope, str]] = ...) -> None: ...

class GetCountersRequest(_message.Message):
    __slots__ = ("device",)
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    device: str
    def __init__(self, device: _Optional[str] = ...) -> None: ...

class GetCountersResponse(_message.Message):
    __slots__ = ("cycles", "requests", "register_ops", "memory_bytes_read", "memory_bytes_written", "worker_restarts", "observer_requests")
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REGISTER_OPS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    WORKER_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    OBSERVER_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    requests: int
    register_ops: int
    memory_bytes_read: int
    memory_bytes_written: int
    worker_restarts: int
    observer_requests: int
    def __init__(self, cycles: _Optional[int] = ..., requests: _Optional[int] = ..., register_ops: _Optional[int] = ..., memory_bytes_read: _Optional[int] = ..., memory_bytes_written: _Optional[int] = ..., worker_restarts: _Optional[int] = ..., observer_requests: _Optional[int] = ...) -> None: ...

class StartWavesRequest(_message.Message):
    __slots__ = ("lease_id", "cycles", "signals")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    cycles: int
    signals: str
    def __init__(self, lease_id: _Optional[str] = ..., cycles: _Optional[int] = ..., signals: _Optional[str] = ...) -> None: ...

class StartWavesResponse(_message.Message):
    __slots__ = ("cycles",)
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    def __init__(self, cycles: _Optional[int] = ...) -> None: ...

class StopWavesRequest(_message.Message):
    __slots__ = ("lease_id",)
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    def __init__(self, lease_id: _Optional[str] = ...) -> None: ...

class WaveFile(_message.Message):
    __slots__ = ("path", "first_cycle", "last_cycle", "size_bytes")
    PATH_FIELD_NUMBER: _ClassVar[int]
    FIRST_CYCLE_FIELD_NUMBER: _ClassVar[int]
    LAST_CYCLE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    first_cycle: int
    last_cycle: int
    size_bytes: int
    def __init__(self, path: _Optional[str] = ..., first_cycle: _Optional[int] = ..., last_cycle: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class StopWavesResponse(_message.Message):
    __slots__ = ("file", "cycles")
    FILE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    file: WaveFile
    cycles: int
    def __init__(self, file: _Optional[_Union[WaveFile, _Mapping]] = ..., cycles: _Optional[int] = ...) -> None: ...

class DebugRequest(_message.Message):
    __slots__ = ("lease_id", "op", "kind", "value", "arg", "wait_stop_ms", "after_stops")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ARG_FIELD_NUMBER: _ClassVar[int]
    WAIT_STOP_MS_FIELD_NUMBER: _ClassVar[int]
    AFTER_STOPS_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    op: str
    kind: int
    value: int
    arg: int
    wait_stop_ms: int
    after_stops: int
    def __init__(self, lease_id: _Optional[str] = ..., op: _Optional[str] = ..., kind: _Optional[int] = ..., value: _Optional[int] = ..., arg: _Optional[int] = ..., wait_stop_ms: _Optional[int] = ..., after_stops: _Optional[int] = ...) -> None: ...

class DebugBreakpoint(_message.Message):
    __slots__ = ("id", "kind", "value", "arg", "hits")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ARG_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    id: int
    kind: int
    value: int
    arg: int
    hits: int
    def __init__(self, id: _Optional[int] = ..., kind: _Optional[int] = ..., value: _Optional[int] = ..., arg: _Optional[int] = ..., hits: _Optional[int] = ...) -> None: ...

class DebugState(_message.Message):
    __slots__ = ("stopped", "reason", "hit", "cycle", "decoding", "pc", "insn", "units_busy", "queues", "dma_state", "dma_src", "dma_dst", "irq", "busy", "paused_ms", "step_left")
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HIT_FIELD_NUMBER: _ClassVar[int]
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    DECODING_FIELD_NUMBER: _ClassVar[int]
    PC_FIELD_NUMBER: _ClassVar[int]
    INSN_FIELD_NUMBER: _ClassVar[int]
    UNITS_BUSY_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    DMA_STATE_FIELD_NUMBER: _ClassVar[int]
    DMA_SRC_FIELD_NUMBER: _ClassVar[int]
    DMA_DST_FIELD_NUMBER: _ClassVar[int]
    IRQ_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_LEFT_FIELD_NUMBER: _ClassVar[int]
    stopped: bool
    reason: int
    hit: int
    cycle: int
    decoding: bool
    pc: int
    insn: bytes
    units_busy: int
    queues: int
    dma_state: int
    dma_src: int
    dma_dst: int
    irq: bool
    busy: bool
    paused_ms: int
    step_left: int
    def __init__(self, stopped: _Optional[bool] = ..., reason: _Optional[int] = ..., hit: _Optional[int] = ..., cycle: _Optional[int] = ..., decoding: _Optional[bool] = ..., pc: _Optional[int] = ..., insn: _Optional[bytes] = ..., units_busy: _Optional[int] = ..., queues: _Optional[int] = ..., dma_state: _Optional[int] = ..., dma_src: _Optional[int] = ..., dma_dst: _Optional[int] = ..., irq: _Optional[bool] = ..., busy: _Optional[bool] = ..., paused_ms: _Optional[int] = ..., step_left: _Optional[int] = ...) -> None: ...

class DebugResponse(_message.Message):
    __slots__ = ("state", "breakpoints", "created", "stops", "wave")
    STATE_FIELD_NUMBER: _ClassVar[int]
    BREAKPOINTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    STOPS_FIELD_NUMBER: _ClassVar[int]
    WAVE_FIELD_NUMBER: _ClassVar[int]
    state: DebugState
    breakpoints: _containers.RepeatedCompositeFieldContainer[DebugBreakpoint]
    created: int
    stops: int
    wave: WaveFile
    def __init__(self, state: _Optional[_Union[DebugState, _Mapping]] = ..., breakpoints: _Optional[_Iterable[_Union[DebugBreakpoint, _Mapping]]] = ..., created: _Optional[int] = ..., stops: _Optional[int] = ..., wave: _Optional[_Union[WaveFile, _Mapping]] = ...) -> None: ...

class ObserveReadRegisterRequest(_message.Message):
    __slots__ = ("device", "address", "client")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    device: str
    address: int
    client: str
    def __init__(self, device: _Optional[str] = ..., address: _Optional[int] = ..., client: _Optional[str] = ...) -> None: ...

class ObserveReadRegisterResponse(_message.Message):
    __slots__ = ("value", "cycles", "status", "holder")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    value: int
    cycles: int
    status: RegisterStatus
    holder: str
    def __init__(self, value: _Optional[int] = ..., cycles: _Optional[int] = ..., status: _Optional[_Union[RegisterStatus, str]] = ..., holder: _Optional[str] = ...) -> None: ...

class ObserveRegisterBatchRequest(_message.Message):
    __slots__ = ("device", "ops", "client")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    device: str
    ops: _containers.RepeatedCompositeFieldContainer[RegisterOp]
    client: str
    def __init__(self, device: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[RegisterOp, _Mapping]]] = ..., client: _Optional[str] = ...) -> None: ...

class ObserveRegisterBatchResponse(_message.Message):
    __slots__ = ("results", "cycles", "holder")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RegisterResult]
    cycles: int
    holder: str
    def __init__(self, results: _Optional[_Iterable[_Union[RegisterResult, _Mapping]]] = ..., cycles: _Optional[int] = ..., holder: _Optional[str] = ...) -> None: ...

class ObserveStartWavesRequest(_message.Message):
    __slots__ = ("device", "cycles", "client", "signals")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    device: str
    cycles: int
    client: str
    signals: str
    def __init__(self, device: _Optional[str] = ..., cycles: _Optional[int] = ..., client: _Optional[str] = ..., signals: _Optional[str] = ...) -> None: ...

class ObserveStartWavesResponse(_message.Message):
    __slots__ = ("cycles", "holder")
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    cycles: int
    holder: str
    def __init__(self, cycles: _Optional[int] = ..., holder: _Optional[str] = ...) -> None: ...

class ObserveWavesStatusRequest(_message.Message):
    __slots__ = ("device", "client", "wait_ms")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    device: str
    client: str
    wait_ms: int
    def __init__(self, device: _Optional[str] = ..., client: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ObserveWavesStatusResponse(_message.Message):
    __slots__ = ("state", "first_cycle", "cycles", "holder")
    STATE_FIELD_NUMBER: _ClassVar[int]
    FIRST_CYCLE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    state: ObserverWindowState
    first_cycle: int
    cycles: int
    holder: str
    def __init__(self, state: _Optional[_Union[ObserverWindowState, str]] = ..., first_cycle: _Optional[int] = ..., cycles: _Optional[int] = ..., holder: _Optional[str] = ...) -> None: ...

class ObserveStopWavesRequest(_message.Message):
    __slots__ = ("device", "client")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    device: str
    client: str
    def __init__(self, device: _Optional[str] = ..., client: _Optional[str] = ...) -> None: ...

class ObserveStopWavesResponse(_message.Message):
    __slots__ = ("file", "cycles", "state")
    FILE_FIELD_NUMBER: _ClassVar[int]
    CYCLES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    file: WaveFile
    cycles: int
    state: ObserverWindowState
    def __init__(self, file: _Optional[_Union[WaveFile, _Mapping]] = ..., cycles: _Optional[int] = ..., state: _Optional[_Union[ObserverWindowState, str]] = ...) -> None: ...
