"""``statifier-oban web``: the HTTP API and the web console (``statifier_web``, the extra
``statifier-oban[web]``), imported only when used.

The server steps executions as a worker does, so it takes the execution options
(``--timers-queue``, ``--invoke-queue``, ``--handler``, ``--functions``), and runs no
queue: the workers fire the timers its steps arm. Tokens come from ``--token-file`` and
``$STATIFIER_WEB_TOKENS``, never from the command line (``ps`` would show them). With
``--otel`` it traces what the requests do (ADR 30): a request's W3C ``traceparent``
header makes the caller's span the parent of its steps' spans.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import click
from oban import Oban
from statifier.basichttp import KEY_ENV, URL_ENV, Locations
from statifier.cli import kit
from statifier_web import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    SESSION_SECRET_ENV,
    TOKENS_ENV,
    WebConfigError,
    WebSettings,
    create_app,
    serve,
    tokens_from_environment,
    tokens_from_file,
)

from ..store._schema import OBAN_TABLES
from ._loop import loop_factory, loop_name, loop_option
from ._main import PROG, checked_pool, database_options, execution_options
from ._persistence import ExecutionOptions, executions_for
from ._tracing import otel_option, start_tracing, stop_tracing

POOL_SIZE = 10
"""Connections of the server's pool (requests and live streams share them)."""

_UNGUARDED = (
    "no bearer token: put one in a file for --token-file, or in ${env} (make one with "
    "python -c 'import secrets; print(secrets.token_urlsafe(32))'), or say --open to serve "
    "without authentication on loopback"
)


def _settings(token_file: Path | None, open_: bool, secure_cookies: bool) -> WebSettings:
    tokens = tokens_from_environment()
    if token_file is not None:
        tokens += tokens_from_file(token_file)
    if not tokens and not open_:
        raise kit.CommandError(_UNGUARDED.format(env=TOKENS_ENV))
    if tokens and open_:
        raise kit.CommandError(
            f"--open serves without authentication: give no token (--token-file, ${TOKENS_ENV})"
        )
    secret = os.environ.get(SESSION_SECRET_ENV)
    return WebSettings(
        tokens=tokens,
        open=open_,
        session_secret=secret.encode("utf-8") if secret else None,
        secure_cookies=secure_cookies,
    )


@click.command(
    cls=kit.Command,
    help="Serve the HTTP API and the web console over durable executions until SIGINT/SIGTERM.",
)
@database_options
@execution_options
@click.option(
    "--host", default=DEFAULT_HOST, show_default=True, metavar="ADDRESS",
    envvar="STATIFIER_WEB_HOST", show_envvar=True,
    help="the address to listen on (the default: this machine only)",
)  # fmt: skip
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
    metavar="PORT",
    envvar="STATIFIER_WEB_PORT", show_envvar=True, help="the port (0: any free one)",
)  # fmt: skip
@click.option(
    "--base-path", default="", metavar="PATH", envvar="STATIFIER_WEB_BASE_PATH",
    show_envvar=True, help="serve under this path, e.g. /statifier (behind a proxy)",
)  # fmt: skip
@click.option(
    "--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    metavar="FILE", envvar="STATIFIER_WEB_TOKEN_FILE", show_envvar=True,
    help=f"bearer tokens, one a line (also ${TOKENS_ENV}, comma-separated)",
)  # fmt: skip
@click.option(
    "--open", "open_", is_flag=True,
    help="serve without authentication (on a loopback address only)",
)  # fmt: skip
@click.option(
    "--secure-cookies", is_flag=True, envvar="STATIFIER_WEB_SECURE_COOKIES", show_envvar=True,
    help="send the console's session cookie over HTTPS only (behind HTTPS)",
)  # fmt: skip
@loop_option("the requests")
@otel_option("the requests")
def web(
    database_url: str,
    prefix: str,
    timers_queue: str,
    invoke_queue: str | None,
    handlers: tuple[tuple[str, str], ...],
    functions: str | None,
    paths: tuple[str, ...],
    history: bool,
    host: str,
    port: int,
    base_path: str,
    token_file: Path | None,
    open_: bool,
    secure_cookies: bool,
    loop: str,
    otel: bool,
) -> None:
    """``statifier-oban web``: say where it serves, serve until stopped."""
    factory = loop_factory(loop)  # first: a loop it cannot have stops it before anything runs
    kit.set_import_path(paths)
    options = ExecutionOptions(timers_queue, invoke_queue, handlers, functions, history)
    try:
        settings = _settings(token_file, open_, secure_cookies)
    except WebConfigError as exc:
        raise kit.CommandError(exc) from None
    output = kit.Output(False)

    def ready(url: str, locations: Locations | None) -> None:
        guard = "without authentication" if settings.open else f"{len(settings.tokens)} token(s)"
        loop = loop_name(asyncio.get_running_loop())
        output.line(
            f"{PROG} web: the console at {url}/console/, the API under {url}/api/ ({guard}), "
            f"loop {loop}"
        )
        if locations is None:
            output.line(f"{PROG} web: no BasicHTTP locations (${URL_ENV} and ${KEY_ENV} unset)")
        else:
            output.line(f"{PROG} web: BasicHTTP locations under {locations.base_url}/basichttp/")

    async def run() -> None:
        pool = await checked_pool(database_url, prefix, POOL_SIZE, OBAN_TABLES)
        oban = Oban(pool=pool, name=f"statifier-oban-web-{os.getpid()}", prefix=prefix)
        try:
            executions = executions_for(pool, oban, prefix, options)
            app = create_app(executions, settings)
            await serve(
                app,
                host=host,
                port=port,
                base_path=base_path,
                on_ready=lambda url: ready(url, executions.basichttp),
            )
        finally:
            await pool.close()

    providers = start_tracing() if otel else None
    try:
        asyncio.run(run(), loop_factory=factory)
    except WebConfigError as exc:
        raise kit.CommandError(exc) from None
    finally:
        if providers is not None:
            stop_tracing(providers)
    output.line(f"{PROG} web: stopped")
