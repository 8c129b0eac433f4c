"""The search space, declared once: named bounded parameters, converted to nevergrad's.

>>> space = Space([Param("ttl", 1, 600, integer=True), Param("alpha", 1e-3, 1.0, log=True, init=0.1)])
>>> space.names
('ttl', 'alpha')
>>> sorted(space.to_parametrization().value)
['alpha', 'ttl']
>>> Param("x", 2.0, 1.0)
Traceback (most recent call last):
...
regimetune.models.errors.ConfigError: parameter 'x': low (2.0) must be below high (1.0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import nevergrad as ng
import numpy as np

from regimetune.models.errors import ConfigError, InputError


@dataclass(frozen=True, slots=True)
class Param:
    """One tunable knob in ``[low, high]``; ``integer`` rounds it when evaluated, ``log`` searches
    it on a log scale (needs ``low > 0``), ``init`` is the starting value (default: the middle,
    geometric for ``log``)."""

    name: str
    low: float
    high: float
    integer: bool = False
    log: bool = False
    init: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("a parameter needs a non-empty name")
        what = f"parameter {self.name!r}"
        for label, v in (("low", self.low), ("high", self.high), ("init", self.init)):
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)
            ):
                raise ConfigError(f"{what}: {label} must be a finite number, got {v!r}")
        if not self.low < self.high:
            raise ConfigError(f"{what}: low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ConfigError(f"{what}: a log-scale parameter needs low > 0, got {self.low}")
        if self.init is not None and not self.low <= self.init <= self.high:
            raise ConfigError(f"{what}: init {self.init} lies outside [{self.low}, {self.high}]")

    def to_ng(self) -> ng.p.Scalar:
        """The nevergrad parameter for this knob."""
        low, high = float(self.low), float(self.high)
        init = None if self.init is None else float(self.init)
        if self.log:
            if init is None:
                init = math.sqrt(low * high)
            param: ng.p.Scalar = ng.p.Log(init=init, lower=low, upper=high)
        else:
            param = ng.p.Scalar(init=init, lower=low, upper=high)
        return param.set_integer_casting() if self.integer else param

    def cast(self, value: float) -> float:
        """``value`` as the objective sees it (an ``int`` for integer knobs)."""
        value = min(max(float(value), self.low), self.high)  # no round-off outside the bounds
        return int(np.rint(value)) if self.integer else value


class Space:
    """An ordered set of uniquely named :class:`Param` s."""

    def __init__(self, params: Iterable[Param]) -> None:
        self.params = tuple(params)
        if not self.params:
            raise ConfigError("the search space has no parameters")
        for p in self.params:
            if not isinstance(p, Param):
                raise ConfigError(f"expected Param objects in the space, got {type(p).__name__}")
        names = [p.name for p in self.params]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"duplicate parameter names: {', '.join(dupes)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def __len__(self) -> int:
        return len(self.params)

    def __repr__(self) -> str:
        return f"Space({list(self.params)!r})"

    def to_parametrization(self) -> ng.p.Dict:
        """A fresh ``ng.p.Dict`` with one entry per parameter."""
        return ng.p.Dict(**{p.name: p.to_ng() for p in self.params})

    def cast(self, values: Mapping[str, float]) -> dict[str, float]:
        """Parameter values as the objective sees them, in declaration order."""
        return {p.name: p.cast(values[p.name]) for p in self.params}

    def check(self, values: Mapping[str, float]) -> dict[str, float]:
        """Validate a user-given point (warm start): same names, numbers within bounds."""
        missing = [n for n in self.names if n not in values]
        extra = sorted(set(values) - set(self.names))
        if missing or extra:
            raise InputError(f"point does not match the space: missing {missing}, unknown {extra}")
        out: dict[str, float] = {}
        for p in self.params:
            v = values[p.name]
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise InputError(f"parameter {p.name!r}: expected a finite number, got {v!r}")
            if not p.low <= v <= p.high:
                raise InputError(f"parameter {p.name!r}: {v} lies outside [{p.low}, {p.high}]")
            out[p.name] = float(v)
        return out
