"""What every embedding-level loss shares: the reduction over queries, cosine scores from
embeddings, and the ``nn.Module`` bases (``RankLoss``, ``HierarchicalRankLoss`` for graded relevance).

Score level: ``scores`` (Q, N) similarities (higher = closer), ``targets`` (Q, N) bool
relevance, ``mask`` (Q, N) bool (False = item ignored, e.g. the query itself).
"""
from __future__ import annotations

import difflib
import functools
import inspect
import typing
import warnings
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import torch
from torch import Tensor, nn

from ..core.checks import as_bool, check_chunk_size, check_reduction, check_references, fine
from ..core.hparams import Declared, docstring_section
from ..core.normalize import cosine_scores, unit_rows
from ..core.relevance import build_relevance
from .calls import resolve_call


# ------------------------------------------------------------------------------- reduction
def reduce(losses: Tensor, has_positive: Tensor, reduction: str) -> Tensor:
    """``"none"``: (Q,) with 0 for queries without positive; ``"mean"``: mean over the others."""
    losses = torch.where(has_positive, losses, torch.zeros_like(losses))
    if reduction == "none":
        return losses
    count = int(has_positive.sum())
    if count == 0:
        warnings.warn(
            "no query has a positive item in this batch: the loss is 0. Sample several "
            "items per class (e.g. MPerClassBatchSampler) so each query has a positive.",
            RuntimeWarning,
            stacklevel=3,
        )
        return losses.sum() * 0.0  # keeps the graph, so backward() still works
    return losses.sum() / count


# ------------------------------------------------------------------ constructor keywords
class UnknownHyperParameterError(TypeError, ValueError):
    """A loss was given a keyword it does not take: a TypeError like Python's own, and a ValueError
    (bad input) for the callers that report those as one-line errors (the CLI)."""


@functools.cache
def constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The keywords ``cls(...)`` accepts, in signature order, annotations resolved to types.

    ``**kwargs`` that a loss forwards to its ``rank_class`` (the proxy ROD losses) count as that
    class's keywords; ``**kwargs`` forwarded elsewhere accept any name (``"**"`` in the result).
    """
    init = inspect.unwrap(cls.__init__)
    hints = typing.get_type_hints(init)
    params: dict[str, inspect.Parameter] = {}
    for name, p in list(inspect.signature(init).parameters.items())[1:]:  # [1:]: self
        if p.kind is p.VAR_KEYWORD:
            rank_class = getattr(cls, "rank_class", None)
            forwarded = constructor_parameters(rank_class) if rank_class else {"**": p}
            params.update({k: v for k, v in forwarded.items() if k not in params})
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            params[name] = p.replace(annotation=hints.get(name, p.annotation))
    return params


def unknown_hparams_error(loss: str, unknown: Iterable[str], accepted: Iterable[str]) -> UnknownHyperParameterError:
    """'unknown hyper-parameter 'tua' for loss 'smooth_ap'; did you mean 'tau'? accepted: tau, ...'."""
    accepted = list(accepted)
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(str(name), accepted, n=1)
        suggestion = f"; did you mean {close[0]!r}?" if close else ";"
        parts.append(f"unknown hyper-parameter {name!r} for {loss}{suggestion}")
    return UnknownHyperParameterError(" ".join(parts) + f" accepted: {', '.join(accepted) or 'none'}")


def renamed(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the old names of ``cls.renamed_hparams`` replaced by the new ones (with a warning)."""
    old_names = getattr(cls, "renamed_hparams", {})
    if not any(k in old_names for k in kwargs):
        return kwargs
    out = dict(kwargs)
    for old, new in old_names.items():
        if old in out:
            if new in out:
                raise ValueError(f"{cls.__name__}: give {new!r} only ({old!r} is its old name), not both")
            warnings.warn(f"{cls.__name__}: {old!r} is now called {new!r}", DeprecationWarning, stacklevel=4)
            out[new] = out.pop(old)
    return out


def _rejecting_unknown_keywords(init: Callable) -> Callable:
    @functools.wraps(init)
    def checked(self, *args: Any, **kwargs: Any) -> None:
        if type(self).__init__ is checked:  # the outermost constructor checks; the super() calls do not
            kwargs = renamed(type(self), kwargs)
            accepted = constructor_parameters(type(self))
            unknown = [k for k in kwargs if k not in accepted]
            if unknown and "**" not in accepted:
                raise unknown_hparams_error(type(self).__name__, unknown, accepted)
        init(self, *args, **kwargs)
    return checked


# ------------------------------------------------------------------ embedding-level modules
def pairwise_inputs(
    embeddings: Tensor,
    labels: Tensor,
    ref_embeddings: Optional[Tensor] = None,
    ref_labels: Optional[Tensor] = None,
    mask: Optional[Tensor] = None,
    include_self: bool = False,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Cosine scores (Q, N), query labels, reference labels and the item mask.

    Without references the batch retrieves from itself and the query is masked out, unless
    ``include_self`` (the reference repositories' objective: the query is its own top positive).
    """
    labels, ref_embeddings, ref_labels, self_retrieval = check_references(embeddings, labels, ref_embeddings,
                                                                          ref_labels)
    dtype = torch.float64 if embeddings.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=embeddings.device.type, enabled=False):
        q = unit_rows(embeddings, dtype)
        # r apart from q even when they are the same rows: one node per side keeps the gradient summed in the
        # order it always was (q is r changed the last bits of every run's trajectory, not its maths).
        r = unit_rows(ref_embeddings, dtype)
        scores = cosine_scores(q, r)  # copies of a row score alike wherever they sit
    shape = scores.shape
    if mask is not None:
        mask = as_bool("mask", mask, shape, scores.device)
    if self_retrieval and not include_self:
        not_self = ~torch.eye(shape[0], dtype=torch.bool, device=scores.device)
        mask = not_self if mask is None else mask & not_self
    if mask is None:
        mask = torch.ones(shape, dtype=torch.bool, device=scores.device)
    return scores, labels, ref_labels, mask


class RankLoss(nn.Module):
    """Base of the embedding-level losses: ``loss = Cls(**hparams)(embeddings, labels)``, or pytorch-metric-learning's
    call ``loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)`` (:mod:`lab.losses.calls`).

    Subclasses set ``functional = staticmethod(score_level_loss)`` and store their hyper-parameters
    with ``self.save_hparams(locals())``; ``hparams`` is what gets passed to ``functional``. The two
    names on purpose: a config's ``loss_kwargs`` are what a user *asked for* (possibly a few keys,
    as text); a built loss's ``hparams`` are every value it *uses*, defaults filled in.
    """

    functional: Callable[..., Tensor]
    # True when the constructor needs ``num_classes`` and ``embed_dim`` (learnable proxies).
    needs_num_classes: bool = False
    # Constructor arguments that configure forward() (e.g. how relevance is built), not ``functional``.
    forward_hparams: tuple[str, ...] = ()
    # The tunable hyper-parameters (lab.core.hparams): defaults, accepted ranges, meanings, sliders.
    declared: Declared = Declared()
    # {old keyword: new keyword} still accepted, with a DeprecationWarning.
    renamed_hparams: dict[str, str] = {}
    # The dashboard's slider ranges, derived from ``declared``.
    hparam_ranges: dict[str, tuple[float, float]] = {}
    # Checks that no declared range expresses, declared per loss: a rule over several values (ROADMAP's
    # alpha > beta) or over a value without a range (the ks of R@k). Each takes the hyper-parameters,
    # defaults filled in, and raises a ValueError naming the argument.
    rules: tuple[Callable[[Mapping[str, Any]], None], ...] = ()

    @classmethod
    def check_hparams(cls, hparams: Mapping[str, Any]) -> None:
        """The loss's one check of its hyper-parameters, made where a user enters them (the constructor; a
        config's ``loss_kwargs`` through :func:`lab.losses.check_loss_kwargs`): each declared value within its
        range, ``reduction`` and ``chunk_size`` among their accepted values, then the class's ``rules``."""
        for name, value in hparams.items():
            if name in cls.declared:
                cls.declared[name].check(value)
        if "reduction" in hparams:
            check_reduction(hparams["reduction"])
        if "chunk_size" in hparams:
            check_chunk_size(hparams["chunk_size"])
        for rule in cls.rules:
            rule(hparams)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A misspelt keyword gets the list of accepted ones (and a close match), not a bare TypeError.
        super().__init_subclass__(**kwargs)
        cls.hparam_ranges = dict(cls.declared.sliders)
        # The docstring's hyper-parameters are generated from the declarations: they cannot drift from them.
        section = docstring_section(cls.declared)
        if section:
            cls.__doc__ = f"{inspect.cleandoc(cls.__doc__ or cls.__name__)}\n\n{section}"
        if "__init__" in cls.__dict__:
            cls.__init__ = _rejecting_unknown_keywords(cls.__init__)

    def save_hparams(self, local_vars: dict) -> None:
        skip = ("self", "include_self", *self.forward_hparams)
        names = [n for n in inspect.signature(type(self).__init__).parameters if n not in skip]
        self.hparams = {n: local_vars[n] for n in names}
        self.include_self = bool(local_vars.get("include_self", False))
        # Fail at construction, not at step 1, from the declarations: no computation on a dummy problem.
        type(self).check_hparams(self.hparams)

    def targets(self, labels: Tensor, ref_labels: Tensor) -> Tensor:
        """Binary relevance: same finest-level class."""
        return fine(labels)[:, None] == fine(ref_labels)[None, :]

    def targets_for(self, labels: Tensor, ref_labels: Tensor, mask: Tensor) -> Tensor:
        """What forward() gives ``RankLoss.functional``: ``RankLoss.targets`` by default. Graded losses override it,
        since their relevance is normalised over the items the mask keeps (SupRank Eq. 20)."""
        return self.targets(labels, ref_labels)

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        indices_tuple: Optional[tuple[Tensor, ...]] = None,
        ref_emb: Optional[Tensor] = None,
        ref_labels: Optional[Tensor] = None,
        *,
        ref_embeddings: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
    ) -> Tensor:
        """embeddings (B, D), labels (B,) or (B, L); refs (M, D), (M,) or (M, L); mask (B, M) bool.

        pytorch-metric-learning's call too: ``indices_tuple`` (a miner's pairs or triplets) keeps only the
        mined (anchor, item) comparisons, ``ref_emb`` is ``ref_embeddings`` (:mod:`lab.losses.calls`).
        """
        labels, ref_embeddings, ref_labels, mask = resolve_call(embeddings, labels, indices_tuple, ref_emb,
                                                                ref_labels, ref_embeddings, mask)
        scores, labels, ref_labels, mask = pairwise_inputs(
            embeddings, labels, ref_embeddings, ref_labels, mask, self.include_self
        )
        return self.functional(scores, self.targets_for(labels, ref_labels, mask), mask=mask, **self.hparams)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())


class HierarchicalRankLoss(RankLoss):
    """Embedding-level base of the graded losses: ``functional(scores, relevance, ...)``.

    Subclasses store ``relevance`` (a kind of ``build_relevance``), ``hap_alpha`` and ``weights``
    as attributes and list them in ``RankLoss.forward_hparams``. The relevance is built per batch over
    the items the mask keeps, so |Omega^(l)| never counts the query itself.
    """

    relevance: str = "hap"
    hap_alpha: float = 1.0
    weights: Optional[Sequence[float]] = None

    @property
    def alpha(self) -> float:
        """The old name of ``hap_alpha``."""
        return self.hap_alpha

    def targets_for(self, labels: Tensor, ref_labels: Tensor, mask: Tensor) -> Tensor:
        return build_relevance(labels, ref_labels, mask, self.relevance, self.hap_alpha, self.weights)

    def extra_repr(self) -> str:
        extra = {n: getattr(self, n) for n in self.forward_hparams}
        return ", ".join(f"{k}={v!r}" for k, v in {**self.hparams, **extra}.items())
