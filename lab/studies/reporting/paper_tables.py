"""The papers' numbers for the paper-scale studies (``python -m lab study table4 | suprank``), as data: R@1 and
mAP@R (%) of each loss in each setting, and the claims each study tests, per setting, with the paper's mAP@R.

ROADMAP supp. Table 4 (mean over 5 runs; the ± of the paper are in docs/reproduce-on-gpu.md) and SupRank Tables
I-II (one number per loss). The claims are fixed here, from the papers' text, before any run is read: supp. B.4
tests ROADMAP against each other AP loss of Table 4 (paired t-test over 5 runs, p <= 0.001), one family per
setting; SupRank's family is its four steps (Sup-AP over Smooth-AP, Sup-R@k over Smooth-R@k, the proxy
decomposability loss L_DG* on Sup-AP, the calibration term on Sup-R@k), one family per setting.
"""
from __future__ import annotations

from .paper_claims import Claim

_T4_LOSSES = ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "ROADMAP")
_T4 = {  # setting: R@1, mAP@R of each loss of _T4_LOSSES
    "CUB, ResNet-50": ((61.28, 24.11), (61.70, 24.29), (61.96, 23.83), (62.45, 24.32), (64.05, 25.27)),
    "SOP, ResNet-50": ((78.97, 52.23), (80.30, 53.69), (80.97, 54.49), (81.13, 54.74), (82.20, 56.64)),
    "iNat, ResNet-50": ((57.23, 22.17), (60.88, 23.22), (59.53, 19.62), (64.48, 24.33), (68.15, 27.01)),
    "CUB, DeiT-S": ((73.42, 31.96), (74.84, 33.57), (75.45, 33.97), (76.02, 34.69), (77.14, 36.30)),
    "SOP, DeiT-S": ((82.92, 59.06), (84.09, 60.53), (84.07, 60.20), (84.28, 60.49), (85.44, 62.73)),
    "iNat, DeiT-S": ((62.18, 25.48), (65.97, 27.57), (70.29, 29.44), (69.80, 29.56), (72.81, 31.31)),
}
_SR_LOSSES = ("FastAP", "SoftBinAP", "BlackBoxAP", "SmoothAP", "SupAP", "ROADMAP", "ROADMAP (L_DG*)", "Smooth-R@k",
              "Sup-R@k", "ROD-R@k")
_SR = {
    "SOP, ResNet-50": ((77.8, 50.5), (79.7, 52.7), (80.0, 53.1), (80.9, 54.3), (81.2, 54.8), (81.7, 55.7),
                       (81.9, 55.7), (80.5, 53.7), (80.7, 54.2), (82.4, 56.6)),
    "iNat, ResNet-50": ((59.9, 24.0), (63.6, 25.4), (52.3, 15.2), (67.3, 26.5), (68.9, 27.5), (69.1, 27.6),
                        (71.8, 29.5), (66.4, 25.5), (68.2, 26.4), (69.3, 27.0)),
}
SOURCES = {"table4": "ROADMAP supp. Table 4", "suprank": "SupRank Tables I-II"}
PAPER: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "table4": {s: dict(zip(_T4_LOSSES, rows)) for s, rows in _T4.items()},
    "suprank": {s: dict(zip(_SR_LOSSES, rows)) for s, rows in _SR.items()},
}
FAMILY = {"table4": "ROADMAP vs each baseline (supp. B.4)", "suprank": "SupRank's four steps (Tables I-II)"}
_PAIRS = {"table4": tuple(("ROADMAP", other) for other in _T4_LOSSES[:-1]),
          "suprank": (("SupAP", "SmoothAP"), ("Sup-R@k", "Smooth-R@k"), ("ROADMAP (L_DG*)", "SupAP"),
                      ("ROD-R@k", "Sup-R@k"))}


def setting_claims(study: str, setting: str) -> tuple[Claim, ...]:
    """The claims study ``study`` tests in ``setting``, one family, with the paper's mAP@R there (none for a
    setting the paper has no numbers for: the claims stand, the numbers are the paper's elsewhere)."""
    numbers = PAPER.get(study, {}).get(setting, {})
    return tuple(Claim(FAMILY[study], better, worse, f"{SOURCES[study]}, {setting}",
                       ((setting.split(",")[0], numbers[better][1], numbers[worse][1]),)
                       if better in numbers and worse in numbers else ())
                 for better, worse in _PAIRS.get(study, ()))
