"""The categorical palette (lab.viz.style.CATEGORIES): enough distinct colours for the glyphs' 20
scripts, told apart by colour-blind readers within a block of one marker shape, none close to the
relevance colours or to the grey of "other groups".

Colour distance: CIELAB ΔE*ab (CIE 1976) from sRGB (D65); colour-vision deficiency: the matrices
of Machado, Oliveira & Fernandes (2009) at severity 1, applied in linear RGB.
"""
import itertools
import math

import pytest

from lab.data.glyphs import glyph_catalogue
from lab.viz.style import (BLOCK_SYMBOLS, CATEGORIES, CATEGORY_BLOCKS, CATEGORY_MARKERS, NEGATIVE, NEUTRAL,
                           POSITIVE)

MACHADO = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


def linear(hex_colour: str) -> list[float]:
    rgb = [int(hex_colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    return [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]


def lab(rgb_linear: list[float]) -> tuple[float, float, float]:
    r, g, b = (min(1.0, max(0.0, c)) for c in rgb_linear)
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           0.0193 * r + 0.1192 * g + 0.9505 * b)
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29
         for t in (xyz[0] / 0.95047, xyz[1] / 1.0, xyz[2] / 1.08883)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(a: str, b: str, deficiency: str = "") -> float:
    la, lb = linear(a), linear(b)
    if deficiency:
        m = MACHADO[deficiency]
        la, lb = ([sum(m[i][j] * c[j] for j in range(3)) for i in range(3)] for c in (la, lb))
    return math.dist(lab(la), lab(lb))


def test_lab_conversion_of_known_colours():
    assert lab(linear("#ffffff")) == pytest.approx((100.0, 0.0, 0.0), abs=0.05)
    assert lab(linear("#ff0000")) == pytest.approx((53.24, 80.09, 67.20), abs=0.1)  # sRGB red, D65
    # A red and a green that deuteranopes confuse are far apart in normal vision, close for them.
    assert delta_e("#d62728", "#2ca02c") > 80 and delta_e("#d62728", "#2ca02c", "deuteranopia") < 30


def test_enough_distinct_colours_for_every_script():
    scripts = len({g.group for g in glyph_catalogue()})  # the glyphs' coarse labels
    assert len(CATEGORIES) >= max(16, scripts) and len(set(c.lower() for c in CATEGORIES)) == len(CATEGORIES)
    assert CATEGORIES == [c for block in CATEGORY_BLOCKS for c in block]
    assert len(CATEGORY_MARKERS) == len(CATEGORIES) and len(BLOCK_SYMBOLS) >= len(CATEGORY_BLOCKS)


def test_every_pair_is_distinguishable_in_normal_vision():
    worst = min(delta_e(a, b) for a, b in itertools.combinations(CATEGORIES, 2))
    assert worst >= 18


@pytest.mark.parametrize("deficiency", sorted(MACHADO))
def test_within_a_marker_shape_colour_blind_readers_tell_them_apart(deficiency):
    for block, symbol in zip(CATEGORY_BLOCKS, BLOCK_SYMBOLS):
        assert {CATEGORY_MARKERS[CATEGORIES.index(c)] for c in block} == {symbol}
        worst = min(delta_e(a, b, deficiency) for a, b in itertools.combinations(block, 2))
        assert worst >= 12, (block, deficiency)


def test_no_category_looks_like_relevance_other_groups_or_the_background():
    for colour in CATEGORIES:
        assert colour.lower() not in (POSITIVE.lower(), NEGATIVE.lower(), NEUTRAL.lower())
        for reserved in (POSITIVE, NEGATIVE, NEUTRAL, "#ffffff"):
            assert delta_e(colour, reserved) >= 25, (colour, reserved)


def test_the_embedding_maps_group_colours_never_look_like_its_neighbour_rings():
    # The dashboard's map: groups are filled markers, a query's neighbours get rings in the
    # relevance colours (green, orange, red); a script once took exactly the rings' green and red.
    from lab.viz.dashboard_figures import LEVEL_COLORS, MAP_STYLES

    assert len(MAP_STYLES) >= len({g.group for g in glyph_catalogue()})  # one style per script
    colours = [c for c, _ in MAP_STYLES]
    assert len(set(colours)) == len(colours)
    assert min(delta_e(a, b) for a, b in itertools.combinations(colours, 2)) >= 18
    for colour in colours:
        for reserved in (*LEVEL_COLORS.values(), NEUTRAL, "#ffffff"):
            assert delta_e(colour, reserved) >= 25, (colour, reserved)
    for symbol in {m for _, m in MAP_STYLES}:
        block = [c for c, m in MAP_STYLES if m == symbol]
        for deficiency in MACHADO:
            closest = min(delta_e(a, b, deficiency) for a, b in itertools.combinations(block, 2))
            assert closest >= 12, (block, deficiency)
