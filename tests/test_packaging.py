"""pyproject.toml declares ranges; constraints.txt pins, inside each range, the versions the tests ran with."""
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            out[canonicalize_name(name)] = version.strip()
    return out


def declared() -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in PROJECT["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra if not r.startswith("pyroinv")]
    return reqs


def test_no_dependency_is_pinned_exactly_in_pyproject():
    exact = [str(r) for r in declared() if any(s.operator in ("==", "===") for s in r.specifier)]
    assert not exact, f"exact pins belong in constraints.txt, not pyproject.toml: {exact}"


def test_every_declared_dependency_has_a_pin_inside_its_range():
    have = pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in have, f"{req.name} is declared but has no pin in constraints.txt"
        assert req.specifier.contains(have[name], prereleases=True), f"{req.name}=={have[name]} is outside {req}"


def test_dask_is_an_extra_not_a_dependency_of_every_user():
    assert not any(canonicalize_name(Requirement(r).name) in ("dask", "distributed") for r in PROJECT["dependencies"])
    assert any(Requirement(r).name == "dask" for r in PROJECT["optional-dependencies"]["grid"])
