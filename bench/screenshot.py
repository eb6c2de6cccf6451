"""The README's picture of the dashboard: SmoothAP vs ROADMAP trained side by side for a short run.

    .venv/bin/python -m bench.screenshot            # -> docs/dashboard.png (~1-2 min on 2 cores)

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
from bench.browser import CHROMIUM, INSTALL_HINT, chromium_page, streamlit_server, wait_idle

MAX_BYTES = 400_000
VIEWS = ("Training", "Retrievals", "Embeddings", "Scores", "Toy explorer")


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
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    env = {"RANKLAB_FAST": "1" if args.fast else "0"}
    query = urlencode({"loss": "smooth_ap", "compare": "1", "loss_b": "roadmap", "steps": args.steps})
    with streamlit_server(env=env) as url, chromium_page(width=1440, height=1000) as page:
        page.goto(f"{url}/?{query}")
        wait_idle(page)
        page.get_by_test_id("stSidebar").get_by_role("button", name="Start", exact=True).click()
        page.get_by_text("· finished").wait_for(timeout=30 * 60_000)
        wait_idle(page)
        if args.view != "Training":
            page.get_by_role("radio", name=args.view, exact=True).click()
            page.get_by_text("· finished").wait_for()
            wait_idle(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')]"
                               ".every(p => p.querySelector('.main-svg'))")
        if page.locator('[data-testid="stException"]').count():
            sys.exit("the page shows an exception: " + page.locator('[data-testid="stException"]').first.inner_text())
        page.mouse.move(1200, 40)  # no hover highlight on the button last clicked
        data = shrink_png(page.screenshot(full_page=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}: {len(data) / 1000:.0f} KB")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
