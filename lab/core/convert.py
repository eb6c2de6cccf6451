"""The one converter from text (command-line flags, YAML recipes, query strings) to typed values.

PyYAML reads ``1e-2`` as a string and a flag is always text, so every value that arrives from
outside passes here once, at the boundary, against the type its receiver declares: a
:class:`lab.train.TrainConfig` field's annotation or a loss constructor's keyword.
"""
from __future__ import annotations

import collections.abc
import os
import typing
from typing import Any, Union

WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
NULLS = ("none", "null")
EXPECTED = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}


def to_type(what: str, value: Any, kind: Any) -> Any:
    """``value`` as type ``kind``: float, int, bool, str, Optional[X], Sequence[X] / list[X].

    Text converts ('1e-2' -> 0.01, 'true' -> True, 'none' -> None where None is allowed,
    '1,2,4' -> [1, 2, 4]); an integral float becomes an int. Sequences come back as lists (YAML
    writes them back). An annotation this does not know (dict, a class) passes the value through.
    A number is written in ASCII: Python's own ``int('٣')`` is 3, this refuses it.
    A value that does not convert raises ``ValueError("<what> must be <a number>, got <value>")``.
    """
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Union:
        if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in NULLS)):
            return None
        others = [a for a in args if a is not type(None)]
        return to_type(what, value, others[0]) if len(others) == 1 else value
    if origin in (collections.abc.Sequence, list, tuple):
        items = value.replace(",", " ").split() if isinstance(value, str) else \
            list(value) if isinstance(value, (list, tuple)) else [value]
        return [to_type(what, v, args[0] if args else Any) for v in items]
    if kind not in EXPECTED:
        return value
    if kind in (int, float) and isinstance(value, str) and not value.isascii():
        raise ValueError(f"{what} must be {EXPECTED[kind]}, got {value!r}")
    try:
        if kind is float and not isinstance(value, bool) and isinstance(value, (int, float, str)):
            return float(value)
        if kind is int and not isinstance(value, bool) and isinstance(value, (int, float, str)):
            number = value if isinstance(value, int) else float(value)
            if float(number).is_integer():
                return int(number)
        if kind is bool and (isinstance(value, bool) or str(value).lower() in WORDS):
            return value if isinstance(value, bool) else WORDS[str(value).lower()]
        if kind is str and isinstance(value, (str, os.PathLike)):
            return os.fspath(value)  # a Path given for a folder: YAML writes text
    except (ValueError, OverflowError):
        pass
    raise ValueError(f"{what} must be {EXPECTED[kind]}, got {value!r}")
