"""The pinned environment (constraints.txt) must cover what pyproject.toml asks for.

A dependency added to pyproject.toml without a pin would be resolved anew on every install, and
benches would stop comparing across machines; a pin outside pyproject's range would make
`make setup` fail to resolve. Both are caught here, before CI's install does it less clearly.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"constraints.txt pins exactly, got {line!r}"
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _installed_requirements() -> list[Requirement]:
    """What `make setup` installs: the dependencies plus the extras it names (test, vqa)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + extras["test"] + extras["vqa"]]


def test_every_dependency_is_pinned_inside_its_range():
    pins = _pins()
    for requirement in _installed_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is in pyproject.toml but not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}"
        )


def test_makefile_installs_with_the_constraints():
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()
