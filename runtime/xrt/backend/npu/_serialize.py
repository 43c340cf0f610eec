"""Compiled programs as bytes: what a session snapshot and a ``HardOp`` parameter hold.

Layout: the magic ``b"XRTNPU1\\n"``, a little-endian u32 header length, the header (UTF-8
JSON: base register roles, input/output bindings, scratch size, block, op ids, per-layer
report, placement of the intermediates, sizes and SHA-256 of the two payloads), then the
encoded instructions, then the constant blob. Everything is checked on the way back: a
damaged program is XrtError 11011 naming what is wrong, never a program that runs
differently.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

from xrt.errors import ErrorCode, XrtError
from xrt.hw import isa
from xrt.npu.compiler import BaseRole, LayerReport, NpuProgram, TensorBinding, TensorPlacement

__all__ = ["program_from_bytes", "program_to_bytes"]

MAGIC = b"XRTNPU1\n"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def program_to_bytes(prog: NpuProgram) -> bytes:
    """The program, self-describing and checksummed."""
    code = prog.encode()
    header = {
        "bases": [dataclasses.asdict(b) for b in prog.bases],
        "inputs": [dataclasses.asdict(b) for b in prog.inputs],
        "outputs": [dataclasses.asdict(b) for b in prog.outputs],
        "scratch_bytes": prog.scratch_bytes,
        "layers": [dataclasses.asdict(layer) for layer in prog.layers],
        "block": prog.block,
        "op_ids": list(prog.op_ids),
        "estimated_cycles": prog.estimated_cycles,
        "intermediates": [dataclasses.asdict(p) for p in prog.intermediates],
        "code": [len(code), _digest(code)],
        "constants": [len(prog.constants), _digest(prog.constants)],
    }
    head = json.dumps(header, sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + code + prog.constants


def program_from_bytes(blob: bytes, what: str = "program") -> NpuProgram:
    """Rebuild a program written by `program_to_bytes`.

    Raises:
        XrtError: 11011 naming `what` and the problem.
    """

    def bad(why: str) -> XrtError:
        return XrtError(ErrorCode.LOAD_FAILED, f"{what}: not a valid NPU program: {why}")

    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 4:
        raise bad("wrong magic")
    (n,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(blob[start : start + n])
        code_len, code_sha = header["code"]
        const_len, const_sha = header["constants"]
    except (ValueError, KeyError, TypeError) as exc:
        raise bad(f"unreadable header ({exc})") from None
    body = blob[start + n :]
    if len(body) != code_len + const_len:
        raise bad(f"{len(body)} payload bytes, the header says {code_len + const_len}")
    code, consts = body[:code_len], body[code_len:]
    if _digest(code) != code_sha or _digest(consts) != const_sha:
        raise bad("SHA-256 mismatch")
    try:
        instructions = isa.decode_program(code)
        return NpuProgram(
            instructions,
            consts,
            [BaseRole(**b) for b in header["bases"]],
            [TensorBinding(**{**b, "shape": tuple(b["shape"])}) for b in header["inputs"]],
            [TensorBinding(**{**b, "shape": tuple(b["shape"])}) for b in header["outputs"]],
            int(header["scratch_bytes"]),
            [LayerReport(**layer) for layer in header["layers"]],
            int(header["block"]),
            [int(i) for i in header["op_ids"]],
            header["estimated_cycles"],
            [
                TensorPlacement(**{**p, "shape": tuple(p["shape"])})
                for p in header.get("intermediates", [])
            ],
        )
    except XrtError as exc:
        raise bad(exc.message) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise bad(f"malformed header ({exc})") from None
