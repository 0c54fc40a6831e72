"""The web console: server-rendered pages over the same ``Service`` as the API.

A Starlette app of its own (mounted at ``/console`` by ``create_app``), with a signed
session cookie: the login takes a bearer token once, and every form carries the session's
CSRF token. Pages are Jinja2 templates (package data, overridable from a folder of
yours) with autoescaping on: whatever a chart, an event or a caller put in an execution
is shown as text. The one script (``static/statifier_web/console.js``, no build step)
opens the confirmation dialogs and swaps in a fresh server-rendered fragment of the
execution when its server-sent events say it changed.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import Receive, Scope, Send
from statifier.values import ValueRefused, brief, clip, measure, parse_json
from statifier_persistence import (
    STATUSES,
    Execution,
    ExecutionNotFound,
    PersistenceError,
    Trigger,
    triggered_by,
)

from ._auth import CSRF_FIELD, Gate, csrf_matches, csrf_token
from ._body import TOO_LARGE_SCOPE_KEY, too_large
from ._changes import ChangeFeed
from ._diagrams import DiagramError, Diagrams
from ._errors import ApiError, api_error, invalid, logger
from ._models import ExecutionDetail, StartRequest
from ._service import Filters, Service, metadata_filter
from ._settings import WebSettings
from ._urls import execution_path

SESSION_COOKIE: Final = "statifier_console"
"""The name of the console's session cookie."""

SHOWN_VALUE_BYTES: Final = 64 * 1024
"""A datamodel variable larger than this written out is shown cut short (the API has it
whole)."""

SHOWN_VALUE_CHARS: Final = 2000
"""Characters of a variable shown when it is cut short."""

BRIEF_CHARS: Final = 160
"""Characters of a value a history row shows (event data, a logged value)."""

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""What console pages may load: their own script, styles and images, nothing inline."""

DIAGRAM_POLICY: Final = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
"""A drawing opened on its own runs nothing and loads nothing."""

HISTORY_ROWS: Final = 25
"""History entries an execution's page shows (older ones a page at a time)."""

FLASH_CHARS: Final = 500
"""Characters of a message shown after an action (the rest is cut)."""

ACTIONS: Final = ("cancel", "park", "unpark")

LOGGED_CHARS: Final = 500
"""Characters of an execution id or an error message a log line holds."""

_DIGEST: Final = re.compile(r"sha256:([0-9a-f]{12,})")

Page = Callable[[Request], Awaitable[Response]]


def pretty(value: Any) -> str:
    """A datamodel value as indented JSON, cut short past ``SHOWN_VALUE_BYTES``."""
    try:
        measure(value, SHOWN_VALUE_BYTES)
    except ValueRefused:
        return brief(value, SHOWN_VALUE_CHARS) + "\n(cut short: read it whole from the API)"
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def when(moment: datetime) -> str:
    """A time as the console prints it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime, now: datetime | None = None) -> str:
    """``in 3.2 s`` / ``4 min ago``: a time against now, to a tenth of a second below a
    minute, whole minutes below two hours, whole hours below two days, then days."""
    seconds = (moment - (now or datetime.now(UTC))).total_seconds()
    size = abs(seconds)
    if size < 60:
        text = f"{size:.1f} s"
    elif size < 2 * 3600:
        text = f"{int(size // 60)} min"
    elif size < 2 * 86400:
        text = f"{int(size // 3600)} h"
    else:
        text = f"{int(size // 86400)} d"
    return f"in {text}" if seconds >= 0 else f"{text} ago"


@jinja2.pass_context
def _execution_url(context: Mapping[str, Any], route: str, execution_id: str, **params: Any) -> str:
    request: Request = context["request"]
    return str(request.url_for(route, execution_id=execution_path(execution_id), **params))


def version_of(execution: Execution | ExecutionDetail) -> str:
    """What changes whenever an execution does: the page and its live stream compare it."""
    return f"{execution.history_seq}-{execution.step_count}-{execution.status}"


def short_identity(identity: str) -> str:
    """A chart revision's identity shortened for a table: its digest's first 12 digits."""
    found = _DIGEST.search(identity)
    return f"{found.group(1)[:12]}…" if found else identity[:16] + "…"


def _templates(settings: WebSettings) -> Jinja2Templates:
    loaders: list[jinja2.BaseLoader] = []
    if settings.templates is not None:
        loaders.append(jinja2.FileSystemLoader(Path(settings.templates)))
    loaders.append(jinja2.PackageLoader("statifier_web", "templates"))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders), autoescape=True, undefined=jinja2.StrictUndefined
    )
    env.filters["pretty"] = pretty
    env.filters["when"] = when
    env.filters["relative"] = relative
    env.filters["short_identity"] = short_identity
    env.filters["brief"] = lambda value: brief(value, BRIEF_CHARS)
    env.filters["moment"] = datetime.fromisoformat
    env.globals["execution_url"] = _execution_url
    return Jinja2Templates(env=env)


def _safe_next(target: str | None, fallback: str) -> str:
    """A redirect target after login: a path of this site only (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return fallback
    return target


class Console:
    """The console's pages and actions (see the module docstring)."""

    def __init__(
        self,
        service: Service,
        gate: Gate,
        settings: WebSettings,
        feed: ChangeFeed,
        diagrams: Diagrams,
    ) -> None:
        self.service = service
        self.gate = gate
        self.settings = settings
        self.feed = feed
        self.diagrams = diagrams
        self.templates = _templates(settings)
        self._slots = StreamSlots(settings.max_streams)

    def app(self) -> Starlette:
        """The console as an ASGI app, to mount (``create_app`` mounts it at ``/console``)."""
        secret = self.settings.session_secret or secrets.token_bytes(32)
        guarded = self._guarded
        routes = [
            Route("/", guarded(self.executions), name="executions"),
            Route("/login", self.login_form, name="login"),
            Route("/login", self.login, methods=["POST"], name="login_post"),
            Route("/logout", self.logout, methods=["POST"], name="logout"),
            Route("/start", guarded(self.start, form=True), methods=["POST"], name="start"),
            Route("/executions/{execution_id:path}/live", guarded(self.live), name="live"),
            Route("/executions/{execution_id:path}/history", guarded(self.history), name="history"),
            Route("/executions/{execution_id:path}/stream", guarded(self.stream), name="stream"),
            Route(
                "/executions/{execution_id:path}/diagram.svg",
                guarded(self.diagram),
                name="diagram",
            ),
            Route(
                "/executions/{execution_id:path}/events",
                guarded(self.send, form=True),
                methods=["POST"],
                name="send",
            ),
            Route(
                "/executions/{execution_id:path}/do/{action}",
                guarded(self.act, form=True),
                methods=["POST"],
                name="act",
            ),
            Route("/executions/{execution_id:path}", guarded(self.execution), name="execution"),
            Mount(
                "/static",
                StaticFiles(packages=[("statifier_web", "static")]),
                name="static",
            ),
        ]
        middleware = [
            Middleware(
                SessionMiddleware,
                secret_key=secret.hex(),
                session_cookie=SESSION_COOKIE,
                max_age=self.settings.session_max_age_s,
                same_site="strict",
                https_only=self.settings.secure_cookies,
            )
        ]
        return Starlette(routes=routes, middleware=middleware)

    # -- the guard ---------------------------------------------------------------------

    def _guarded(self, page: Page, *, form: bool = False) -> Page:
        """``page`` for a logged-in session only (else to the login); with ``form``, a
        POST whose CSRF field matches the session's only (else 403)."""

        async def guarded(request: Request) -> Response:
            if self.gate.session(request) is None:
                if request.method != "GET":
                    return self._error(request, ApiError(401, "unauthorized", "log in first"))
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                login = request.url_for("console:login").include_query_params(next=target)
                return RedirectResponse(str(login), status_code=303)
            try:
                if form:
                    fields = await request.form()
                    request.state.form = fields
                    if not csrf_matches(request, fields.get(CSRF_FIELD)):
                        raise ApiError(403, "csrf_failed", "the form is stale: reload the page")
                return await page(request)
            except Exception as exc:  # every failure becomes a typed error page
                limit = request.scope.get(TOO_LARGE_SCOPE_KEY)
                error = too_large(limit) if isinstance(limit, int) else api_error(exc)
                return self._error(request, error)

        return guarded

    def _render(
        self,
        request: Request,
        name: str,
        context: Mapping[str, Any],
        status: int = 200,
        *,
        page: bool = True,
    ) -> Response:
        # A message is shown once, on the next full page (a live fragment leaves it).
        flash = request.session.pop("flash", None) if page else None
        full = {
            "csrf_field": CSRF_FIELD,
            "csrf_token": csrf_token(request),
            "open": self.gate.open,
            "logged_in": self.gate.session(request) is not None,
            "flash": flash if isinstance(flash, dict) else None,
            "now": datetime.now(UTC),
            **context,
        }
        response = self.templates.TemplateResponse(request, name, full, status_code=status)
        _secure(response)
        return response

    def _error(self, request: Request, error: ApiError) -> Response:
        return self._render(
            request, "statifier_web/error.html", {"error": error}, status=error.status
        )

    def _flash(self, request: Request, kind: str, text: str) -> None:
        # Kept in the session cookie, which browsers bound to about 4 KB: a message naming
        # a long event or id is clipped.
        request.session["flash"] = {"kind": kind, "text": clip(text, FLASH_CHARS)}

    # -- login -------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        """The login page (a logged-in session goes on to the list)."""
        target = _safe_next(
            request.query_params.get("next"), str(request.url_for("console:executions").path)
        )
        if self.gate.session(request) is not None:
            return RedirectResponse(target, status_code=303)
        return self._render(request, "statifier_web/login.html", {"next": target})

    async def login(self, request: Request) -> Response:
        """Check the token (and the CSRF field) and start a session."""
        fields = await request.form()
        fallback = str(request.url_for("console:executions").path)
        target = _safe_next(_text(fields, "next"), fallback)
        if not csrf_matches(request, fields.get(CSRF_FIELD)):
            return self._error(
                request, ApiError(403, "csrf_failed", "the form is stale: reload the page")
            )
        if not self.gate.log_in(request, _text(fields, "token") or ""):
            self._flash(request, "error", "That token is not valid.")
            return self._render(request, "statifier_web/login.html", {"next": target}, status=401)
        return RedirectResponse(target, status_code=303)

    async def logout(self, request: Request) -> Response:
        """End the session (a CSRF-checked POST)."""
        fields = await request.form()
        if csrf_matches(request, fields.get(CSRF_FIELD)):
            request.session.clear()
        return RedirectResponse(str(request.url_for("console:login")), status_code=303)

    # -- pages -------------------------------------------------------------------------

    async def executions(self, request: Request) -> Response:
        """The list: counts by status, filters, one page of executions."""
        query = request.query_params
        status = query.get("status") or None
        if status is not None and status not in STATUSES:
            raise invalid(f"status must be one of {', '.join(STATUSES)}")
        metadata_text = query.get("metadata") or None
        metadata = metadata_filter(metadata_text)
        filters = Filters(
            status=status,
            chart=query.get("chart") or None,
            revision=query.get("revision") or None,
            metadata=metadata,
        )
        after = query.get("after") or None
        page = await self.service.page(filters, limit=self.settings.page_size, after=after)
        counts = await self.service.counts(filters)
        rows = await self.service.rows(page.executions)
        kept = {
            key: value
            for key, value in (
                ("chart", filters.chart),
                ("revision", filters.revision),
                ("metadata", metadata_text),
            )
            if value
        }

        def filter_query(**more: str | None) -> str:
            """The query of this list with ``more`` changed (None: left out)."""
            merged = {"status": status, **kept, **more}
            return urlencode({k: v for k, v in merged.items() if v is not None})

        return self._render(
            request,
            "statifier_web/executions.html",
            {
                "rows": rows,
                "counts": counts,
                "total": sum(counts.values()),
                "status": status,
                "filters": kept,
                "filter_query": filter_query,
                "after": page.after,
                "paged": after is not None,
                "charts": await self.service.chart_names(),
                "start_key": "console-" + secrets.token_urlsafe(12),
            },
        )

    async def execution(self, request: Request) -> Response:
        """One execution's page."""
        detail = await self.service.detail(request.path_params["execution_id"])
        context = await self._one(detail)
        return self._render(request, "statifier_web/execution.html", context)

    async def live(self, request: Request) -> Response:
        """The execution's changing part, for the page to swap in."""
        detail = await self.service.detail(request.path_params["execution_id"])
        context = await self._one(detail)
        return self._render(request, "statifier_web/_execution_live.html", context, page=False)

    async def history(self, request: Request) -> Response:
        """A page of an execution's history, newest first, before the ``before`` seq."""
        execution_id = request.path_params["execution_id"]
        before = _seq(request.query_params.get("before"))
        detail = await self.service.detail(execution_id)
        entries = await self._recent(execution_id, before or detail.history_seq + 1)
        context = {"execution": detail, "entries": entries}
        return self._render(request, "statifier_web/history.html", context)

    async def _recent(self, execution_id: str, before: int) -> list[dict[str, Any]]:
        """Up to ``HISTORY_ROWS`` entries before ``before``, newest first, as JSON."""
        if before <= 1:
            return []
        page = await self.service.history(execution_id, before=before, limit=HISTORY_ROWS)
        return [entry.to_json() for entry in reversed(page.entries)]

    async def _one(self, detail: ExecutionDetail) -> dict[str, Any]:
        return {
            "entries": await self._recent(detail.id, detail.history_seq + 1),
            "execution": detail,
            "version": version_of(detail),
            "diagrams": self.diagrams.available,
            "send_key": "console-" + secrets.token_urlsafe(12),
            "actions": {
                "cancel": detail.status in ("active", "failed"),
                "park": detail.status == "active",
                "unpark": detail.status == "needs_migration",
            },
        }

    async def diagram(self, request: Request) -> Response:
        """The chart drawn as SVG, its active states highlighted."""
        execution_id = request.path_params["execution_id"]
        _, state = await self.service.executions.load(execution_id)
        try:
            svg = await self.diagrams.svg(state.machine, state.configuration)
        except DiagramError as exc:
            raise ApiError(503, "diagram_unavailable", str(exc)) from exc
        return Response(
            svg,
            media_type="image/svg+xml",
            headers={
                "Content-Security-Policy": DIAGRAM_POLICY,
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "private, max-age=300",
            },
        )

    async def stream(self, request: Request) -> Response:
        """Server-sent events: ``change`` with the execution's version whenever it changes
        (first the current one), then ``ended`` once it can change no more, or ``gone`` if
        it disappears; comments keep it open. A stream whose feed fails ends (the failure
        logged), and the browser's ``EventSource`` connects again."""
        execution_id = request.path_params["execution_id"]
        await self.service.executions.get(execution_id)  # 404 before the stream starts
        # Taken here, before the answer is returned and with no await since the count was
        # read: a stream counted only once its answer started would let requests arriving
        # together all see the same free slot.
        release = self._slots.take()
        events = self._events(execution_id, release)
        return _LiveStream(
            events,
            release,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _events(
        self, execution_id: str, release: Callable[[], None]
    ) -> AsyncGenerator[str, None]:
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=16)

        async def pump() -> None:
            try:
                async for execution in self.feed.watch(execution_id):
                    data = {"version": version_of(execution), "status": execution.status}
                    await queue.put(f"event: change\ndata: {json.dumps(data)}\n\n")
            except ExecutionNotFound:
                await queue.put("event: gone\ndata: {}\n\n")
            except Exception as exc:  # the database went away, say: the stream ends
                _feed_failed(execution_id, exc)
            else:  # the feed knows the execution can change no more
                await queue.put("event: ended\ndata: {}\n\n")
            await queue.put(None)

        task = asyncio.create_task(pump())
        try:
            yield "retry: 2000\n\n"
            while True:
                try:
                    message = await asyncio.wait_for(
                        queue.get(), timeout=self.settings.stream_keepalive_s
                    )
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if message is None:
                    return
                yield message
        finally:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the stream itself is being cancelled, not only its pump
            finally:
                # Once the feed let go of its connection, and before the answer's last
                # (empty) chunk: a client that saw its stream end finds the slot free.
                release()

    # -- actions -----------------------------------------------------------------------

    async def start(self, request: Request) -> Response:
        """Start an execution from the list page's form."""
        fields: FormData = request.state.form
        back = str(request.url_for("console:executions"))
        try:
            body = StartRequest(
                chart=_text(fields, "chart") or "",
                id=_text(fields, "id") or None,
                datamodel=_json_object(fields, "datamodel"),
                metadata=_json_object(fields, "metadata"),
            )
            with triggered_by(console_trigger("start")):
                outcome, detail = await self.service.start(body, _text(fields, "key") or None)
        except Exception as exc:  # shown to the operator on the list
            self._flash(request, "error", f"Not started: {_message(exc)}")
            return RedirectResponse(back, status_code=303)
        if outcome == "stepped":
            self._flash(request, "ok", f"Started {detail.id}.")
        else:
            self._flash(request, "ok", f"{detail.id} was started by this form before.")
        target = request.url_for("console:execution", execution_id=execution_path(detail.id))
        return RedirectResponse(str(target), status_code=303)

    async def send(self, request: Request) -> Response:
        """Send an event from the execution page's form."""
        execution_id = request.path_params["execution_id"]
        fields: FormData = request.state.form
        back = str(request.url_for("console:execution", execution_id=execution_path(execution_id)))
        name = (_text(fields, "name") or "").strip()
        try:
            data = _json_value(fields, "data")
            if not name or any(ch.isspace() for ch in name):
                raise invalid("an event name is one word without spaces")
            with triggered_by(console_trigger("send")):
                outcome, detail = await self.service.send(
                    execution_id, name, data, _text(fields, "key") or None
                )
        except Exception as exc:  # shown to the operator on the page
            self._flash(request, "error", f"{name or 'The event'} was not sent: {_message(exc)}")
            return RedirectResponse(back, status_code=303)
        states = ", ".join(detail.active_states) or "no state"
        if outcome == "stepped":
            self._flash(request, "ok", f"Sent {name}: now {detail.status} in {states}.")
        else:
            self._flash(request, "ok", f"{name} was sent by this form before.")
        return RedirectResponse(back, status_code=303)

    async def act(self, request: Request) -> Response:
        """Cancel, park or unpark, from the execution page's confirmation dialogs."""
        execution_id = request.path_params["execution_id"]
        action = request.path_params["action"]
        back = str(request.url_for("console:execution", execution_id=execution_path(execution_id)))
        if action not in ACTIONS:
            raise ApiError(404, "not_found", f"no action {action!r}")
        run = {
            "cancel": self.service.cancel,
            "park": self.service.park,
            "unpark": self.service.unpark,
        }[action]
        try:
            with triggered_by(console_trigger(action)):
                detail = await run(execution_id)
        except Exception as exc:  # shown to the operator on the page
            self._flash(request, "error", f"Not done ({action}): {_message(exc)}")
            return RedirectResponse(back, status_code=303)
        done = {"cancel": "Cancelled", "park": "Parked", "unpark": "Unparked"}[action]
        self._flash(request, "ok", f"{done}: {detail.id} is {detail.status}.")
        return RedirectResponse(back, status_code=303)


class StreamSlots:
    """Live streams served at once, at most ``limit``: each listens on a database
    connection of its own."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0

    def take(self) -> Callable[[], None]:
        """A slot (503 ``too_many_streams`` when none is free), and the function that
        gives it back (once, however often it is called)."""
        if self.taken >= self.limit:
            raise ApiError(503, "too_many_streams", "too many live streams: try again later")
        self.taken += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.taken -= 1

        return release


class _LiveStream(StreamingResponse):
    """A live stream's answer: gives its slot back and closes its events once it is done,
    whether they ran to their end, were left at a chunk the client never took, or never
    started (the client had left before the answer began)."""

    def __init__(
        self,
        events: AsyncGenerator[str, None],
        release: Callable[[], None],
        *,
        media_type: str,
        headers: Mapping[str, str],
    ) -> None:
        super().__init__(events, media_type=media_type, headers=headers)
        self._events = events
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the stream; then free its slot and stop its feed."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
            await self._events.aclose()


def _feed_failed(execution_id: str, exc: Exception) -> None:
    """Log why a live stream ends early: the operator needs to know, and the browser only
    sees the stream end and connects again."""
    expected = isinstance(exc, PersistenceError)  # the database's trouble, said in its message
    logger.warning(
        "the live stream of execution %s ended: its change feed failed: %s: %s",
        clip(repr(execution_id), LOGGED_CHARS),
        type(exc).__name__,
        clip(str(exc), LOGGED_CHARS),
        exc_info=None if expected else exc,
    )


def _secure(response: Response) -> None:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Cache-Control"] = "no-store"


def _text(fields: FormData, name: str) -> str | None:
    value = fields.get(name)
    return value if isinstance(value, str) else None


def _json_value(fields: FormData, name: str) -> Any:
    text = (_text(fields, name) or "").strip()
    if not text:
        return None
    try:  # the text is bounded by the request body's limit already
        return parse_json(text, max_chars=len(text))
    except ValueRefused as exc:
        raise invalid(f"{name} is {exc}") from None


def _json_object(fields: FormData, name: str) -> dict[str, Any] | None:
    value = _json_value(fields, name)
    if value is not None and not isinstance(value, dict):
        raise invalid(f"{name} must be a JSON object")
    return value


def console_trigger(action: str) -> Trigger:
    """Who a change made from the console is recorded as in history: an operator."""
    return Trigger("operator", detail=f"web console {action}")


def _seq(text: str | None) -> int | None:
    """A ``seq`` query parameter (None when absent; 422 when not a positive integer)."""
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) < 1:
        raise invalid("before must be a positive integer (a seq)")
    return int(text)


def _message(exc: Exception) -> str:
    """What an operator is told about a failed action."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
    return api_error(exc).message
