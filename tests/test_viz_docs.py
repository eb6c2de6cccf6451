"""docs/figures.md shows every rendered figure, each small, next to the statement it reproduces."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "figures.md"


def test_every_linked_figure_exists_and_is_small():
    links = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", DOC.read_text())
    assert len(links) >= 10  # the toy figures at least
    for link in links:
        path = ROOT / "docs" / link
        assert path.exists(), link
        assert path.stat().st_size < 300_000, f"{link} is {path.stat().st_size} bytes"


def test_every_png_is_linked_with_a_paper_statement():
    text = DOC.read_text()
    for png in (ROOT / "docs" / "figures").glob("*.png"):
        section = text.split(f"<!-- figure: {png.stem} -->", 1)
        assert len(section) == 2, f"{png.name} is not in docs/figures.md"
        body = section[1].split("<!-- figure:", 1)[0]
        assert f"(figures/{png.name})" in body and "*Paper:*" in body and "*Measured:*" in body
