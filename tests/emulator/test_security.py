"""Token and transport security of `npu-emu serve` (issue 8): the token from the environment
or a file (never on the command line), TLS and mutual TLS with certificates made here, no
plain unauthenticated serving on a non-loopback address, a busy port is an error, and a
client can wait for a leased device. Real servers on loopback ports."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from rpc_client import NPU_BASE, connect

from npuemu.server.launch import ServerProcess
from xrt import Device
from xrt.errors import XrtError
from xrt.hw.wire import pb

pytestmark = pytest.mark.sim

MAGIC = 0x4E50_5530


# ---------------------------------------------------------------------------- certificates
def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool, san: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        b = b.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return b.sign(issuer_key, hashes.SHA256())


def _write(folder: Path, name: str, cert: x509.Certificate, key) -> tuple[Path, Path]:
    c, k = folder / f"{name}.crt", folder / f"{name}.key"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    k.chmod(0o600)
    return c, k


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, all
    signed by that CA, plus a second CA that signed nothing here."""
    folder = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("npu-emu test CA", ca_key, "npu-emu test CA", ca_key, ca=True, san=False)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert("someone else", other_key, "someone else", other_key, ca=True, san=False)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("127.0.0.1", srv_key, "npu-emu test CA", ca_key, ca=False, san=True)
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("ci-client", cli_key, "npu-emu test CA", ca_key, ca=False, san=False)
    paths: dict[str, Path] = {}
    paths["ca"], _ = _write(folder, "ca", ca, ca_key)
    paths["other_ca"], _ = _write(folder, "other", other, other_key)
    paths["server_cert"], paths["server_key"] = _write(folder, "server", srv, srv_key)
    paths["client_cert"], paths["client_key"] = _write(folder, "client", cli, cli_key)
    return paths


def read_magic(url: str) -> int:
    dev = Device.open(url)
    try:
        return dev.transport.reg_region("npu").read(NPU_BASE)
    finally:
        dev.close()


# ---------------------------------------------------------------------------- TLS
def test_tls_and_mutual_tls(pki):
    ca, port_url = pki["ca"], "grpcs://127.0.0.1:{port}?ca={ca}"
    tls = ("--tls-cert", str(pki["server_cert"]), "--tls-key", str(pki["server_key"]))
    with ServerProcess.start(extra_args=tls) as srv:
        assert "TLS" in srv.log
        assert read_magic(port_url.format(port=srv.port, ca=ca)) == MAGIC
        with pytest.raises(XrtError):  # a server certificate from another CA is refused
            read_magic(port_url.format(port=srv.port, ca=pki["other_ca"]))
        plain = connect(srv)  # plain gRPC cannot talk to a TLS port
        with pytest.raises(grpc.RpcError) as info:
            plain.stub.ListDevices(pb.ListDevicesRequest(), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        plain.channel.close()
    mutual = (*tls, "--tls-client-ca", str(ca))
    with ServerProcess.start(extra_args=mutual) as srv:
        assert "mutual TLS" in srv.log
        with pytest.raises(XrtError):  # no client certificate
            read_magic(port_url.format(port=srv.port, ca=ca))
        url = port_url.format(port=srv.port, ca=ca)
        url += f"&cert={pki['client_cert']}&key={pki['client_key']}"
        assert read_magic(url) == MAGIC


def test_non_loopback_without_token_or_tls_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NPU_EMU_TOKEN"}
    r = subprocess.run(
        [sys.executable, "-m", "npuemu.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and "refusing to serve 0.0.0.0" in r.stderr, r.stderr


# ---------------------------------------------------------------------------- token
def test_token_from_a_file_is_never_on_the_command_line(tmp_path):
    secret = "file-token-7f3a"
    token_file = tmp_path / "token"
    token_file.write_text(secret + "\n")
    token_file.chmod(0o600)
    with ServerProcess.start(extra_args=("--token-file", str(token_file))) as srv:
        cmdline = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes()
        assert secret.encode() not in cmdline
        c = connect(srv, secret)
        c.open()
        assert c.read(NPU_BASE) == MAGIC
        c.close()
        c.channel.close()
        anon = connect(srv)
        with pytest.raises(grpc.RpcError) as info:
            anon.open()
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        anon.channel.close()
    assert secret not in srv.log


def test_token_from_the_environment_is_never_on_the_command_line():
    with ServerProcess.start(token="env-token-19c2") as srv:
        assert b"env-token-19c2" not in Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes()
        c = connect(srv, "env-token-19c2")
        c.open()
        assert c.read(NPU_BASE) == MAGIC
        c.close()
        c.channel.close()


# ---------------------------------------------------------------------------- ports, waiting
def test_a_busy_port_is_an_error():
    with ServerProcess.start() as srv:
        r = subprocess.run(
            [sys.executable, "-m", "npuemu.cli", "serve", "--port", str(srv.port)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 2, r.stdout + r.stderr
        assert "cannot listen" in r.stderr
        # ... and the first server still has all the clients.
        c = connect(srv)
        assert len(c.stub.ListDevices(pb.ListDevicesRequest()).devices) == 1
        c.channel.close()


def test_open_can_wait_for_a_leased_device():
    with ServerProcess.start() as srv:
        holder = connect(srv)
        holder.open(device="npu0")
        got: dict[str, object] = {}

        def waiter() -> None:
            try:
                got["magic"] = read_magic(f"grpc://{srv.address}/npu0?wait=60")
            except XrtError as exc:
                got["magic"] = exc

        t = threading.Thread(target=waiter)
        t.start()
        # The waiter is refused (the device is leased) until the holder lets go.
        assert t.is_alive()
        holder.close()
        t.join(90)
        assert got["magic"] == MAGIC
        holder.open(device="npu0")
        with pytest.raises(XrtError) as info:  # no wait: refused at once
            read_magic(f"grpc://{srv.address}/npu0")
        assert info.value.code == 11012
        holder.close()
        holder.channel.close()


def test_the_runtime_rides_out_a_worker_restart():
    """A call that meets a worker restart (UNAVAILABLE, marked retryable) is retried by the
    runtime within a bounded budget instead of failing: the register answers once the new
    worker is up."""
    with ServerProcess.start() as srv:
        dev = Device.open(f"grpc://{srv.address}/npu0")
        try:
            npu = dev.transport.reg_region("npu")
            assert npu.read(NPU_BASE) == MAGIC
            watcher = connect(srv)
            pid = int(re.findall(r"worker npu0 ready \(pid (\d+)\)", srv.log)[-1])
            os.kill(pid, signal.SIGKILL)

            def restarting() -> bool:  # or already restarted, on a very slow poll
                devices = watcher.stub.ListDevices(pb.ListDevicesRequest()).devices
                return devices[0].state == pb.DEVICE_STATE_RESTARTING or (
                    f"(pid {pid})" not in srv.log.rsplit("worker npu0 ready", 1)[-1]
                )

            deadline = time.monotonic() + 60
            while not restarting():  # the server notices the idle worker's death itself
                assert time.monotonic() < deadline, "the server did not notice the dead worker"
                time.sleep(0.02)
            assert npu.read(NPU_BASE) == MAGIC  # retried until the new worker answers
            watcher.channel.close()
        finally:
            dev.close()
