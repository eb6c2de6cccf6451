"""lab.docs_figures (``make figures``) draws what it is asked and writes its page: a figure drawn gets
its PNG and its measured sentence, one not drawn keeps the sentence of the page it replaces, and
every entry's draw function answers with a figure and a sentence."""
from __future__ import annotations

import pytest

from lab.docs_figures import ENTRIES
from lab.docs_figures import page

TOY = [e for e in ENTRIES if not e.study and not e.trained]


def test_entries_have_distinct_names_and_a_notebook():
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names))
    assert all(e.notebook.isdigit() for e in ENTRIES)
    assert all((e.draw is None) == bool(e.study) for e in ENTRIES)  # a study's figure is drawn by the study


def test_one_figure_drawn_and_the_others_keep_their_sentences(tmp_path):
    first, second = TOY[0].name, TOY[1].name
    page.main(["--only", first, "--out", str(tmp_path)])
    doc = tmp_path / "figures.md"
    assert (tmp_path / "figures" / f"{first}.png").stat().st_size > 0
    assert not (tmp_path / "figures" / f"{second}.png").exists()
    measured = page.previous_measurements(doc)
    assert set(measured) == {first}
    text = doc.read_text()
    assert all(f"<!-- figure: {e.name} -->" in text for e in ENTRIES)
    page.main(["--only", second, "--out", str(tmp_path)])  # redraws the second: the first's sentence stays
    after = page.previous_measurements(doc)
    assert set(after) == {first, second} and after[first] == measured[first]
    assert (tmp_path / "figures" / f"{second}.png").exists()


@pytest.mark.parametrize("entry", TOY, ids=[e.name for e in TOY])
def test_every_toy_figure_draws_with_a_sentence(entry):
    fig, text = entry.draw()
    assert fig.data and isinstance(text, str) and text
