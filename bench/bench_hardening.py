"""Figures of the server's hardening (issue 8), measured in one run on real processes:

- fuzz: requests of a longer structure-aware fuzz run per seed (tests/emulator/rpc_fuzz.py:
  every RPC, raw bytes and TCP garbage), how many were accepted on a valid lease, crashes,
  hangs, changes to the bystander device, and outages: probes (every --probe-every
  requests) in which a fresh client could not open and read the fuzzed device in 30 s;
- kill: clients SIGKILLed in the middle of a 4 MiB DMA into plddr; trials whose next holder
  found all of plddr[0, 4 MiB) and udma zero; seconds until the device was leasable again;
- tls: register round trip (ReadRegister) over plain gRPC and over TLS, same run (median);
- retry: the same round trip on a channel with the runtime's gRPC retry policy
  (xrt.transport.grpc.retry.SERVICE_CONFIG) and without, same server, interleaved;
- shutdown: seconds from SIGTERM to the server's exit with a poll of 2**40 cycles in flight
  (--drain 0 --shutdown-grace 1), and the status the poll's client got.

Usage: python bench/bench_hardening.py [--fuzz 5000] [--seeds 1,2] [--probe-every 300]
                                       [--kills 20] [--reads 2000]
                                       [--only tls,retry,shutdown,kill,fuzz]
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "emulator"))

from rpc_client import NPU_BASE, PLDDR_BASE, UDMA_BASE, connect  # noqa: E402
from rpc_fuzz import RpcFuzzer, prepare_b  # noqa: E402
from test_hardening import KILLED_CLIENT, dma_and_wait  # noqa: E402

from npuemu.server.launch import ServerProcess  # noqa: E402
from xrt.hw.wire import pb, pb_grpc  # noqa: E402


def fuzz(count: int, seeds: list[int], probe_every: int) -> None:
    """`count` requests per seed, one server per seed, npu0 probed every `probe_every`."""
    for seed in seeds:
        with ServerProcess.start(devices=2, watchdog_s=10.0) as srv:
            a, b, p = connect(srv), connect(srv), connect(srv)
            a.open(device="npu0", client="fuzz-a")
            prepare_b(b)
            f = RpcFuzzer(a, b, seed, probe=p)
            t0 = time.monotonic()
            try:
                rep = f.run(count, probe_every=probe_every)
            except AssertionError:
                print(f"fuzz seed {seed} stopped; the server's log ends:\n{srv.log[-4000:]}")
                raise
            changed = f.other_device_changed()
            print(
                f"fuzz seed {seed}: {rep.requests} requests in {time.monotonic() - t0:.0f} s, "
                f"{rep.accepted_valid_lease} accepted on a valid lease, {len(rep.crashes)} "
                f"crashes, {len(rep.hangs)} hangs, other device changed: {changed}, "
                f"{rep.probes} probes, {len(rep.outages)} outages, "
                f"server tracebacks: {srv.log.count('Traceback')}",
                flush=True,
            )
            for what in (rep.crashes[:5], rep.hangs[:5], rep.outages[:5], rep.slow[:10]):
                if what:
                    print("  ", what, flush=True)
            top = ", ".join(f"{k} {v}" for k, v in rep.statuses.most_common(8))
            print(f"   most frequent statuses: {top}", flush=True)


def kills(trials: int) -> None:
    n = 4 << 20
    clean, leasable = 0, []
    with ServerProcess.start(devices=1) as srv:
        script = KILLED_CLIENT.format(
            tests=str(HERE.parent / "tests" / "emulator"), address=srv.address, n=n
        )
        for _ in range(trials):
            proc = subprocess.Popen(
                [sys.executable, "-c", script],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
            proc.send_signal(signal.SIGKILL)
            t0 = time.monotonic()
            proc.wait()
            b = connect(srv)
            while True:
                try:
                    b.open(device="npu0", client="next")
                    break
                except grpc.RpcError:
                    time.sleep(0.01)
            leasable.append(time.monotonic() - t0)
            ok = b.read_mem(UDMA_BASE, n) == bytes(n)
            dma_and_wait(b, PLDDR_BASE, UDMA_BASE, n)
            ok = ok and b.read_mem(UDMA_BASE, n) == bytes(n)
            clean += ok
            b.close()
            b.channel.close()
    print(
        f"kill: {clean}/{trials} client-SIGKILL-mid-DMA trials with udma and all 4 MiB of plddr "
        f"touched clean; leasable again after median {statistics.median(leasable) * 1000:.0f} ms "
        f"(max {max(leasable) * 1000:.0f} ms)"
    )


def _pki(folder: Path) -> tuple[Path, Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(name("127.0.0.1"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    c, k = folder / "s.crt", folder / "s.key"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return c, k, c


def tls(reads: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cert, key, ca = _pki(Path(tmp))
        args = ("--tls-cert", str(cert), "--tls-key", str(key))
        with (
            ServerProcess.start(devices=1) as plain,
            ServerProcess.start(extra_args=args) as secure,
        ):
            channels = {
                "plain": grpc.insecure_channel(plain.address),
                "tls": grpc.secure_channel(
                    secure.address, grpc.ssl_channel_credentials(ca.read_bytes())
                ),
            }
            times: dict[str, list[float]] = {k: [] for k in channels}
            stubs = {k: pb_grpc.DeviceServiceStub(c) for k, c in channels.items()}
            leases = {
                k: s.OpenDevice(pb.OpenDeviceRequest(client="bench", protocol_version=1)).lease_id
                for k, s in stubs.items()
            }
            for i in range(reads * 2):  # interleaved: the same machine load for both
                k = "plain" if i % 2 == 0 else "tls"
                t0 = time.perf_counter()
                stubs[k].ReadRegister(pb.ReadRegisterRequest(lease_id=leases[k], address=NPU_BASE))
                times[k].append(time.perf_counter() - t0)
            for c in channels.values():
                c.close()
    p, t = statistics.median(times["plain"]), statistics.median(times["tls"])
    print(
        f"tls: register round trip median plain {p * 1e6:.0f} us, "
        f"TLS {t * 1e6:.0f} us, ratio {t / p:.2f}"
    )


def retry(reads: int) -> None:
    from xrt.transport.grpc.retry import SERVICE_CONFIG

    with ServerProcess.start(devices=2) as srv:
        channels = {
            "plain": grpc.insecure_channel(srv.address),
            "policy": grpc.insecure_channel(
                srv.address, options=[("grpc.service_config", SERVICE_CONFIG)]
            ),
        }
        stubs = {k: pb_grpc.DeviceServiceStub(c) for k, c in channels.items()}
        leases = {
            k: s.OpenDevice(pb.OpenDeviceRequest(client="bench", protocol_version=1)).lease_id
            for k, s in stubs.items()
        }
        times: dict[str, list[float]] = {k: [] for k in channels}
        for i in range(reads * 2):
            k = "plain" if i % 2 == 0 else "policy"
            t0 = time.perf_counter()
            stubs[k].ReadRegister(pb.ReadRegisterRequest(lease_id=leases[k], address=NPU_BASE))
            times[k].append(time.perf_counter() - t0)
        for c in channels.values():
            c.close()
    p, r = statistics.median(times["plain"]), statistics.median(times["policy"])
    print(
        f"retry: register round trip median without retry policy {p * 1e6:.0f} us, "
        f"with {r * 1e6:.0f} us, ratio {r / p:.2f}"
    )


def shutdown(trials: int = 3) -> None:
    poll = pb.RegisterOp(
        poll=pb.RegisterPoll(address=NPU_BASE, mask=0xFFFF_FFFF, expected=0, max_cycles=1 << 40)
    )
    took, codes = [], set()
    for _ in range(trials):
        srv = ServerProcess.start(extra_args=("--drain", "0", "--shutdown-grace", "1"))
        try:
            c = connect(srv)
            c.open()
            before = c.stub.GetCounters(pb.GetCountersRequest(device="npu0")).requests
            call = c.stub.RegisterBatch.future(
                pb.RegisterBatchRequest(lease_id=c.lease, ops=[poll])
            )
            while c.stub.GetCounters(pb.GetCountersRequest(device="npu0")).requests == before:
                time.sleep(0.01)
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            srv.proc.wait(300)
            took.append(time.monotonic() - t0)
            exc = call.exception(60)
            codes.add(f"{exc.code().name}: {exc.details()[:60]}" if exc else "OK")
            c.channel.close()
        finally:
            srv.stop()
    print(
        f"shutdown: SIGTERM to exit with a 2**40-cycle poll in flight (drain 0, grace 1 s): "
        f"median {statistics.median(took):.1f} s of {trials}; the poll got {sorted(codes)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuzz", type=int, default=5000, help="requests per seed")
    ap.add_argument("--seeds", default="1", help="comma-separated fuzz seeds, one server each")
    ap.add_argument("--probe-every", type=int, default=300, help="requests between probes")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--only", default="tls,retry,shutdown,kill,fuzz")
    a = ap.parse_args()
    os.environ.pop("NPU_EMU_TOKEN", None)
    parts = a.only.split(",")
    if "tls" in parts:
        tls(a.reads)
    if "retry" in parts:
        retry(a.reads)
    if "shutdown" in parts:
        shutdown()
    if "kill" in parts:
        kills(a.kills)
    if "fuzz" in parts:
        fuzz(a.fuzz, [int(x) for x in a.seeds.split(",")], a.probe_every)


if __name__ == "__main__":
    main()
