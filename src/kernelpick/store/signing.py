"""Signed rows: only rows signed with the secret of `KERNELPICK_STORE_KEY_FILE` are read."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

from kernelpick.errors import StoreError
from kernelpick.store.keys import canonical_json

#: The fewest bytes a secret has: a shorter one is guessed.
MIN_SECRET_BYTES = 16
#: The most bytes of the file read.
MAX_SECRET_BYTES = 4096


class Signer:
    """Signs plain data with HMAC-SHA256 of its canonical JSON, and checks such signatures."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        """The signer of the secret in the file at `path` (its bytes, without the line end after them).

        Raises:
            StoreError: the file cannot be read, or holds fewer than `MIN_SECRET_BYTES` bytes.
        """
        try:
            with open(path, "rb") as stream:
                secret = stream.read(MAX_SECRET_BYTES).rstrip(b"\r\n")
        except OSError as error:
            raise StoreError(f"KERNELPICK_STORE_KEY_FILE={path} cannot be read: {error.strerror}") from None
        if len(secret) < MIN_SECRET_BYTES:
            raise StoreError(
                f"KERNELPICK_STORE_KEY_FILE={path} holds {len(secret)} bytes; a secret has at least "
                f"{MIN_SECRET_BYTES}: e.g. python -c 'import secrets; print(secrets.token_hex(32))' > {path}"
            )
        return cls(secret)

    def sign(self, data: Any) -> str:
        """The signature of `data` (JSON-able), as hex digits."""
        return hmac.new(self._secret, canonical_json(data).encode(), hashlib.sha256).hexdigest()

    def signed(self, data: Any, signature: Any) -> bool:
        """Whether `signature` (as read: of any type) is `data`'s."""
        return isinstance(signature, str) and hmac.compare_digest(signature, self.sign(data))
