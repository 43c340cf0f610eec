"""Gate the per-register logic of PeakRDL-regblock's output on a request being present.

PeakRDL-regblock decodes the address and builds the read-back word in ``always_comb`` blocks
over every register. A verilated model evaluates all combinational logic at every clock
edge, whether a register is accessed or not, so the CSR blocks cost hundreds of statements
per simulated cycle while the bus is idle. Both blocks produce nothing useful without a
request: every decode strobe is ANDed with ``cpuif_req_masked``, and the read-back word is
used only with ``readback_done`` (a read request). Wrapping their bodies in an ``if`` on the
request leaves the block's behaviour at its ports unchanged (the register tests and the
bus protocol checks run on the gated RTL) and lets the model skip them between accesses.
"""

from __future__ import annotations

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
    text = _wrap(
        text,
        _READBACK_START,
        _READBACK_END,
        "        if (decoded_req && !decoded_req_is_wr) begin\n",
        "read-back",
    )
    path.write_text(text)
