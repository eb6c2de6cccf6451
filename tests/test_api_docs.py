"""The API reference (`make docs`: pdoc on the docstrings) builds without a warning and without a broken
link, and each loss's docstring lists its hyper-parameters as generated from their declarations."""
import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lab.core.hparams import docstring_section
from lab.losses import LOSSES, RODLoss, SupAP

ROOT = Path(__file__).resolve().parents[1]
API_MODULES = re.search(r"^API_MODULES := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()


def require_pdoc() -> None:
    """Skip (locally) or fail (RANKLAB_REQUIRE_PDOC=1, CI) when pdoc is not installed."""
    if importlib.util.find_spec("pdoc") is None:
        problem = "pdoc is not installed (it comes with the dev extra: pip install -e '.[dev]')"
        if os.environ.get("RANKLAB_REQUIRE_PDOC") == "1":
            pytest.fail(f"RANKLAB_REQUIRE_PDOC=1 but {problem}")
        pytest.skip(problem)


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_pdoc()
    out = tmp_path_factory.mktemp("api")
    run = subprocess.run([sys.executable, "-m", "pdoc", "-o", str(out), *API_MODULES], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out, run


@pytest.mark.slow
def test_the_api_reference_builds_without_a_warning(site):
    out, run = site
    assert run.returncode == 0, run.stderr[-3000:]
    warnings = [line for line in run.stderr.splitlines() if "warn" in line.lower()]
    assert warnings == []
    for module in API_MODULES:
        assert (out / (module.replace(".", "/") + ".html")).is_file(), module


@pytest.mark.slow
def test_the_api_reference_has_no_broken_link(site):
    out, _ = site
    pages = {}
    for page in out.rglob("*.html"):
        parser = Links()
        parser.feed(page.read_text())
        pages[page.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for href in parser.hrefs:
            if re.match(r"^[a-z]+:", href):  # http(s), mailto: outside the site
                continue
            target, _, anchor = href.partition("#")
            path = (page.parent / target).resolve() if target else page
            if path not in pages or (anchor and anchor not in pages[path].ids):
                broken.append(f"{page.relative_to(out)}: {href}")
    assert broken == []


@pytest.mark.slow
def test_each_losss_page_shows_its_hyper_parameters(site):
    out, _ = site
    page = (out / "lab" / "losses.html").read_text()
    for cls in LOSSES.values():
        for p in cls.declared.values():
            assert f"<strong>{p.name}</strong> ({p.kind.__name__}, default <code>{p.default!r}</code>" in page, (cls, p)


@pytest.mark.parametrize("cls", [*LOSSES.values(), RODLoss], ids=lambda c: c.__name__)
def test_each_losss_docstring_lists_its_declared_hyper_parameters(cls):
    assert cls.declared, f"{cls.__name__} declares no hyper-parameter"
    for p in cls.declared.values():
        line = (f"- **{p.name}** ({p.kind.__name__}, default `{p.default!r}`, accepted [{p.low:g}, {p.high:g}]): "
                f"{p.meaning}. Equation: `{p.equation}`.")
        assert p.equation and line in cls.__doc__.splitlines(), (cls.__name__, p.name)
    assert cls.__doc__.endswith(docstring_section(cls.declared))


def test_the_docstring_is_generated_so_it_follows_a_changed_declaration():
    changed = SupAP.declared["tau"].but(default=0.05, equation="a changed formula")

    class WarmSupAP(SupAP):
        """Sup-AP at another temperature."""

        declared = type(SupAP.declared)(changed, SupAP.declared["rho"], SupAP.declared["delta"])

    assert WarmSupAP.__doc__.startswith("Sup-AP at another temperature.")
    assert "- **tau** (float, default `0.05`" in WarmSupAP.__doc__ and "`a changed formula`" in WarmSupAP.__doc__
    assert "default `0.01`" in SupAP.__doc__
