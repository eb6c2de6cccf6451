"""Exact retrieval metrics: score level (``scores, targets, mask -> (Q,)``; the graded ``h_ap``,
``ndcg``, ``asi`` take ``relevance`` in place of ``targets``) and embedding level."""
from .exact import average_precision, map_at_r, precision_at_1, recall_at_k, sorted_ranks, true_recall_at_k
from .decomposability_gap import decomposability_gap
from .hierarchical import asi, graded_ranks, h_ap, ndcg
from .options import RetrievalOptions
from .retrieval import EVAL_KS, RETRIEVAL_KEYS, per_query_metrics, retrieval_metrics

__all__ = ["average_precision", "map_at_r", "recall_at_k", "true_recall_at_k", "precision_at_1",
           "sorted_ranks", "retrieval_metrics", "per_query_metrics", "EVAL_KS", "RETRIEVAL_KEYS", "RetrievalOptions",
           "decomposability_gap", "h_ap", "ndcg", "asi", "graded_ranks"]

# Bounds on the decomposability gap of one query (ROADMAP Eq. 8-9) and the toys of supp. A.2.
from .decomposability_gap import (calibration_counts, dg_upper_bound, dg_upper_bound_calibrated, juxtaposed_batches,
                                  query_gap)

__all__ += ["query_gap", "dg_upper_bound", "dg_upper_bound_calibrated", "calibration_counts", "juxtaposed_batches"]
