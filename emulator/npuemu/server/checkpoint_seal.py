"""The seal of a checkpoint: which server made it, so that a shared server restores only
model states it can vouch for.

A checkpoint's model state is Verilator's serialisation of every flop of the simulated
NPU. That format was never meant to be read from untrusted files, and a state edited by a
tenant could steer the device of every later holder. So a server seals every checkpoint it
takes (HMAC-SHA256 with its key over the file's sha256 digest) and restores a model state
only under a seal of its own key; any other checkpoint restores its memories and
configuration registers only (`CheckpointScope.PORTABLE`), or its whole state on a server
started with ``--allow-foreign-checkpoints`` (one user's own server).

The key is random per server process by default (a checkpoint restores whole on the server
that took it, while it runs). The servers of a farm share one with
``--checkpoint-key-file FILE`` (at least 32 random bytes, readable by its owner only):
``head -c 32 /dev/urandom > npu-emu.key && chmod 600 npu-emu.key``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KEY_ID_HEX", "MIN_KEY_BYTES", "SEAL_BYTES", "SealKey", "SealKeyError"]

SEAL_BYTES = 32  # HMAC-SHA256
MIN_KEY_BYTES = 32
MAX_KEY_BYTES = 4096
KEY_ID_HEX = 16  # the key id's hex digits: names a key in messages, reveals nothing of it
_DOMAIN = b"npu-emu checkpoint seal v1\0"


class SealKeyError(ValueError):
    """A key file that cannot be used (the message names the file and why)."""


@dataclass(frozen=True, repr=False)
class SealKey:
    """A server's checkpoint key. `key_id` names it in files and messages."""

    secret: bytes
    origin: str  # "generated" or the key file's path, for messages

    @property
    def key_id(self) -> str:
        return hmac.new(self.secret, b"npu-emu key id", hashlib.sha256).hexdigest()[:KEY_ID_HEX]

    def seal(self, digest: bytes) -> bytes:
        """The seal of a checkpoint whose body has the sha256 `digest`."""
        return hmac.new(self.secret, _DOMAIN + digest, hashlib.sha256).digest()

    def verifies(self, digest: bytes, seal: bytes) -> bool:
        return hmac.compare_digest(self.seal(digest), seal)

    def __repr__(self) -> str:  # never the secret
        return f"SealKey(key_id={self.key_id}, origin={self.origin})"

    @classmethod
    def generate(cls) -> SealKey:
        """A new random key (a server without ``--checkpoint-key-file``)."""
        return cls(secrets.token_bytes(MIN_KEY_BYTES), "generated")

    @classmethod
    def from_file(cls, path: Path) -> SealKey:
        """The key in `path`: its bytes as they are (at least `MIN_KEY_BYTES`). The file
        must be a regular file that no one but its owner can read or write.

        Raises:
            SealKeyError: the file is missing, too short or long, or open to others.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise SealKeyError(f"checkpoint key file {path}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SealKeyError(f"checkpoint key file {path} is not a regular file")
            if st.st_mode & 0o077:
                raise SealKeyError(
                    f"checkpoint key file {path} is open to others (mode "
                    f"{stat.S_IMODE(st.st_mode):04o}): chmod 600 {path}"
                )
            secret = os.read(fd, MAX_KEY_BYTES + 1)
        finally:
            os.close(fd)
        if not MIN_KEY_BYTES <= len(secret) <= MAX_KEY_BYTES:
            raise SealKeyError(
                f"checkpoint key file {path} holds {len(secret)} bytes; a key is "
                f"{MIN_KEY_BYTES} to {MAX_KEY_BYTES} random bytes "
                f"(head -c 32 /dev/urandom > {path})"
            )
        return cls(secret, str(path))
