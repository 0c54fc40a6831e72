"""Host-opaque fields (``data``, ``caller_context``): stored forms, codecs, the row's tag.

Spec 2.14 as ported: no codec stores ``{"json": "<compact text>"}``; a codec stores
``{"codec": "<path>", "b64": "<base64 of codec.encode(text)>"}``; None stays None and never
reaches a codec; the tag on the row decides how it decodes.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban import OpaqueCodec
from statifier_oban._errors import CodecFailed, OpaqueValueError, UndecodableRow
from statifier_oban.rows import _resolve
from statifier_oban.rows._opaque import decode_field, encode_field
from statifier_oban.timers import _args
from statifier_oban.timers._schedule import cancel_timers, schedule

from oban_support.effects_factory import (
    all_jobs,
    cancel_effect,
    make_config,
    raw_args,
    send_delayed,
)

SCOPE = "session-1"
VALUE: Any = {"z": [0.1, -0.0, 2**70], "a": "é🎉", "n": None, "t": True}
VALUE_TEXT = '{"z":[0.1,-0.0,1180591620717411303424],"a":"é🎉","n":null,"t":true}'


def xor(data: bytes) -> bytes:
    return bytes(b ^ 0x5A for b in data)


class XorCodec:
    """A deterministic codec: XOR every byte."""

    def encode(self, data: bytes) -> bytes:
        return xor(data)

    def decode(self, data: bytes) -> bytes:
        return xor(data)


class NonceCodec:
    """A nondeterministic codec: a random 8-byte nonce, then the XORed bytes."""

    def encode(self, data: bytes) -> bytes:
        return os.urandom(8) + xor(data)

    def decode(self, data: bytes) -> bytes:
        return xor(data[8:])


class UntouchableCodec:
    """Fails the test if it is ever called."""

    def encode(self, data: bytes) -> bytes:
        raise AssertionError("encode must not be called")

    def decode(self, data: bytes) -> bytes:
        raise AssertionError("decode must not be called")


class EncodeRaises:
    def encode(self, data: bytes) -> bytes:
        raise RuntimeError("key service down")

    def decode(self, data: bytes) -> bytes:
        return data


class EncodeReturnsText:
    def encode(self, data: bytes) -> Any:
        return data.decode("utf-8")

    def decode(self, data: bytes) -> bytes:
        return data


class DecodeRaises:
    def encode(self, data: bytes) -> bytes:
        return data

    def decode(self, data: bytes) -> bytes:
        raise RuntimeError("wrong key")


class DecodeReturnsNone:
    def encode(self, data: bytes) -> bytes:
        return data

    def decode(self, data: bytes) -> Any:
        return None


class DecodeReturnsNonUtf8:
    def encode(self, data: bytes) -> bytes:
        return data

    def decode(self, data: bytes) -> bytes:
        return b"\xff\xfe\xfd"


def path(codec: type) -> str:
    return f"{codec.__module__}:{codec.__qualname__}"


def tagged(codec: type, payload: bytes) -> dict[str, str]:
    return {"codec": path(codec), "b64": base64.b64encode(payload).decode("ascii")}


def test_the_test_codecs_are_opaque_codecs() -> None:
    assert isinstance(XorCodec(), OpaqueCodec)
    assert isinstance(NonceCodec(), OpaqueCodec)


# --- encode -------------------------------------------------------------------------------


def test_none_stays_none_and_never_reaches_a_codec() -> None:
    assert encode_field("data", None, None) is None
    assert encode_field("data", None, path(UntouchableCodec)) is None
    assert decode_field("data", None) is None


def test_without_a_codec_the_stored_form_is_exactly_the_json_text() -> None:
    stored = encode_field("data", VALUE, None)

    assert stored == {"json": VALUE_TEXT}
    assert list(stored) == ["json"]
    assert json.loads(json.dumps(stored)) == stored


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (-0.0, "-0.0"), (1e300, "1e+300"), ("", '""'), (False, "false"), ([], "[]")],
)
def test_scalars_are_stored_as_their_json_text(value: Any, text: str) -> None:
    assert encode_field("caller_context", value, None) == {"json": text}


def test_with_a_codec_the_stored_form_is_the_tagged_base64_of_the_encoded_text() -> None:
    stored = encode_field("data", VALUE, path(XorCodec))

    assert stored == tagged(XorCodec, xor(VALUE_TEXT.encode("utf-8")))
    assert list(stored) == ["codec", "b64"]
    assert stored["codec"] == f"{__name__}:XorCodec"


def test_a_codec_round_trips_exactly() -> None:
    decoded = decode_field("data", encode_field("data", VALUE, path(XorCodec)))

    assert decoded == VALUE
    assert json.dumps(decoded, ensure_ascii=False, separators=(",", ":")) == VALUE_TEXT


def test_a_nondeterministic_codec_round_trips_exactly() -> None:
    first = encode_field("data", VALUE, path(NonceCodec))
    second = encode_field("data", VALUE, path(NonceCodec))

    assert first != second
    assert first is not None
    assert first["codec"] == path(NonceCodec)
    for stored in (first, second):
        decoded = decode_field("data", stored)
        assert json.dumps(decoded, ensure_ascii=False, separators=(",", ":")) == VALUE_TEXT


@pytest.mark.parametrize(
    "codec",
    [
        path(EncodeRaises),
        path(EncodeReturnsText),
        "no_such_module_for_statifier_tests:Codec",
        f"{__name__}:NoSuchCodec",
    ],
)
def test_a_failing_or_unresolvable_codec_refuses_the_value(codec: str) -> None:
    with pytest.raises(OpaqueValueError) as caught:
        encode_field("data", VALUE, codec)
    assert caught.value.reason == "codec_failed"
    assert "data" in str(caught.value)


# --- decode: the tag decides --------------------------------------------------------------


def test_the_tag_on_the_row_decides_how_a_field_decodes() -> None:
    plain = {"json": VALUE_TEXT}
    xored = tagged(XorCodec, xor(VALUE_TEXT.encode("utf-8")))
    nonced = tagged(NonceCodec, b"12345678" + xor(VALUE_TEXT.encode("utf-8")))

    # one reader, no configuration: each field follows its own tag
    assert decode_field("data", plain) == VALUE
    assert decode_field("data", xored) == VALUE
    assert decode_field("data", nonced) == VALUE


@pytest.mark.parametrize(
    "codec",
    [
        "no_such_module_for_statifier_tests:Codec",
        f"{__name__}:NoSuchCodec",
        "not a path",
        "encodings.zlib_codec:Codec",  # a real codec class, not registered here
    ],
)
def test_a_codec_this_process_did_not_register_makes_the_row_undecodable(codec: str) -> None:
    stored = {"codec": codec, "b64": base64.b64encode(b'{"a":1}').decode("ascii")}

    with pytest.raises(UndecodableRow, match="refused"):
        decode_field("data", stored)


@pytest.mark.parametrize("codec", [DecodeRaises, DecodeReturnsNone])
def test_a_codec_that_fails_to_decode_is_a_codec_failure(codec: type) -> None:
    with pytest.raises(CodecFailed):
        decode_field("caller_context", tagged(codec, b'{"a":1}'))


CORRUPT_FORMS: list[Any] = [
    "raw text",
    5,
    [VALUE_TEXT],
    True,
    {},
    {"json": 5},
    {"json": None},
    {"json": "{not json"},
    {"json": "NaN"},
    {"json": "[Infinity]"},
    {"json": ""},
    {"json": "1", "extra": "x"},
    {"t2b64": "g2gA"},
    {"codec": path(XorCodec)},
    {"b64": "e30="},
    {"codec": path(XorCodec), "b64": "!!! not base64 !!!"},
    {"codec": path(XorCodec), "b64": 5},
    {"codec": 5, "b64": "e30="},
    {"codec": path(XorCodec), "b64": "e30=", "json": "{}"},
    tagged(DecodeReturnsNonUtf8, b"{}"),
    tagged(XorCodec, xor(b"{not json")),
]


@pytest.mark.parametrize("stored", CORRUPT_FORMS, ids=repr)
def test_a_corrupt_stored_form_is_undecodable(stored: Any) -> None:
    with pytest.raises(UndecodableRow):
        decode_field("data", stored)


# --- through schedule and the database ----------------------------------------------------


async def test_a_codec_row_decodes_by_its_tag_without_the_writers_config(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    with_codec = make_config(oban_client, opaque_codec=XorCodec)
    without = make_config(oban_client)
    effect = send_delayed(ordinal=1, data=VALUE, caller_context=["ctx", 0.1])

    coded = await schedule(with_codec, SCOPE, effect)
    plain = await schedule(without, SCOPE, send_delayed(ordinal=2, data=VALUE))

    coded_args = await raw_args(pool, coded.job_id)
    assert coded_args["data"] == tagged(XorCodec, xor(VALUE_TEXT.encode("utf-8")))
    assert coded_args["caller_context"]["codec"] == path(XorCodec)
    assert (await raw_args(pool, plain.job_id))["data"] == {"json": VALUE_TEXT}
    _, decoded = _args.decode(coded_args)
    assert decoded == effect
    assert decoded.caller_context == ["ctx", 0.1]
    _, decoded_plain = _args.decode(await raw_args(pool, plain.job_id))
    assert decoded_plain.data == VALUE


async def test_none_fields_never_reach_the_configured_codec(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client, opaque_codec=UntouchableCodec)

    timer = await schedule(config, SCOPE, send_delayed(data=None, caller_context=None))

    args = await raw_args(pool, timer.job_id)
    assert args["data"] is None
    assert args["caller_context"] is None
    _, decoded = _args.decode(args)
    assert decoded.data is None
    assert decoded.caller_context is None


async def test_a_nondeterministic_codec_still_dedups_and_cancels(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client, opaque_codec=NonceCodec)

    first = await schedule(config, SCOPE, send_delayed(data=VALUE))
    again = await schedule(config, SCOPE, send_delayed(data=VALUE))

    assert again.conflict is True
    assert again.job_id == first.job_id
    assert await cancel_timers(config, SCOPE, cancel_effect()) == 1
    _, decoded = _args.decode(await raw_args(pool, first.job_id))
    assert decoded.data == VALUE


async def test_a_codec_failing_at_schedule_time_stores_nothing(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    for codec in [EncodeRaises, EncodeReturnsText, "no_such_module_zz:Codec"]:
        config = make_config(oban_client, opaque_codec=codec)
        with pytest.raises(OpaqueValueError):
            await schedule(config, SCOPE, send_delayed(data={"n": 1}))
        with pytest.raises(OpaqueValueError):
            await schedule(config, SCOPE, send_delayed(data=None, caller_context={"c": 1}))

    assert await all_jobs(pool) == []


# The codecs above are named on rows by this module's path, as a host's worker started with
# ``--module`` would allow them (ADR 13).
_resolve.allow_module(__name__)
