"""Exact retrieval metrics: score level (``scores, targets, mask -> (Q,)``) and embedding level."""
from .exact import average_precision, map_at_r, precision_at_1, recall_at_k, sorted_ranks, true_recall_at_k
from .decomposability import decomposability_gap
from .retrieval import retrieval_metrics

__all__ = ["average_precision", "map_at_r", "recall_at_k", "true_recall_at_k", "precision_at_1",
           "sorted_ranks", "retrieval_metrics", "decomposability_gap"]
