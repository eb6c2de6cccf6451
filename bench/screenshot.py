"""The README's picture of the dashboard: SmoothAP vs ROADMAP trained side by side for a short run, and
every view at a projector's 1280 x 720.

    .venv/bin/python -m bench.screenshot            # -> docs/dashboard.png (~1-2 min on 2 cores)
    .venv/bin/python -m bench.screenshot --all      # -> docs/dashboard-<view>.png, every view at 1280 x 720
    .venv/bin/python -m bench.screenshot --class-page   # -> docs/class-page.png (`make class`), at 1280 x 720

Starts `streamlit run app.py` on a free local port, opens it in headless Debian chromium
(/usr/bin/chromium, through Playwright: never `playwright install`), trains until the run
finishes, and saves a viewport screenshot, palette-compressed if needed to stay under 400 KB.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
from bench.browser import CHROMIUM, INSTALL_HINT, chromium_page, class_process, streamlit_server, wait_idle

MAX_BYTES = 400_000
VIEWS = ("Training", "Retrievals", "Embeddings", "Scores", "Toy explorer", "Reproduction")
# What each view shows once it is drawn (the previous view's charts are still there a moment after the click).
SHOWN = {"Training": ".st-key-curves .rl-curves", "Retrievals": ".st-key-live [data-testid='stNumberInput']",
         "Embeddings": ".st-key-live [data-testid='stImage']", "Scores": ".st-key-scores .main-svg",
         "Toy explorer": "[class*='st-key-toy_fig'] .main-svg", "Reproduction": ".st-key-repro_table table"}
PROJECTOR = (1280, 720)
CHARTS_DRAWN = ("() => [...document.querySelectorAll('.js-plotly-plot')].every(p => p.querySelector('.main-svg'))"
                " && !document.querySelector('[data-testid=\"stStatusWidget\"]')")


def view_file(view: str) -> str:
    return f"dashboard-{view.lower().replace(' ', '-')}.png"


def shrink_png(data: bytes, limit: int = MAX_BYTES) -> bytes:
    """The PNG itself if small enough, else a 256-colour palette version (charts lose nothing visible)."""
    if len(data) <= limit:
        return data
    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").quantize(256).save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps of each run")
    parser.add_argument("--view", choices=VIEWS, default="Training")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--fast", action="store_true", help="fast mode (12 classes, tiny batches): a quick check")
    parser.add_argument("--all", action="store_true", help="every view at 1280 x 720 to docs/dashboard-<view>.png")
    parser.add_argument("--class-page", action="store_true", help="the class page at 1280 x 720 to docs/class-page.png")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    env = {"RANKLAB_FAST": "1" if args.fast else "0"}
    query = urlencode({"loss": "smooth_ap", "compare": "1", "loss_b": "roadmap", "steps": args.steps})
    if args.class_page:
        return class_page(env, query, args.out.parent / "class-page.png", args.steps)
    size = PROJECTOR if args.all else (1440, 1000)
    with streamlit_server(env=env) as url, chromium_page(*size) as page:
        page.goto(f"{url}/?{query}")
        wait_idle(page)
        page.get_by_test_id("stSidebar").get_by_role("button", name="Start", exact=True).click()
        page.get_by_text("· finished").wait_for(timeout=30 * 60_000)
        wait_idle(page)
        if args.all:
            return every_view(page, args.out.parent if args.out.suffix else args.out)
        if args.view != "Training":
            page.get_by_role("radio", name=args.view, exact=True).click()
            page.get_by_text("· finished").wait_for()
            wait_idle(page)
        page.locator(".js-plotly-plot, .rl-curves").first.wait_for()
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')]"
                               ".every(p => p.querySelector('.main-svg'))")
        if page.locator('[data-testid="stException"]').count():
            sys.exit("the page shows an exception: " + page.locator('[data-testid="stException"]').first.inner_text())
        page.mouse.move(1200, 40)  # no hover highlight on the button last clicked
        data = shrink_png(page.screenshot(full_page=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}: {len(data) / 1000:.0f} KB")


def class_page(env: dict[str, str], query: str, out: Path, steps: int) -> None:
    """The class page (`make class`) with the same two runs, finished, at a projector's 1280 x 720."""
    with class_process(env=env, timeout=300) as (url, _, _), chromium_page(*PROJECTOR) as page:
        page.goto(f"{url}/?{query}")
        page.wait_for_function("() => !document.getElementById('start').disabled", timeout=10 * 60_000)
        page.click("#start")
        last_steps = ("n => { const lines = [...document.querySelectorAll("
                      "'#curves .rl-line[data-metric=\"loss\"] polyline')]; "
                      "return lines.length === 2 && lines.every(l => +l.dataset.x.split(',').pop() === n); }")
        page.wait_for_function(last_steps, arg=steps, timeout=30 * 60_000)  # both runs' last step drawn
        page.mouse.move(1200, 40)
        data = shrink_png(page.screenshot(full_page=False))
    out.write_bytes(data)
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {len(data) / 1000:.0f} KB")


def every_view(page, folder: Path) -> None:
    """Each view of the finished page, as the projector shows it (the viewport, unscrolled)."""
    folder.mkdir(parents=True, exist_ok=True)
    for view in VIEWS:
        page.get_by_role("radio", name=view, exact=True).click()
        page.locator(SHOWN[view]).first.wait_for(timeout=10 * 60_000)
        wait_idle(page)
        page.wait_for_function(CHARTS_DRAWN, timeout=10 * 60_000)
        if page.locator('[data-testid="stException"]').count():
            sys.exit(f"{view}: the page shows an exception: "
                     + page.locator('[data-testid="stException"]').first.inner_text())
        page.mouse.move(1200, 40)
        data = shrink_png(page.screenshot(full_page=False))
        (folder / view_file(view)).write_bytes(data)
        print(f"{folder / view_file(view)}: {len(data) / 1000:.0f} KB", flush=True)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
