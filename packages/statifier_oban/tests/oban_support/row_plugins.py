"""Plug-ins for the trusted-rows tests (``test_trusted_rows``), allowed as a host's module is.

* ``ConstructionRecorder``: not a delivery (no ``deliver``), and its constructor records
  that it ran: a worker must refuse it without ever building one.
* ``ZlibCodec``: decompresses whatever it is given (an unbounded codec).
* ``BoundedZlibCodec``: decompresses at most ``max_size`` bytes, as the ``OpaqueCodec``
  protocol asks of codecs that expand their input; it records the caps it was given.
"""

from __future__ import annotations

import zlib
from typing import ClassVar

from statifier.core.effects import SendDelayed
from statifier_oban import Delivered
from statifier_oban.rows import _resolve


class ConstructionRecorder:
    """Counts its constructions; offers ``send``, not ``deliver``."""

    built: ClassVar[list[int]] = []

    def __init__(self) -> None:
        ConstructionRecorder.built.append(1)

    def send(self, scope: str, effect: SendDelayed) -> Delivered:
        """Not the delivery callback."""
        return Delivered()


class ZlibCodec:
    """zlib, with no bound on what ``decode`` produces."""

    def encode(self, data: bytes) -> bytes:
        """Compress."""
        return zlib.compress(data)

    def decode(self, data: bytes) -> bytes:
        """Decompress everything."""
        return zlib.decompress(data)


class BoundedZlibCodec:
    """zlib that stops one byte past ``max_size`` (so an oversized value shows as such)."""

    caps: ClassVar[list[int]] = []

    def encode(self, data: bytes) -> bytes:
        """Compress."""
        return zlib.compress(data)

    def decode(self, data: bytes, *, max_size: int) -> bytes:
        """Decompress at most ``max_size + 1`` bytes."""
        BoundedZlibCodec.caps.append(max_size)
        return zlib.decompressobj().decompress(data, max_size + 1)


_resolve.allow_module(__name__)
