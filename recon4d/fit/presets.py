"""Named FitConfig presets, stored as TOML files in ``configs/fit_<name>.toml``.

A preset only lists what differs from the dataclass defaults; nested tables map to
nested dataclasses (``[steps]`` -> ``FitConfig.steps``). The ``[priors]`` table sets
the defaults of the frames and priors (``PriorOptions``: ``long_side`` = the working
resolution, say), which ``recon4d fit`` and ``batch`` options still override. Unknown
keys are errors, so a typo in a preset cannot be silently ignored.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from recon4d.fit.trainer import FitConfig
from recon4d.priors.options import PriorOptions

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


def _read(name: str) -> tuple[dict, str]:
    path = CONFIG_DIR / f"fit_{name}.toml"
    if not path.exists():
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(available())}")
    return tomllib.loads(path.read_text()), path.name


def load_preset(name: str) -> FitConfig:
    values, where = _read(name)
    values.pop("priors", None)
    return _merge(FitConfig(), values, where)


def preset_prior_options(name: str) -> PriorOptions:
    """The frames and priors options a preset starts from (its ``[priors]`` table over the defaults)."""
    values, where = _read(resolve_preset_name(name))
    return _merge(PriorOptions(), values.get("priors", {}), f"{where}.priors")


AUTO_PRESETS = {"gpu": "davis", "cpu": "cpu-preview"}
"""What ``auto`` means on a machine with a GPU and on one without."""


def resolve_preset_name(name: str) -> str:
    """``auto`` means ``davis`` on a machine with a GPU and ``cpu-preview`` without; other names stay."""
    if name == "auto":
        import torch

        return AUTO_PRESETS["gpu" if torch.cuda.is_available() else "cpu"]
    return name


def resolve_preset(name: str) -> FitConfig:
    """``load_preset`` of ``resolve_preset_name(name)``."""
    return load_preset(resolve_preset_name(name))
