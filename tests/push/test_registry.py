"""One way to pick a push adapter: the registry, for settings and the command line."""

from __future__ import annotations

import pytest

from regimetune.api import load_settings, make_backend
from regimetune.models import ConfigError
from regimetune.push import PushError, ReferenceBackend, RestBackend, backend_for, redact


def test_settings_pick_the_adapter_through_the_registry() -> None:
    cfg = load_settings(
        push={"backend": "rest", "url": "http://h/x", "method": "POST", "payload": {"v": "version"}}
    )
    rest = make_backend(cfg.push)
    assert isinstance(rest, RestBackend) and rest.method == "POST" and rest.payload == {"v": "version"}
    ref = make_backend(load_settings(push={"backend": "reference", "url": "http://h:1", "token": "t"}).push)
    assert isinstance(ref, ReferenceBackend) and ref.token == "t" and ref.url == "http://h:1/v1/policy"
    assert make_backend(load_settings().push) is None


def test_an_option_the_adapter_ignores_is_refused() -> None:
    with pytest.raises(ConfigError, match="takes no payload"):
        backend_for("reference", "http://h", payload={"v": "version"})
    with pytest.raises(ConfigError, match="unknown backend adapter"):
        backend_for("carrier-pigeon", "http://h")


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ("ConnectError on PUT http://ops:pa55@h:1/p: refused", ["pa55", "ops"]),
        ("GET https://user@h/p?access_token=abc&x=1 failed", ["user@", "abc"]),
        ("sent Authorization: Bearer xyz.123 to h", ["xyz.123"]),
        ("url postgresql+psycopg://rt:pw@db/rt", ["pw@"]),
    ],
)
def test_push_errors_are_redacted(text: str, secrets: list[str]) -> None:
    for message in (redact(text), str(PushError(text))):
        assert all(s not in message for s in secrets), message
        assert "***" in message


def test_httpx_request_log_lines_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import httpx

    from regimetune.models import Policy, PolicyVersion

    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(503, text="down")))
    rest = RestBackend("http://ops:pa55@h:1/x?token=abc", token="bearer-secret", client=client)
    caplog.set_level(logging.INFO, logger="httpx")
    with pytest.raises(PushError) as err:
        rest.push(PolicyVersion(version=1, policy=Policy(), created_at=0.0))
    assert "HTTP Request: PUT http://***@h:1/x?token=***" in caplog.text
    for secret in ("pa55", "abc", "bearer-secret"):
        assert secret not in caplog.text and secret not in str(err.value)
