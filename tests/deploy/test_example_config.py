"""deploy/regimetune.example.toml cannot drift from the Settings model: it names every setting
and no other, its active lines are the defaults, and its commented examples are valid."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from regimetune.api import load_settings
from regimetune.api.settings import Settings
from regimetune.models import ConfigError

from .conftest import ROOT

EXAMPLE = ROOT / "deploy" / "regimetune.example.toml"
_SECTION = re.compile(r"^\[([\w.]+)\]\s*$")
_ACTIVE = re.compile(r"^(\w+)\s*=")
_COMMENTED = re.compile(r"^#\s?(\w+)\s*=\s*\S")


def model_paths(model: type[Any], prefix: str = "") -> set[str]:
    """Dotted paths of every leaf setting of ``model`` (a section is a pydantic model, or a
    dataclass such as the detector's own parameters)."""
    if dataclasses.is_dataclass(model):
        fields = {f.name: f.type for f in dataclasses.fields(model)}
    else:
        fields = {name: f.annotation for name, f in model.model_fields.items()}
    out = set()
    for name, ann in fields.items():
        if isinstance(ann, type) and (issubclass(ann, BaseModel) or dataclasses.is_dataclass(ann)):
            out |= model_paths(ann, f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    return out


def file_paths(text: str) -> tuple[set[str], set[str]]:
    """Dotted paths of the file's active and commented (``# key = value``) settings."""
    active, commented = set(), set()
    section = ""
    for line in text.splitlines():
        if m := _SECTION.match(line):
            section = m.group(1) + "."
        elif m := _ACTIVE.match(line):
            active.add(section + m.group(1))
        elif m := _COMMENTED.match(line):
            commented.add(section + m.group(1))
    return active, commented


def uncommented(text: str) -> str:
    return "\n".join(re.sub(r"^#\s?(\w+\s*=\s*\S)", r"\1", ln) for ln in text.splitlines())


def test_names_every_setting_and_no_other() -> None:
    active, commented = file_paths(EXAMPLE.read_text())
    want = model_paths(Settings)
    assert not active & commented, f"both active and commented: {active & commented}"
    missing, unknown = want - (active | commented), (active | commented) - want
    assert not missing, f"settings missing from {EXAMPLE.name}: {sorted(missing)}"
    assert not unknown, f"{EXAMPLE.name} names settings that do not exist: {sorted(unknown)}"


def test_active_lines_are_the_defaults_and_commented_ones_have_none(clean_env: pytest.MonkeyPatch) -> None:
    from_file = load_settings(EXAMPLE)
    assert from_file.model_dump() == load_settings().model_dump()
    _, commented = file_paths(EXAMPLE.read_text())
    defaults: Any = Settings()
    for path in commented:
        value = defaults
        for part in path.split("."):
            value = getattr(value, part)
        assert value is None, f"{path} has a default ({value!r}): make its line active"


def test_commented_examples_are_valid(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    full = tmp_path / "full.toml"
    full.write_text(uncommented(EXAMPLE.read_text()))
    data = tomllib.loads(full.read_text())
    s = load_settings(full)
    _, commented = file_paths(EXAMPLE.read_text())
    for path in commented:  # each example arrived (nothing was silently dropped)
        value: Any = s
        raw: Any = data
        for part in path.split("."):
            value, raw = getattr(value, part), raw[part]
        assert value is not None, path
        assert raw is not None


def test_the_environment_overrides_the_file_key_by_key(clean_env: pytest.MonkeyPatch) -> None:
    # what the compose file relies on: the mounted example plus REGIMETUNE_* variables
    clean_env.setenv("REGIMETUNE_AUTH__WRITE_TOKENS", '["t"]')
    clean_env.setenv("REGIMETUNE_ENGINE__WINDOW_S", "60")
    s = load_settings(EXAMPLE)
    assert [t.get_secret_value() for t in s.auth.write_tokens] == ["t"]
    assert s.engine.window_s == 60.0
    assert s.auth.protect_reads is False and s.engine.bounds.limit_keys == (1, 100_000_000)


@pytest.mark.parametrize(
    ("line", "typo", "where"),
    [
        ("window_s = 10.0", "windows_s = 10.0", "engine.windows_s"),
        ("max_regimes = 16", "max_regime = 16", "engine.detector.max_regime"),
    ],
)
def test_an_unknown_key_in_the_file_is_refused(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, line: str, typo: str, where: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace(line, typo, 1))
    with pytest.raises(ConfigError, match=rf"invalid setting {re.escape(where)}: no such setting"):
        load_settings(bad)


def test_the_detector_section_is_the_detectors_own_parameters(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    from regimetune.regimes import DetectorParams

    assert isinstance(load_settings().engine.detector, DetectorParams)
    clean_env.setenv("REGIMETUNE_ENGINE__DETECTOR__MAX_REGIMES", "4")
    conf = tmp_path / "d.toml"
    conf.write_text('[engine.detector]\nmin_step = 0.2\nfeatures = ["log_reads", "entropy"]\n')
    d = load_settings(conf).engine.detector
    assert (d.max_regimes, d.min_step, d.features) == (4, 0.2, ("log_reads", "entropy"))
    # the detector's own checks run on the settings
    with pytest.raises(ConfigError, match=r"engine\.detector: match_p must be a probability"):
        load_settings(engine={"detector": {"match_p": 2.0}})
    with pytest.raises(ConfigError, match=r"engine\.detector: regime_s must be longer than block_s"):
        load_settings(engine={"detector": {"block_s": 1000.0, "regime_s": 900.0}})
