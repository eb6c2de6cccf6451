"""Draw a builder's plotly figure with matplotlib, to write PNGs without a browser.

plotly's own image export (kaleido) needs a Chrome install; the documentation figures only
use a small part of plotly (scatter and bar traces, subplots laid out by axis domains,
annotations with or without arrows, line shapes), which this module maps one to one onto
matplotlib. Anything else raises, so a figure never renders silently wrong.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Union

from matplotlib import patches, transforms
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

DASHES = {None: "-", "solid": "-", "dash": "--", "dot": ":", "dashdot": "-.", "longdash": "--"}
SYMBOLS = {"circle": "o", "square": "s", "diamond": "D", "triangle-up": "^", "triangle-down": "v", "cross": "P",
           "x": "X", "star": "*", "line-ns": "|"}  # plotly marker symbol (its "-open" variant too) -> matplotlib
PT_PER_PX = 0.75  # plotly sizes are CSS pixels (1/96 in), matplotlib's points are 1/72 in


def _color(c: Any, default: Any = None) -> Any:
    """plotly colour -> matplotlib colour ('rgba(r,g,b,a)' strings become tuples)."""
    if isinstance(c, str) and c.startswith("rgb"):
        parts = [float(v) for v in re.findall(r"[\d.]+", c)]
        rgb = [v / 255 for v in parts[:3]]
        return tuple(rgb + ([parts[3]] if len(parts) > 3 else []))
    if isinstance(c, (list, tuple)):
        return [_color(v) for v in c]
    return default if c is None else c


def _plain(text: Any) -> str:
    """plotly's HTML-ish text (<b>, <br>) -> matplotlib text."""
    text = "" if text is None else str(text)
    return re.sub(r"<[^>]+>", "", text.replace("<br>", "\n"))


def static_size(layout: dict) -> tuple[int, int]:
    """(width, height) in pixels of a PNG of a figure: its fixed width, else the width it was
    designed at (``meta["static_width"]``, :func:`lab.viz.style.responsive`), else 700."""
    meta = layout.get("meta") if isinstance(layout.get("meta"), dict) else {}
    return int(layout.get("width") or meta.get("static_width") or 700), int(layout.get("height") or 450)


def _axes_layout(layout: dict, fig) -> dict[str, Any]:
    """{'x': Axes, 'x2': Axes, ..., 'y': Axes, ...}: one matplotlib Axes per plotly axis pair."""
    width, height = static_size(layout)
    m = {"l": 80, "r": 80, "t": 100, "b": 80, **(layout.get("margin") or {})}
    left, right = m["l"] / width, 1 - m["r"] / width
    bottom, top = m["b"] / height, 1 - m["t"] / height
    names = sorted({k for k in layout if re.fullmatch(r"xaxis\d*", k)} | {"xaxis"})
    axes: dict[str, Any] = {}
    for key in names:
        xname = "x" + key[5:]
        xa = layout.get(key) or {}
        yname = xa.get("anchor") or "y" + key[5:]
        ya = layout.get("yaxis" + yname[1:]) or {}
        (x0, x1), (y0, y1) = xa.get("domain") or (0, 1), ya.get("domain") or (0, 1)
        rect = [left + x0 * (right - left), bottom + y0 * (top - bottom),
                (x1 - x0) * (right - left), (y1 - y0) * (top - bottom)]
        ax = fig.add_axes(rect)
        axes[xname], axes[yname] = ax, ax
        for spec, set_scale, set_lim, set_label, axis in (
                (xa, ax.set_xscale, ax.set_xlim, ax.set_xlabel, ax.xaxis),
                (ya, ax.set_yscale, ax.set_ylim, ax.set_ylabel, ax.yaxis)):
            if spec.get("type") == "log":
                set_scale("log")
            if spec.get("range") is not None:
                lo, hi = spec["range"]
                set_lim(*((10 ** lo, 10 ** hi) if spec.get("type") == "log" else (lo, hi)))
            set_label(_plain((spec.get("title") or {}).get("text")))
            if spec.get("tickvals") is not None:
                axis.set_ticks(list(spec["tickvals"]), [_plain(t) for t in spec.get("ticktext") or spec["tickvals"]])
                axis.set_minor_locator(NullLocator())  # plotly shows only these; a log axis would add 3x10^1 etc.
            if spec.get("showticklabels") is False:
                axis.set_tick_params(labelbottom=False, labelleft=False)
            if spec.get("visible") is False:
                axis.set_visible(False)
                ax.spines["left" if axis is ax.yaxis else "bottom"].set_visible(False)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes["_plot_area"] = (left, bottom, right - left, top - bottom)
    return axes


def _transform(ref: str, which: str, axes: dict, fig):
    """A one-coordinate transform for a plotly reference: 'x2', 'x2 domain' or 'paper' (None: 'x' / 'y')."""
    ref = ref or which
    if ref == "paper":
        left, bottom, w, h = axes["_plot_area"]
        return transforms.Affine2D().scale(w, h).translate(left, bottom) + fig.transFigure
    name = ref.split()[0]
    ax = axes[name]
    return ax.transAxes if ref.endswith("domain") else ax.transData


def _blend(xref, yref, axes, fig):
    return transforms.blended_transform_factory(_transform(xref, "x", axes, fig), _transform(yref, "y", axes, fig))


def _scatter(ax, t: dict) -> None:
    mode = t.get("mode") or "lines"
    x, y = list(t.get("x") or []), list(t.get("y") or [])
    line, marker = t.get("line") or {}, t.get("marker") or {}
    label = t.get("name") if t.get("showlegend", True) is not False else None
    if "lines" in mode:
        if line.get("shape") not in (None, "linear", "hv"):
            raise NotImplementedError(f"line shape {line.get('shape')!r}")
        draw = (lambda *a, **k: ax.step(*a, where="post", **k)) if line.get("shape") == "hv" else ax.plot
        draw(x, y, color=_color(line.get("color")), linestyle=DASHES[line.get("dash")],
             linewidth=(line.get("width") or 2) * PT_PER_PX, label=label)
        label = None
    if "markers" in mode:
        size = marker.get("size") or 6
        sizes = [(v * PT_PER_PX) ** 2 for v in size] if isinstance(size, (list, tuple)) else (size * PT_PER_PX) ** 2
        symbol = str(marker.get("symbol") or "circle")
        shape = symbol[:-len("-open")] if symbol.endswith("-open") else symbol
        if shape not in SYMBOLS:
            raise NotImplementedError(f"marker symbol {symbol!r}")
        # A line marker ("|") has no face: matplotlib draws it in the face colour, open or not.
        face = "none" if symbol.endswith("open") and SYMBOLS[shape] != "|" else _color(marker.get("color"))
        edge = (marker.get("line") or {}).get("color") or (_color(marker.get("color")) if face == "none" else None)
        edge = None if SYMBOLS[shape] == "|" else edge
        ax.scatter(x, y, s=sizes, c=face if isinstance(face, list) else None,
                   color=None if isinstance(face, list) else face,
                   edgecolors=_color(edge), marker=SYMBOLS[shape], alpha=marker.get("opacity"), label=label, zorder=3)
    _error_bars(ax, x, y, t)
    if "text" in mode and t.get("text") is not None:
        texts = t["text"] if isinstance(t["text"], (list, tuple)) else [t["text"]] * len(x)
        pos = t.get("textposition") or "middle center"
        size = marker.get("size") or 6
        gap = (max(size) if isinstance(size, (list, tuple)) else size) * PT_PER_PX / 2 + 2 if "markers" in mode else 2
        dy = gap if "top" in pos else -gap if "bottom" in pos else 0
        for xi, yi, s in zip(x, y, texts):
            ax.annotate(_plain(s), (xi, yi), xytext=(0, dy), textcoords="offset points", ha="center",
                        va="bottom" if dy > 0 else "top" if dy < 0 else "center", fontsize=8)


def _error_bars(ax, x: list, y: list, t: dict) -> None:
    """A trace's symmetric ``error_y`` (type "data": one half-length per point) as matplotlib error bars."""
    err = t.get("error_y") or {}
    if not err or err.get("visible") is False or err.get("array") is None:
        return
    if err.get("type", "data") != "data" or err.get("symmetric") is False:
        raise NotImplementedError(f"error_y {err}")
    color = _color(err.get("color")) or _color((t.get("marker") or {}).get("color"))
    ax.errorbar(x, y, yerr=list(err["array"]), fmt="none", ecolor=color if isinstance(color, str) else "black",
                elinewidth=(err.get("thickness") or 2) * PT_PER_PX, capsize=(err.get("width") or 4) * PT_PER_PX,
                zorder=2.5)


def _bar(ax, t: dict, layout: dict, index: int, count: int) -> None:
    x, y = list(t.get("x") or []), list(t.get("y") or [])
    marker = t.get("marker") or {}
    width = t.get("width") or 0.8
    offsets = [0.0] * len(x)
    if layout.get("barmode") == "group" and count > 1:
        width = width / count
        offsets = [(index - (count - 1) / 2) * width] * len(x)
    base = t.get("base")
    numeric = all(isinstance(v, (int, float)) for v in x)
    if not numeric:
        # Categories (e.g. "R@1", "mAP@R") become positions 0, 1, ... shared by the axis's bar
        # traces, so grouped bars can be offset side by side as plotly draws them.
        categories = ax.__dict__.setdefault("_plotly_categories", [])
        categories.extend(v for v in dict.fromkeys(x) if v not in categories)
        ax.set_xticks(range(len(categories)), [_plain(c) for c in categories])
        x = [categories.index(v) for v in x]
    pos = [v + o for v, o in zip(x, offsets)]
    ax.bar(pos, y, width=width, bottom=base, color=_color(marker.get("color")), alpha=marker.get("opacity"),
           label=t.get("name") if t.get("showlegend", True) is not False else None,
           edgecolor=_color((marker.get("line") or {}).get("color")))
    bases = base if isinstance(base, (list, tuple)) else [base or 0.0] * len(y)
    _error_bars(ax, pos, [b + v for b, v in zip(bases, y)], t)


def to_matplotlib(fig, dpi: int = 100):
    """A matplotlib Figure drawing the same traces, annotations, shapes and titles as ``fig``."""
    spec = fig.to_plotly_json()
    layout = spec["layout"]
    width, height = static_size(layout)
    # A bare Figure, not pyplot's: no backend, nothing left open, nothing shown by Jupyter.
    out = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    axes = _axes_layout(layout, out)
    bars = [t for t in spec["data"] if t.get("type") == "bar"]
    for t in spec["data"]:
        kind = t.get("type", "scatter")
        ax = axes[t.get("xaxis") or "x"]
        if kind == "scatter":
            _scatter(ax, t)
        elif kind == "bar":
            _bar(ax, t, layout, bars.index(t), len(bars))
        else:
            raise NotImplementedError(f"trace type {kind!r} is not rendered by lab.viz.render")
    for s in layout.get("shapes") or []:
        if s.get("type") not in ("line", "rect"):
            raise NotImplementedError(f"shape type {s.get('type')!r}")
        tr = _blend(s.get("xref"), s.get("yref"), axes, out)
        # Shapes on an axis go into that Axes (drawn above its background, clipped to it).
        host = axes.get((s.get("xref") or "x").split()[0]) if s.get("xref") != "paper" else None
        line = s.get("line") or {}
        kw = dict(transform=tr, color=_color(line.get("color"), "gray"), linestyle=DASHES[line.get("dash")],
                  linewidth=(line.get("width") or 2) * PT_PER_PX)
        if s["type"] == "line":
            artist = Line2D([s["x0"], s["x1"]], [s["y0"], s["y1"]], **kw)
        else:
            artist = patches.Rectangle((s["x0"], s["y0"]), s["x1"] - s["x0"], s["y1"] - s["y0"], transform=tr,
                                   facecolor=_color(s.get("fillcolor"), "none"), alpha=s.get("opacity"),
                                   edgecolor="none", zorder=0.5)
        (host.add_artist if host is not None else out.add_artist)(artist)
    for a in layout.get("annotations") or []:
        tr = _blend(a.get("xref"), a.get("yref"), axes, out)
        ha = {"left": "left", "right": "right"}.get(a.get("xanchor"), "center")
        va = {"bottom": "bottom", "top": "top"}.get(a.get("yanchor"), "center")
        size = ((a.get("font") or {}).get("size") or 12) * PT_PER_PX
        if a.get("showarrow", True) and a.get("axref", "pixel") != "pixel":  # arrow in data units
            tail = _blend(a.get("axref"), a.get("ayref"), axes, out)
            arrow = dict(arrowstyle="-|>", color=_color(a.get("arrowcolor"), "black"),
                         lw=(a.get("arrowwidth") or 1) * PT_PER_PX, mutation_scale=12)
            out.add_artist(patches.FancyArrowPatch(
                posA=tail.transform((a["ax"], a["ay"])), posB=tr.transform((a["x"], a["y"])), transform=None,
                **arrow))
        out.text(a["x"], a["y"], _plain(a.get("text")), transform=tr, ha=ha, va=va, fontsize=size)
    title = _plain((layout.get("title") or {}).get("text"))
    if title:
        out.suptitle(title, fontsize=11, y=1 - 12 / height, va="top")
    handles = [h for ax in {id(a): a for k, a in axes.items() if k != "_plot_area"}.values()
               for h in zip(*ax.get_legend_handles_labels())]
    if handles and layout.get("showlegend", True) is not False:
        # DejaVu Sans lacks some glyphs that STIX has (legends may name Unicode characters).
        prop = dict(family=["DejaVu Sans", "STIXGeneral"], size=8)
        legend = layout.get("legend") or {}
        if (legend.get("x") or 0) >= 1:  # a legend placed right of the plot area: one column there
            left, bottom, width, height = axes["_plot_area"]
            out.legend([h for h, _ in handles], [lab for _, lab in handles], loc="upper left", ncol=1, prop=prop,
                       frameon=False, bbox_to_anchor=(left + width + 0.01, bottom + height))
        else:
            out.legend([h for h, _ in handles], [lab for _, lab in handles], loc="lower center",
                       ncol=min(4, len(handles)), prop=prop, frameon=False, bbox_to_anchor=(0.5, 0.0))
    return out


def save_png(fig, path: Union[str, Path], dpi: int = 100) -> Path:
    """Write ``fig`` to ``path``: a plotly Figure is drawn with matplotlib first; a matplotlib
    Figure (the image grids) is saved as it is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = fig if isinstance(fig, Figure) else to_matplotlib(fig, dpi=dpi)
    out.savefig(path, dpi=dpi)
    return path
