"""Credentials out of messages: a push error ends up in the decision log (readable without a
token by default) and in logs, so the URL's userinfo, bearer tokens and secret-looking query
parameters are masked before a message leaves an adapter.

>>> redact("ConnectError on PUT http://ops:hunter2@10.0.0.5:8081/v1/policy?token=abc&x=1")
'ConnectError on PUT http://***@10.0.0.5:8081/v1/policy?token=***&x=1'
>>> redact("Authorization: Bearer s3cret refused")
'Authorization: Bearer *** refused'
"""

from __future__ import annotations

import logging
import re

MASK = "***"
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s?#]+@")
_BEARER = re.compile(r"(?P<scheme>\b(?:bearer|basic|token)\s+)[^\s,;\"']+", re.IGNORECASE)
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;](?:access_token|api_key|apikey|auth|key|password|passwd|pwd|secret|sig|signature|token)=)"
    r"[^&#\s\"']*",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with URL userinfo, bearer/basic credentials and secret query values masked."""
    text = _USERINFO.sub(lambda m: m["scheme"] + MASK + "@", text)
    text = _BEARER.sub(lambda m: m["scheme"] + MASK, text)
    return _SECRET_PARAM.sub(lambda m: m["name"] + MASK, text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message: installed on the ``httpx``
    logger by the REST adapters, since httpx logs every request's full URL (userinfo and
    query included) at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


def redact_logger(name: str) -> None:
    """Redact every record of logger ``name`` from now on (idempotent)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


__all__ = ["MASK", "RedactingFilter", "redact", "redact_logger"]
