"""The files a release needs exist and agree: one version in pyproject.toml, lab.__version__, CHANGELOG.md's
latest entry and CITATION.cff; the MIT license pyproject declares; py.typed shipped; the papers cited."""
import re
from pathlib import Path

import pytest
import yaml

import lab

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
CITATION = yaml.safe_load((ROOT / "CITATION.cff").read_text())


def changelog_versions() -> list[str]:
    return re.findall(r"^## (\d+\.\d+\.\d+)\s*$", (ROOT / "CHANGELOG.md").read_text(), re.M)


def test_one_version_everywhere():
    versions = {"pyproject.toml": PROJECT["version"], "lab.__version__": lab.__version__,
                "CHANGELOG.md (latest)": changelog_versions()[0], "CITATION.cff": str(CITATION["version"])}
    assert len(set(versions.values())) == 1, versions


def test_the_changelog_lists_versions_newest_first():
    versions = [tuple(int(x) for x in v.split(".")) for v in changelog_versions()]
    assert versions and versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)


def test_the_license_is_the_mit_license_pyproject_declares():
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    assert CITATION["license"] == "MIT"


def test_citation_cff_has_what_the_format_requires():
    assert CITATION["cff-version"] == "1.2.0" and CITATION["type"] == "software"
    for key in ("message", "title", "authors"):
        assert CITATION[key], key
    for ref in CITATION["references"]:
        assert ref["title"] and ref["authors"] and ref["type"], ref


def test_the_readme_cites_every_paper_of_citation_cff():
    cite = (ROOT / "README.md").read_text().split("## How to cite", 1)[1]
    missing = [ref["title"] for ref in CITATION["references"] if ref["title"] not in cite]
    assert not missing, f"README's How to cite lacks {missing}"


def test_py_typed_is_package_data_and_the_metadata_is_there():
    assert (ROOT / "lab" / "py.typed").is_file()
    assert "py.typed" in SETUPTOOLS["package-data"]["lab"]
    assert "Typing :: Typed" in PROJECT["classifiers"]
    assert PROJECT["name"] == "ranklab-retrieval"
    assert f"`{PROJECT['name']}`" in (ROOT / "README.md").read_text()
