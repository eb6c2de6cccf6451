"""Render the notebooks' figures to docs/figures/*.png and write docs/figures.md.

    python -m lab.docs_figures           # the toy figures (seconds)
    python -m lab.docs_figures --training # also the trained-model figures (full runs: tens of minutes on CPU)

Each figure sits next to the paper statement it reproduces and the numbers measured while
drawing it. PNGs are drawn with matplotlib from the plotly figures (lab.viz.render), at
100 dpi. The trained-model figures use full-size runs whatever RANKLAB_FAST says; a figure
that was not rendered keeps its entry, marked as such.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from lab.docs_figures import ENTRIES, Entry
from lab.experiments import hierarchical_runs
from lab.experiments import runs
from lab.studies.reporting.study_sections import TITLES as STUDY_TITLES
from lab.studies.reporting.verdicts import reproduction_rows
from lab.viz import retrieval_views
from lab.viz.render import save_png

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "figures"
DOC = ROOT / "docs" / "figures.md"


def render(entries: list[Entry], with_training: bool, fast: bool, out: Path = OUT) -> dict[str, str]:
    """Draw each entry's PNG; {name: measured sentence} for those drawn."""
    measured = {}
    for e in entries:
        if e.study or (e.trained and not with_training):
            continue
        start = time.perf_counter()
        fig, text = e.draw(fast) if e.trained else e.draw()
        path = save_png(fig, out / f"{e.name}.png")
        seconds = time.perf_counter() - start
        # Trained figures: how long this one took (its runs, unless an earlier figure trained them).
        measured[e.name] = text + (f" [{seconds:.0f} s to draw]" if e.trained else "")
        print(f"{path}: {path.stat().st_size / 1024:.0f} KB, {seconds:.1f} s", flush=True)
    return measured


def previous_measurements(doc: Path = DOC) -> dict[str, str]:
    """Measured sentences of docs/figures.md, to keep those of figures not redrawn this time."""
    if not doc.exists():
        return {}
    out, name = {}, None
    for line in doc.read_text().splitlines():
        if line.startswith("<!-- figure: "):
            name = line.split()[2]
        elif name and line.startswith("*Measured:* "):
            out[name] = line[len("*Measured:* "):]
            name = None
    return out


def write_doc(entries: list[Entry], measured: dict[str, str], out: Path = OUT, doc: Path = DOC) -> None:
    full = runs.run_settings(fast=False)
    # the comparisons are read where the notebooks read them: v2's 5 seeds once its study 1 is complete, v1's 3 before
    seeds = "/".join(str(n) for n in sorted({len(r["seeds"]) for r in reproduction_rows("methods")})) or "the study's"
    lines = ["# Figures", "",
             "Each figure of the notebooks, rendered by `python -m lab.docs_figures` (trained-model figures: "
             "`--training`), next to the statement of the paper it reproduces and the numbers measured when it was "
             "drawn. Interactive versions (sliders) are in the notebooks.", "",
             "Trained-model figures: `python -m lab.docs_figures --training` (full mode whatever `RANKLAB_FAST` says). "
             f"Each run trains a {full['model']} (64-d embedding) on all glyph training classes for {full['steps']} "
             "steps of "
             f"{full['batch_size']} images (m = {full['m']} per class, Adam, lr 1e-3, seed {full['seed']}) and is "
             f"evaluated on a fixed subset of ~{full['eval_max_items']} test images (whole classes, every image a "
             f"query); HAPPIER vs SmoothAP with the hierarchical sampler for "
             f"{hierarchical_runs.hierarchical_overrides(fast=False).get('steps', full['steps'])} steps; the maps, the "
             "retrieved images and the class means are those of the evaluation subset (t-SNE on at most "
             f"~{retrieval_views.FULL_TSNE_ITEMS} points). These are the notebooks' full-mode models, loaded from the "
             "checkpoints they ship (`lab/data/checkpoints/`, made by `python -m lab.experiments.checkpoints make`), "
             "one run per setting: differences of a point or two are within seed-to-seed noise. The times in brackets "
             "were measured on 2 CPU cores shared with other jobs. The loss comparison and the recall losses "
             "(mean ± std "
             f"over {seeds} seeds) and the batch-size, gap and bin-count figures come from the reproduction study "
             "([results.md](results.md), `results/*.json`): no training.", ""]
    for e in entries:
        lines += [f"<!-- figure: {e.name} -->", f"## {e.title} — {e.source}", "",
                  f"*Paper:* {e.statement}", ""]
        if e.study:
            # A study that protocol v2 completed has only its v2 figure (the page's render deletes v1's).
            v2 = not (out / f"study_{e.study}.png").exists() and (out / f"study_{e.study}_v2.png").exists()
            png = out / f"study_{e.study}{'_v2' if v2 else ''}.png"
            lines += ([f"![{e.title}]({out.name}/{png.name})", ""] if png.exists() else []) + [
                f"*Measured* over {5 if v2 else 3} seeds in the reproduction study{' (protocol v2)' if v2 else ''}, "
                f"with the paper's numbers, the verdict and the command: [results.md, {STUDY_TITLES[e.study]}]"
                f"(results.md) (`python -m lab study {e.study}{' --protocol v2' if v2 else ''}`).", ""]
        elif (out / f"{e.name}.png").exists() and e.name in measured:
            lines += [f"![{e.title}]({out.name}/{e.name}.png)", "", f"*Measured:* {measured[e.name]}", ""]
        else:
            lines += ["*Not rendered yet:* run `python -m lab.docs_figures --training` (full-size training runs).", ""]
        notebook = next(iter(sorted((ROOT / "notebooks").glob(f"{e.notebook}_*.ipynb"))), None)
        if notebook is not None:
            lines += [f"Notebook: [{notebook.name}](../notebooks/{notebook.name}).", ""]
    doc.write_text("\n".join(lines))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.docs_figures", description=__doc__.splitlines()[0])
    parser.add_argument("--training", action="store_true", help="also train the models of the trained-model figures")
    parser.add_argument("--fast", action="store_true",
                        help="trained-model figures from fast-mode runs (smoke test only)")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=[e.name for e in ENTRIES],
                        help="draw only these figures (the others keep their files and measured sentences)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write figures/ and figures.md under this folder instead of docs/ (e.g. for --fast)")
    args = parser.parse_args(argv)
    out, doc = (args.out / "figures", args.out / "figures.md") if args.out else (OUT, DOC)
    drawn = [e for e in ENTRIES if not args.only or e.name in args.only]
    measured = {**previous_measurements(doc), **render(drawn, args.training, args.fast, out)}
    write_doc(ENTRIES, measured, out, doc)
    print(f"wrote {doc}")

