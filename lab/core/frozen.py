"""A read-only mapping for the dict fields of a frozen config (``loss_kwargs``, ``dataset_kwargs``).

A frozen dataclass refuses ``cfg.tau = ...`` but not ``cfg.loss_kwargs["tau"] = -1``, which would
skip the checks the config ran as it was built. :class:`FrozenDict` copies the mapping it is given
and has no method that changes it. Unlike :class:`types.MappingProxyType` it pickles (study jobs in
worker processes, DDP) and deep-copies (``dataclasses.asdict``), and it compares equal to a dict of
the same items, so ``cfg.loss_kwargs == {"tau": 0.01}`` and ``**cfg.loss_kwargs`` read as before.
Only the top level is frozen: a list value (``ks: [1, 4]``) stays the list the checks converted.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class FrozenDict(Mapping):
    """A dict that cannot change after it is built; ``dict(frozen)`` is a plain, mutable copy."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] = (), /) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:  # as a dict: error messages and reprs read as they did
        return repr(self._items)

    def __reduce__(self):  # pickle and deepcopy through the constructor (no __dict__ with __slots__)
        return type(self), (self._items,)
