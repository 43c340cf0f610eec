"""Gate the per-register logic of PeakRDL-regblock's output on a request being present.

PeakRDL-regblock decodes the address and builds the read-back word in ``always_comb`` blocks
over every register. A verilated model evaluates all combinational logic at every clock
edge, whether a register is accessed or not, so the CSR blocks cost hundreds of statements
per simulated cycle while the bus is idle. Both blocks produce nothing useful without a
request: every decode strobe is ANDed with ``cpuif_req_masked``, and the read-back word is
used only with ``readback_done`` (a read request). Wrapping their bodies in an ``if`` on the
request leaves the block's behaviour at its ports unchanged (the register tests and the
bus protocol checks run on the gated RTL) and lets the model skip them between accesses.

The decode is also rewritten as a ``case`` on the address: Verilator's dataflow optimizer
turns an ``if`` over plain assignments (PeakRDL's form: one comparison per register, ANDed
with the request) back into logic evaluated every cycle, but leaves a ``case`` alone. Each
register's three statements (its strobe, ``is_valid_addr``, ``is_valid_rw``) become one
item of its address, with the same values: inside the ``if`` the request is true.
"""

from __future__ import annotations

import re
from pathlib import Path

_DECODE_START = "        is_valid_rw = '0;\n"
_DECODE_END = "        decoded_err = "
_READBACK_START = "        readback_data_var = '0;\n"
_READBACK_END = "        readback_data = readback_data_var;\n"


def _indent(body: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in body.splitlines(True))


def _wrap(text: str, start: str, end: str, head: str, what: str) -> str:
    """Wrap the lines between `start` (kept before) and `end` (kept after) in `head`...end."""
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i < 0 or j < 0 or text.count(start) != 1:
        raise SystemExit(f"tools/csr_gate.py: PeakRDL-regblock's {what} block changed shape")
    i += len(start)
    return f"{text[:i]}{head}{_indent(text[i:j])}        end\n{text[j:]}"


_STRB = re.compile(
    r"^ +decoded_reg_strb\.(\w+) = cpuif_req_masked & \(cpuif_addr == (\d+'h[0-9a-f]+)\)"
    r"( & !?cpuif_req_is_wr)?;$"
)
_VALID_ADDR = re.compile(
    r"^ +is_valid_addr \|= cpuif_req_masked & \(cpuif_addr == (\d+'h[0-9a-f]+)\);$"
)
_VALID_RW = re.compile(
    r"^ +is_valid_rw \|= cpuif_req_masked & \(cpuif_addr == (\d+'h[0-9a-f]+)\)"
    r"( & !?cpuif_req_is_wr)?;$"
)


def _decode_as_case(text: str) -> str:
    """Rewrite the (already gated) decode statements into one ``case`` item per address."""
    head = "        if (cpuif_req_masked) begin\n"
    i = text.index(head, text.index(_DECODE_START)) + len(head)
    j = text.index("        end\n", i)
    lines = text[i:j].splitlines()
    if not lines or len(lines) % 3:
        raise SystemExit("tools/csr_gate.py: PeakRDL-regblock's address decode changed shape")
    items: dict[str, list[str]] = {}
    for k in range(0, len(lines), 3):
        strb, valid_addr, valid_rw = (
            _STRB.match(lines[k]),
            _VALID_ADDR.match(lines[k + 1]),
            _VALID_RW.match(lines[k + 2]),
        )
        if not (strb and valid_addr and valid_rw):
            raise SystemExit(f"tools/csr_gate.py: unexpected decode statement near {lines[k]!r}")
        addr = strb.group(2)
        if (
            valid_addr.group(1) != addr
            or valid_rw.group(1) != addr
            or strb.group(3) != valid_rw.group(2)
        ):
            raise SystemExit(f"tools/csr_gate.py: inconsistent decode statements near {lines[k]!r}")
        access = strb.group(3)[3:] if strb.group(3) else "1'b1"
        items.setdefault(addr, []).extend(
            [
                f"decoded_reg_strb.{strb.group(1)} = {access};",
                "is_valid_addr = 1'b1;",
                f"is_valid_rw |= {access};",
            ]
        )
    out = ["            case (cpuif_addr)"]
    for addr, stmts in items.items():
        out.append(f"                {addr}: begin")
        out += [f"                    {st}" for st in dict.fromkeys(stmts)]
        out.append("                end")
    out += ["                default: ;", "            endcase"]
    return text[:i] + "\n".join(out) + "\n" + text[j:]


def gate_csr_rtl(path: Path) -> None:
    """Rewrite a generated ``<block>_csr.sv`` in place with its decode and read-back gated."""
    text = path.read_text()
    text = _wrap(
        text,
        _DECODE_START,
        _DECODE_END,
        "        decoded_reg_strb = '{default: '0};\n        if (cpuif_req_masked) begin\n",
        "address decode",
    )
    text = _decode_as_case(text)
    text = _wrap(
        text,
        _READBACK_START,
        _READBACK_END,
        "        if (decoded_req && !decoded_req_is_wr) begin\n",
        "read-back",
    )
    path.write_text(text)
