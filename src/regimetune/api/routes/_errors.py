"""Error responses documented in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from regimetune.api.schemas import ErrorOut


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        304: "Not modified (the ETag matches).",
        401: "No bearer token.",
        403: "The token does not grant this access.",
        404: "Unknown resource.",
        409: "Conflicts with stored state (an Idempotency-Key used for another batch, a job that "
        "cannot restart) or with the service's (stopping).",
        413: "Request body too large.",
        415: "Unsupported content type.",
        422: "Invalid request (a body that cannot be parsed included), or a knob outside its hard bounds.",
        503: "The store cannot write or read now (full or read-only disk, database away): nothing "
        "was changed; send again after Retry-After seconds.",
    }
    return {
        c: {"model": ErrorOut, "description": text[c]} if c != 304 else {"description": text[c]}
        for c in codes
    }


WRITE = (401, 403, 422, 503)
READ = (401, 403, 503)
