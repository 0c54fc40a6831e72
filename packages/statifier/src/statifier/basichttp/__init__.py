"""The BasicHTTP Event I/O processor (SCXML C.2, D.2), the parts every host shares.

A chart sends with ``<send type="basichttp" target="https://...">`` (or the type URI
``http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor``); the core plans it as a
``statifier.core.planner.Post``, and a host performs it: a live session in process
(``Session.start(..., basichttp=...)``), a durable execution as a job
(``statifier_oban``). Here, pure:

* ``outbound`` writes a send's POST, ``read_post`` reads a POST a session received
  (``planner.received_post`` is the event it becomes);
* ``OutboundPolicy`` is the host's allow-list: which URLs and addresses outbound POSTs
  may reach (none by default), with their size and time bounds;
* ``BasicHTTP`` is a live session's processor (its client and its location), and
  ``post_with_retries`` how it POSTs;
* ``Locations`` mints and checks the location of each execution and session
  (``_ioprocessors['basichttp']['location']``): a URL whose last segment is an
  unguessable capability, the credential of whoever POSTs to it.

``statifier.basichttp.client`` makes the POSTs (``BasicHTTPClient``, needs the ``http``
extra: ``pip install statifier[http]``). ADR 33 says why it is built this way.
"""

from __future__ import annotations

from statifier.core.events import BASIC_HTTP_EVENT_PROCESSOR
from statifier.core.planner import BASIC_HTTP, BASIC_HTTP_SEND_TYPES, HTTP_POST_EVENT

from ._capability import CAPABILITY_LENGTH, KEY_ENV, URL_ENV, Kind, Locations
from ._errors import BasicHTTPError, PostFailed, PostRefused, PostRejected
from ._host import BasicHTTP, Poster, post_with_retries
from ._message import (
    EVENT_NAME_FIELD,
    MAX_INBOUND_BYTES,
    OutboundRequest,
    ReceivedPost,
    outbound,
    read_post,
)
from ._policy import ATTEMPTS, MAX_BODY_BYTES, TIMEOUT_S, Endpoint, OutboundPolicy

__all__ = [
    "ATTEMPTS",
    "BASIC_HTTP",
    "BASIC_HTTP_EVENT_PROCESSOR",
    "BASIC_HTTP_SEND_TYPES",
    "CAPABILITY_LENGTH",
    "EVENT_NAME_FIELD",
    "HTTP_POST_EVENT",
    "KEY_ENV",
    "MAX_BODY_BYTES",
    "MAX_INBOUND_BYTES",
    "TIMEOUT_S",
    "URL_ENV",
    "BasicHTTP",
    "BasicHTTPError",
    "Endpoint",
    "Kind",
    "Locations",
    "OutboundPolicy",
    "OutboundRequest",
    "PostFailed",
    "PostRefused",
    "PostRejected",
    "Poster",
    "ReceivedPost",
    "outbound",
    "post_with_retries",
    "read_post",
]
