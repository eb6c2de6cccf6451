"""The options of :func:`lab.metrics.retrieval_metrics`, declared once: default, meaning, accepted values.

``retrieval_metrics(emb, labels, ks=(1, 5))`` builds a :class:`RetrievalOptions` from its keywords;
``per_query_metrics`` takes the same keywords, and the evaluation reads the record. A new option is
one field here (and its check in ``__post_init__``); the functions' signatures are made from the fields.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

from ..core.budget import parse_budget
from ..core.checks import check_chunk_size, check_ks
from ..core.relevance import check_alpha

BACKENDS = ("faiss", "torch")
METHODS = ("count", "sort")
EVAL_KS = (1, 2, 4, 8)  # the R@k ROADMAP reports on CUB (and the default here)


@dataclass(frozen=True)
class RetrievalOptions:
    """What to compute and how; checked when made (a bad value: one line naming it and what is accepted)."""

    ks: Sequence[int] = EVAL_KS
    """The k of R@k: positive integers (or one); kept as a tuple."""
    backend: Optional[str] = None
    """Who computes the similarity blocks on the CPU: None or "torch" (the default), or "faiss" (its CPU
    kernel); the same numbers. On a GPU they are always torch's."""
    chunk_size: Optional[int] = None
    """Queries per chunk, an integer >= 1; None: from ``memory_budget``."""
    progress: bool = False
    """A progress bar over the chunks."""
    alpha: float = 1.0
    """H-AP's relevance exponent (SupRank Eq. 20), a finite number >= 0; hierarchical labels only."""
    level_names: Optional[Sequence[str]] = None
    """Names of the label columns, finest first, for the "AP@<name>" keys: distinct non-empty strings,
    one per column (checked against the labels); None: "level0", "level1", ..."""
    method: str = "count"
    """"count" (exact counts of the few items each query must rank) or "sort" (the slow reference: every
    row sorted, about 5x the memory per score); the same numbers."""
    memory_budget: Union[int, str, None] = None
    """Bytes (or a size such as "512MB") one chunk of queries may hold (its similarity block and
    temporaries, :mod:`lab.metrics.chunking`); None: the lab's budget (:mod:`lab.core.budget`). Kept in bytes."""
    full_map: bool = True
    """False (flat labels only): R@k and mAP@R alone, AccuracyCalculator's metrics, without "mAP": a
    positive's rank is counted only while R@k or mAP@R can read it."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.backend not in (None, *BACKENDS):
            raise ValueError(f"backend must be None or one of {BACKENDS}, got {self.backend!r}")
        check_alpha(self.alpha)
        check_chunk_size(self.chunk_size)
        # Normalised in place (the record is frozen to its callers, not to its own constructor).
        object.__setattr__(self, "ks", check_ks(self.ks))
        object.__setattr__(self, "memory_budget", parse_budget(self.memory_budget, name="memory_budget"))


NAMES = tuple(field.name for field in dataclasses.fields(RetrievalOptions))


def options_from(keywords: dict) -> RetrievalOptions:
    """The record of a call's keywords; an unknown one gets a one-line error naming the accepted ones."""
    unknown = sorted(set(keywords) - set(NAMES))
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}: the options are {', '.join(NAMES)}")
    return RetrievalOptions(**keywords)


def with_options_signature(fn: Callable) -> Callable:
    """``fn(..., **options)`` shown with every option as a keyword and its default (help(), inspect),
    read from the record's fields: the list is written once."""
    own = [p for p in inspect.signature(fn).parameters.values() if p.kind is not p.VAR_KEYWORD]
    # The fields' annotations resolved here, where their names are imported: as strings they would be read
    # in fn's module, which does not import Union (pdoc's API reference warned).
    types = typing.get_type_hints(RetrievalOptions)
    options = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                 annotation=types[f.name]) for f in dataclasses.fields(RetrievalOptions)]
    fn.__signature__ = inspect.signature(fn).replace(parameters=own + options)
    return fn
