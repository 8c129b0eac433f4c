"""Adapters that push over HTTP: a generic REST adapter and the one for our reference
backend.

How a response is read (the push contract, see ``backend/CONTRACT.md``):

======================================  =============================================
2xx                                     delivered (``duplicate`` if the body says so)
409 whose body says "already applied"   delivered, as a duplicate (idempotent re-push)
409 with code stale_version or          a version conflict: refused, and the backend's
version_conflict                        ``current_version`` reported (a new version goes above it)
408, 425, 429, 5xx, connect/read errors transient: the outbox tries again later
other 4xx (incl. other 409s), 3xx       permanent: the backend refused this version
======================================  =============================================

The version is the idempotency key: it goes in the ``Idempotency-Key`` header and in the
body (at ``version_field``).

>>> from regimetune.models import Policy, PolicyVersion
>>> rb = RestBackend("http://storage.example/api/weights", payload={
...     "id": "version", "weights.load": "policy.weights.w_load"})
>>> rb.build_body(PolicyVersion(version=4, policy=Policy(), created_at=0.0))
{'id': 4, 'weights': {'load': 1.0}, 'version': 4}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from regimetune.models import ConfigError, Policy, PolicyVersion
from regimetune.push.base import (
    BaseBackend,
    PermanentPushError,
    PushReceipt,
    PushStatus,
    TransientPushError,
    VersionConflictError,
)
from regimetune.push.redact import redact, redact_logger

_TRANSIENT_4XX = frozenset({408, 425, 429})
_DUPLICATE_WORDS = ("already applied", "already_applied", "duplicate")
_MISSING = object()


def _get_path(doc: Any, path: str) -> Any:
    node = doc
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"payload path {path!r} crosses the non-object field {part!r}")
        node = child
    node[parts[-1]] = value


def _reason(response: httpx.Response) -> str:
    """The backend's own words: ``detail`` (or ``detail.reason``) of a JSON body, else text."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:300] or response.reason_phrase
    if isinstance(body, Mapping):
        detail = body.get("detail", body.get("reason", body.get("message")))
        if isinstance(detail, Mapping):
            detail = detail.get("reason", detail)
        if detail is not None:
            return detail if isinstance(detail, str) else json.dumps(detail)[:300]
    return json.dumps(body)[:300]


def _version_conflict(response: httpx.Response) -> tuple[str, int | None] | None:
    """(code, the backend's ``current_version``) of a 409 that says the version number is
    used up at the backend (``stale_version``, ``version_conflict``), else None."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, Mapping):
        return None
    code = body.get("code")
    if code not in ("stale_version", "version_conflict"):
        return None
    current = body.get("current_version")
    return code, current if isinstance(current, int) and not isinstance(current, bool) else None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: ignore, our own backoff applies
    return max(seconds, 0.0)


class RestBackend(BaseBackend):
    """Push a policy version as JSON to ``url`` with ``method``.

    ``payload`` maps fields of the backend's JSON (dotted paths) to fields of our
    ``PolicyVersion`` (dotted paths into its JSON form, e.g. ``policy.weights.w_load``);
    without it the whole ``PolicyVersion`` is sent. The version also goes to
    ``version_field`` unless the mapping fills it. ``token`` sends a bearer token;
    ``client`` injects an ``httpx.Client`` (e.g. with a ``MockTransport``) that the adapter
    then does not close.
    """

    def __init__(
        self,
        url: str,
        *,
        method: str = "PUT",
        payload: Mapping[str, str] | None = None,
        version_field: str = "version",
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = 5.0,
        client: httpx.Client | None = None,
        name: str = "rest",
    ) -> None:
        self.url = url
        self.method = method
        self.payload = payload
        self.version_field = version_field
        self.headers = headers
        self.token = token
        self.timeout = timeout
        self.client = client
        self.name = name
        self._own_client: httpx.Client | None = None
        redact_logger("httpx")  # httpx logs each request's URL, credentials included
        if client is None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"backend URL must be http(s), got {redact(url)!r}")
        self.build_body(PolicyVersion(version=1, policy=Policy(), created_at=0.0))  # a bad mapping fails now

    # -- building the request --------------------------------------------------------------
    def build_body(self, version: PolicyVersion) -> dict[str, Any]:
        """The JSON body sent for ``version``."""
        source = version.model_dump(mode="json")
        if self.payload is None:
            body: dict[str, Any] = dict(source)
        else:
            body = {}
            for target, path in self.payload.items():
                value = _get_path(source, path)
                if value is _MISSING:
                    raise ConfigError(
                        f"payload field {target!r} maps to {path!r}, which a policy version lacks"
                    )
                _set_path(body, target, value)
        if _get_path(body, self.version_field) is _MISSING:
            _set_path(body, self.version_field, version.version)
        return body

    def build_headers(self, version: PolicyVersion) -> dict[str, str]:
        headers = {"Idempotency-Key": str(version.version), "Accept": "application/json"}
        headers.update(self.headers or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _client(self) -> httpx.Client:
        if self.client is not None:
            return self.client
        if self._own_client is None:
            self._own_client = httpx.Client(timeout=self.timeout, follow_redirects=False)
        return self._own_client

    # -- the adapter ---------------------------------------------------------------------------
    def push(self, version: PolicyVersion) -> PushReceipt:
        n = version.version
        body = self.build_body(version)
        try:
            response = self._client().request(
                self.method, self.url, json=body, headers=self.build_headers(version)
            )
        except httpx.TransportError as exc:
            raise TransientPushError(
                f"{self.name}: {type(exc).__name__} on {self.method} {self.url}: {exc}", version=n
            ) from exc
        return self.read_response(response, version)

    def read_response(self, response: httpx.Response, version: PolicyVersion) -> PushReceipt:
        """Classify ``response`` as a receipt or raise the matching push error."""
        n, code = version.version, response.status_code
        reason = _reason(response)
        if 200 <= code < 300:
            status: PushStatus = "duplicate" if self._says_duplicate(response) else "applied"
            return PushReceipt(version=n, status=status, backend=self.name, detail=reason[:300])
        if code == 409 and self._says_duplicate(response):
            return PushReceipt(version=n, status="duplicate", backend=self.name, detail=reason)
        message = f"{self.name} answered {code} to version {n}: {reason}"
        if code == 409:
            conflict = _version_conflict(response)
            if conflict is not None:
                kind, current = conflict
                raise VersionConflictError(message, version=n, current_version=current or n, code=kind)
        if code >= 500 or code in _TRANSIENT_4XX:
            raise TransientPushError(message, version=n, status_code=code, retry_after=_retry_after(response))
        raise PermanentPushError(message, version=n, status_code=code)

    @staticmethod
    def _says_duplicate(response: httpx.Response) -> bool:
        try:
            body = response.json()
        except ValueError:
            return any(w in response.text.lower() for w in _DUPLICATE_WORDS)
        if isinstance(body, Mapping):
            status = body.get("status")
            if isinstance(status, str) and status.lower() in ("duplicate", "already_applied"):
                return True
            detail = body.get("detail")
            if isinstance(detail, Mapping):
                detail = detail.get("reason", "")
            if isinstance(detail, str):
                return any(w in detail.lower() for w in _DUPLICATE_WORDS[:2])
        return False

    def close(self) -> None:
        if self._own_client is not None:
            self._own_client.close()
            self._own_client = None


class ReferenceBackend(RestBackend):
    """The adapter for regimetune's reference backend (``regimetune backend``): ``PUT
    {base_url}/v1/policy`` with the whole ``PolicyVersion``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 5.0,
        client: httpx.Client | None = None,
        name: str = "reference",
    ) -> None:
        super().__init__(
            base_url.rstrip("/") + "/v1/policy",
            method="PUT",
            token=token,
            timeout=timeout,
            client=client,
            name=name,
        )
        self.base_url = base_url

    def current(self) -> PolicyVersion | None:
        """The version in force at the backend (None before the first push)."""
        try:
            response = self._client().get(self.url, headers=self._read_headers())
        except httpx.TransportError as exc:
            raise TransientPushError(f"{self.name}: cannot reach {self.url}: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise PermanentPushError(
                f"{self.name} answered {response.status_code}: {_reason(response)}",
                status_code=response.status_code,
            )
        return PolicyVersion.model_validate(response.json())

    def held_version(self) -> int | None:
        """The version number in force at the backend (None before the first push)."""
        current = self.current()
        return None if current is None else current.version

    def _read_headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


__all__ = ["ReferenceBackend", "RestBackend"]
