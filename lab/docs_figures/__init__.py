"""The notebooks' figures rendered for the docs: docs/figures/*.png and docs/figures.md
(``python -m lab.docs_figures``, or ``make figures``).

toy_figures: the figures drawn from a few numbers; trained_figures: those drawn from trained models or read from the
reproduction study; entries: each figure with its paper statement; page: rendering and the page.
"""
from lab.docs_figures.entries import ENTRIES, Entry

__all__ = ["ENTRIES", "Entry"]
