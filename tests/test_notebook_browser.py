"""Notebook 01's first slider cell in a real JupyterLab: headless Debian chromium driven by
Playwright, fast mode inherited from conftest. A student must see one slider block and one
plotly figure under it, and moving a slider must redraw that figure. Screenshots of the cell
before and after the move go to test-artifacts/.

Without /usr/bin/chromium this test skips, unless RANKLAB_REQUIRE_BROWSER=1 (CI), where it fails.
"""
from __future__ import annotations

import re
import shutil

import pytest

from lab.viz.controls import EXPLORER_CLASS
from bench.browser import (ARTIFACTS, ROOT, chromium_page, fail_with_screenshot, jupyterlab_server, require_browser,
                            wait_visible)

pytestmark = pytest.mark.slow
NOTEBOOK = "01_rank_surrogates_and_gradient_flow.ipynb"
FIRST_SLIDER_CELL = 'explore(*INTERACTIVE["surrogates"])'
LOAD_MS = 120_000  # JupyterLab's first load, a kernel importing torch, on a loaded 2-core machine
FIGURE = "el => JSON.stringify({title: el.layout.title.text, data: el.data.map(t => t.y)})"


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    require_browser()
    root = tmp_path_factory.mktemp("lab-root")  # JupyterLab writes checkpoints next to the notebook
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    with jupyterlab_server(root) as url:
        yield url


@pytest.fixture
def page(lab_url):
    with chromium_page(width=1400, height=1000) as p:
        yield p


def run_all_cells(page) -> None:
    """Run > Run All Cells, from the menu bar as a student would."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()


def test_a_slider_cell_shows_one_block_and_a_figure_that_follows_the_slider(lab_url, page):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(lab_url.replace("/?token=", f"/lab/tree/{NOTEBOOK}?token="))
    wait_visible(page, page.locator(".jp-Notebook .jp-Cell").first, "the notebook", LOAD_MS)
    # "Python 3 (ipykernel) | Idle" in the status bar: the kernel is connected (Run All while it
    # is still connecting opens a kernel dialog instead; the toolbar's indicator is idle too early).
    wait_visible(page, page.locator(".jp-StatusBar-Widget").get_by_text(re.compile(r"\| Idle$")), "an idle kernel",
                 LOAD_MS)
    run_all_cells(page)
    # The cell by its code, not by what it should show: the defect showed two blocks and no figure.
    cell = page.locator(".jp-CodeCell", has_text=FIRST_SLIDER_CELL).first
    wait_visible(page, cell.locator(".widget-slider").first, "the first slider block", LOAD_MS)
    cell.scroll_into_view_if_needed()
    plot = cell.locator(".js-plotly-plot")
    wait_visible(page, plot.first, "the figure under the first slider block", LOAD_MS)
    assert cell.locator(".widget-slider").count() == 3, "not one block of tau, rho, delta sliders"
    assert cell.locator(f".{EXPLORER_CLASS}").count() == 1 and plot.count() == 1
    assert "τ = 0.01," in plot.evaluate("el => el.layout.title.text")
    cell.screenshot(path=str(ARTIFACTS / "notebook-explorer-before.png"))
    before = plot.evaluate(FIGURE)

    # The tau slider by keyboard: focus its handle, End = the top of its track (0.1).
    handle = cell.locator(".widget-slider").first.locator(".noUi-handle")
    handle.focus()
    handle.press("End")
    try:
        page.wait_for_function(
            "([sel, before]) => { const cell = document.querySelector(sel);"
            " const p = cell.querySelectorAll('.js-plotly-plot');"
            f" return p.length === 1 && p[0].data && p[0].layout && ({FIGURE})(p[0]) !== before; }}",
            arg=[f".jp-CodeCell:has(.{EXPLORER_CLASS})", before], timeout=LOAD_MS)
    except PlaywrightTimeout:
        fail_with_screenshot(page, "the redrawn figure", "did not change after the tau slider moved to its end")
    cell.screenshot(path=str(ARTIFACTS / "notebook-explorer-after.png"))
    assert plot.count() == 1 and cell.locator(f".{EXPLORER_CLASS}").count() == 1
    assert "τ = 0.1," in plot.evaluate("el => el.layout.title.text")
