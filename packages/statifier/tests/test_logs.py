"""Log lines as JSON (``statifier.logs``) and every command's ``--log-format``."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import statifier
from statifier import instrumentation, logs
from statifier.cli import main as cli_main
from statifier.logs import fields_of
from statifier.runtime.session import Session

from engine_support.recording import Recording


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger, its handlers and level restored afterwards."""
    logger = logging.getLogger()
    handlers, level = list(logger.handlers), logger.level
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)


def line(record: logging.LogRecord) -> dict[str, object]:
    """The JSON object a record formats to."""
    decoded: dict[str, object] = json.loads(logs.JsonFormatter().format(record))
    return decoded


def make(message: str = "fired %s", *args: object, **extra: object) -> logging.LogRecord:
    """A record of logger ``statifier.test`` with ``extra`` fields."""
    record = logging.LogRecord("statifier.test", logging.INFO, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    record.created = 1_796_000_000.25
    return record


def test_a_json_line_holds_the_record_and_its_extra_fields() -> None:
    decoded = line(make("fired %s", "hold", execution_id="exec_1", count=3, late=None))
    assert decoded == {
        "time": "2026-11-30T00:53:20.250+00:00",
        "level": "INFO",
        "logger": "statifier.test",
        "message": "fired hold",
        "execution_id": "exec_1",
        "count": 3,
        "late": None,
    }


def test_json_fields_are_bounded() -> None:
    long = "x" * (logs.MAX_FIELD + 1)
    decoded = line(
        make(long, scope=long, data={"nested": ["y" * 5000]}, exact="z" * logs.MAX_FIELD)
    )
    assert decoded["message"] == "x" * logs.MAX_FIELD + "... (1 more characters)"
    assert decoded["scope"] == decoded["message"]
    assert decoded["exact"] == "z" * logs.MAX_FIELD
    assert isinstance(decoded["data"], str)
    assert len(decoded["data"]) < 200


def test_a_json_line_inside_a_span_names_its_trace_and_span() -> None:
    recording = Recording()
    with instrumentation.installed(recording):
        assert "trace_id" not in line(make())
        with recording.span("Step"):
            decoded = line(make())
    assert (decoded["trace_id"], decoded["span_id"]) == ("t1", "s1")


def test_a_json_line_carries_the_exception() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        record = make()
        record.exc_info = sys.exc_info()
    exception = line(record)["exception"]
    assert isinstance(exception, str)
    assert exception.endswith("ValueError: broken")


def test_configure_installs_one_handler_of_its_own(root: logging.Logger) -> None:
    stream = io.StringIO()
    root.handlers[:] = [logging.NullHandler()]  # someone else's
    assert logs.configure("text", stream=stream) is None  # text leaves them be
    first = logs.configure("json", logging.INFO, stream=stream)
    second = logs.configure("json", stream=stream)
    assert first is not None
    assert first not in root.handlers
    assert second in root.handlers
    assert len(root.handlers) == 2
    assert root.level == logging.INFO
    logging.getLogger("statifier.test").info("hello", extra={"scope": "s"})
    assert json.loads(stream.getvalue())["scope"] == "s"
    with pytest.raises(ValueError, match="log_format"):
        logs.configure("xml")


def test_log_format_json_configures_the_root_logger(
    root: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = "examples/card_authorization.scxml"
    assert cli_main(["check", "--log-format", "json", chart]) == 0
    assert any(isinstance(h.formatter, logs.JsonFormatter) for h in root.handlers)
    logging.getLogger("statifier.test").warning("seen")
    assert json.loads(capsys.readouterr().err.splitlines()[-1])["message"] == "seen"
    assert cli_main(["check", "--log-format", "xml", chart]) == 2


async def test_the_library_logs_with_structured_fields(caplog: pytest.LogCaptureFixture) -> None:
    chart = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" name="noisy" initial="a">'
        '<state id="a"><onentry><log label="hello" expr="1"/>'
        '<assign location="nowhere" expr="1"/></onentry></state></scxml>'
    )
    with caplog.at_level(logging.INFO, logger="statifier.runtime.session"):
        session = await Session.start(chart, session_id="sess_noisy")
        await session.stop()
    logged, failed = caplog.records[:2]
    assert fields_of(logged) == {"session_id": "sess_noisy"}
    assert fields_of(failed) == {
        "session_id": "sess_noisy",
        "chart": "noisy",
        "event": "error.execution",
        "line": 1,
    }
