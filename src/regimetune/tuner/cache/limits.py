"""Key limits stated as absolute keys or as a fraction of the run's keyspace.

A policy tuned or hand-set for one run ("100K keys, then 10K" for a 150K-key run) means
something else on a run whose keyspace stays at 20K keys (its thresholds never trigger).
A ``KeyLimit`` says which is meant and resolves to keys on a given trace.

>>> KeyLimit.parse("10000").resolve(50_000), KeyLimit.parse("5%").resolve(50_000)
(10000, 2500)
>>> KeyLimit.of(0.1).resolve(50_000)
5000
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from regimetune.models.errors import InputError


@dataclass(frozen=True, slots=True)
class KeyLimit:
    """``keys`` absolute keys, or ``fraction`` of the keyspace (exactly one is set)."""

    keys: int | None = None
    fraction: float | None = None

    def __post_init__(self) -> None:
        if (self.keys is None) == (self.fraction is None):
            raise InputError("a key limit is either a number of keys or a fraction of the keyspace")
        if self.keys is not None and (isinstance(self.keys, bool) or self.keys < 1):
            raise InputError(f"a key limit must be >= 1 key, got {self.keys}")
        if self.fraction is not None and not (math.isfinite(self.fraction) and 0.0 < self.fraction <= 1.0):
            raise InputError(
                f"a key limit as a fraction of the keyspace must be in (0, 1], got {self.fraction}"
            )

    @classmethod
    def of(cls, value: int | float | str | KeyLimit) -> KeyLimit:
        """From keys (an int >= 1), a fraction (a float < 1), "N" or "P%"."""
        if isinstance(value, KeyLimit):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, float) and value < 1.0:
            return cls(fraction=value)
        if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
            return cls(keys=int(value))
        raise InputError(f"a key limit is a number of keys or a fraction below 1, got {value!r}")

    @classmethod
    def parse(cls, text: str) -> KeyLimit:
        """``"10000"`` (keys), ``"5%"`` or ``"0.05"`` (of the keyspace)."""
        t = text.strip()
        try:
            if t.endswith("%"):
                return cls(fraction=float(t[:-1]) / 100.0)
            v = float(t)
        except ValueError:
            raise InputError(
                f"a key limit is a number of keys or a percentage like '5%', got {text!r}"
            ) from None
        return cls.of(int(v) if v >= 1.0 and v.is_integer() else v)

    def resolve(self, n_keys: int) -> int:
        """Keys on a trace of ``n_keys`` distinct keys (at least 1)."""
        if self.keys is not None:
            return self.keys
        return max(1, round(float(self.fraction or 0.0) * n_keys))

    def __str__(self) -> str:
        return (
            f"{self.keys} keys"
            if self.keys is not None
            else f"{(self.fraction or 0.0) * 100:g}% of the keyspace"
        )


__all__ = ["KeyLimit"]
