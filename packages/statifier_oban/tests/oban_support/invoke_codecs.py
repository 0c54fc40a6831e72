"""Opaque codecs of the invoke tests, named on job rows as ``oban_support.invoke_codecs:Name``.

oban's worker resolves a codec path on every decode and, for a class, builds a fresh
instance, so nothing here keeps state.
"""

from __future__ import annotations

import os

from statifier_oban.rows import _resolve

KEY = 0x5A


def xor(data: bytes, key: int = KEY) -> bytes:
    """Every byte xor-ed with ``key`` (its own inverse)."""
    return bytes(byte ^ key for byte in data)


class XorCodec:
    """Deterministic: the same plain bytes always encode to the same stored bytes."""

    def encode(self, data: bytes) -> bytes:
        """Xor with the fixed key."""
        return xor(data)

    def decode(self, data: bytes) -> bytes:
        """Xor with the fixed key."""
        return xor(data)


class NondeterministicXorCodec:
    """A random one-byte nonce per encode (like an AEAD nonce): encodings differ every time."""

    def encode(self, data: bytes) -> bytes:
        """Nonce byte, then the bytes xor-ed with it."""
        nonce = os.urandom(1)[0] | 1  # never 0, so the bytes always change
        return bytes([nonce]) + xor(data, nonce)

    def decode(self, data: bytes) -> bytes:
        """Read the nonce back, xor the rest with it."""
        return xor(data[1:], data[0])


class BoomCodec:
    """Fails at encode: an enqueue through it must store nothing."""

    def encode(self, data: bytes) -> bytes:
        """Always raises."""
        raise RuntimeError("boom: the key service is down")

    def decode(self, data: bytes) -> bytes:
        """Never reached: nothing was ever encoded."""
        raise AssertionError("BoomCodec.decode must not be called")


class DecodeFailsCodec:
    """Encodes fine, fails at decode: a deploy-shaped fault, so the job must retry."""

    def encode(self, data: bytes) -> bytes:
        """Xor with the fixed key."""
        return xor(data)

    def decode(self, data: bytes) -> bytes:
        """Always raises."""
        raise RuntimeError("the decryption key was rotated away")


# What ``statifier-oban worker --module`` does for a host module: job rows may name the
# classes defined here (ADR 13). Tests of refusals name classes of other modules.
_resolve.allow_module(__name__)
