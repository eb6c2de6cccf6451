"""Score-level losses: ``name(scores, targets, *, mask=None, reduction="mean", **hparams)``.

scores (Q, N) similarities, higher = closer; targets (Q, N) bool; mask (Q, N) bool, False =
ignored. "mean" averages over queries with at least one positive; "none" gives (Q,).
The graded (hierarchical) losses ``sup_hap`` and ``sup_ndcg`` take ``relevance`` (Q, N) float
>= 0 (0 = negative; see :func:`lab.core.relevance.build_relevance`) in place of ``targets``.
"""
from .blackbox_ap import blackbox_ap
from .calibration import calibration
from .fast_ap import fast_ap
from .recall import smooth_recall, sup_recall
from .roadmap import roadmap
from .rod_recall import rod_recall
from .smooth_ap import smooth_ap
from .soft_bin_ap import soft_bin_ap
from .sup_ap import sup_ap
from .sup_hap import sup_hap
from .sup_ndcg import sup_ndcg

__all__ = ["smooth_ap", "sup_ap", "calibration", "roadmap", "fast_ap", "soft_bin_ap", "blackbox_ap",
           "smooth_recall", "sup_recall", "rod_recall", "sup_hap", "sup_ndcg"]
