"""Every project error survives pickling (a process pool or a Dask cluster sends it back so)."""

from __future__ import annotations

import inspect
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from regimetune.models import errors

ERRORS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.RegimetuneError) and cls.__module__ == errors.__name__
]


def _make(cls: type[errors.RegimetuneError]) -> errors.RegimetuneError:
    if cls is errors.TraceFormatError:
        return cls("bad timestamp 'x'", source="run.csv", line=17)
    return cls(f"something about {cls.__name__}")


def test_every_error_is_listed() -> None:
    assert len(ERRORS) >= 10 and errors.TraceFormatError in ERRORS and errors.RegimetuneError in ERRORS


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_pickle_round_trip(cls: type[errors.RegimetuneError]) -> None:
    exc = _make(cls)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc) and back.args == exc.args
    assert back.__dict__ == exc.__dict__


def test_trace_error_keeps_file_and_line_and_offset() -> None:
    for exc in (
        errors.TraceFormatError("bad", source="a.csv", line=3),
        errors.TraceFormatError("short record", source="b.bin", offset=48),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert (back.source, back.line, back.offset, back.reason) == (
            exc.source,
            exc.line,
            exc.offset,
            exc.reason,
        )
        assert str(back) == str(exc)


def _raise_trace_error(line: int) -> None:
    raise errors.TraceFormatError("not a number", source="upload.csv", line=line)


def test_trace_error_crosses_a_process_pool_and_the_pool_survives() -> None:
    with ProcessPoolExecutor(max_workers=1) as pool:
        with pytest.raises(errors.TraceFormatError, match=r"upload\.csv:5: not a number") as info:
            pool.submit(_raise_trace_error, 5).result(timeout=60)
        assert info.value.line == 5
        assert pool.submit(abs, -3).result(timeout=60) == 3  # not "terminated abruptly"
