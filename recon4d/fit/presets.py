"""Named FitConfig presets, stored as TOML files in ``configs/fit_<name>.toml``.

A preset only lists what differs from the dataclass defaults; nested tables map to
nested dataclasses (``[steps]`` -> ``FitConfig.steps``). Unknown keys are errors, so
a typo in a preset cannot be silently ignored.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from recon4d.fit.trainer import FitConfig

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def available() -> list[str]:
    return sorted(p.stem.removeprefix("fit_") for p in CONFIG_DIR.glob("fit_*.toml"))


def _merge(obj, values: dict, where: str):
    fields = {f.name: f for f in dataclasses.fields(obj)}
    changes = {}
    for key, value in values.items():
        if key not in fields:
            raise ValueError(f"{where}: unknown setting {key!r}; known: {sorted(fields)}")
        current = getattr(obj, key)
        changes[key] = _merge(current, value, f"{where}.{key}") if isinstance(value, dict) else value
    return dataclasses.replace(obj, **changes)


def load_preset(name: str) -> FitConfig:
    path = CONFIG_DIR / f"fit_{name}.toml"
    if not path.exists():
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(available())}")
    return _merge(FitConfig(), tomllib.loads(path.read_text()), path.name)


AUTO_PRESETS = {"gpu": "davis", "cpu": "cpu-preview"}
"""What ``auto`` means on a machine with a GPU and on one without."""


def resolve_preset(name: str) -> FitConfig:
    """``load_preset``, where ``auto`` means ``davis`` on a machine with a GPU and ``cpu-preview`` without."""
    if name == "auto":
        import torch

        name = AUTO_PRESETS["gpu" if torch.cuda.is_available() else "cpu"]
    return load_preset(name)
