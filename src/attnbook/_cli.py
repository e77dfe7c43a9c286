"""What the command lines share: options made from a dataclass's own annotations, and usage errors.

``add_config_options(parser, GPTRunConfig)`` adds one ``--field-name`` per field, its type taken from the
field's annotation (``typing.get_type_hints``): ``int``, ``float`` and ``str`` convert the text; ``X | None``
converts like ``X`` and also takes ``none``; a ``Literal`` lists its values as choices; a ``bool`` becomes
``--field/--no-field``. A value that does not convert is a usage error naming the option (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

NONE_WORDS = ("none", "None")


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Help that keeps the description's line breaks and shows every default."""


def _optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """``convert``, or ``None`` for the word ``none``: the converter of an ``X | None`` field."""

    def optional(text: str) -> Any:
        return None if text in NONE_WORDS else convert(text)

    optional.__name__ = f"{convert.__name__} (or none)"  # argparse names it in "invalid ... value"
    return optional


def option_kind(hint: Any) -> dict[str, Any]:
    """The ``add_argument`` keywords for a field annotated ``hint``: its ``type``, ``choices`` or ``action``."""
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"a command-line option needs one type besides None; got {hint}")
        inner = option_kind(rest[0])
        if "action" in inner:
            raise TypeError(f"an optional bool has three values, which --flag/--no-flag cannot give; got {hint}")
        return {**inner, "type": _optional(inner["type"]),
                **({"choices": [*inner["choices"], None]} if "choices" in inner else {})}
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        if len(kinds) != 1 or kinds & {bool}:
            raise TypeError(f"a Literal option needs values of one type (not bool); got {hint}")
        return {"type": kinds.pop(), "choices": list(args)}
    if hint is bool:
        return {"action": argparse.BooleanOptionalAction}
    if hint in (int, float, str):
        return {"type": hint}
    raise TypeError(f"no command-line option for a field annotated {hint}; use int, float, str, bool, a Literal "
                    f"or one of these or None")


def option_name(field: str) -> str:
    """``--block-size`` for the field ``block_size``."""
    return "--" + field.replace("_", "-")


def add_config_options(parser: argparse.ArgumentParser, config: type, defaults: object | None = None,
                       default_note: str = "") -> None:
    """One option per field of the dataclass ``config``; fields left out are absent from the namespace.

    ``defaults`` (an instance) is what the help shows as each field's value when the option is omitted,
    after ``default_note``.
    """
    hints = typing.get_type_hints(config)
    group = parser.add_argument_group(f"{config.__name__} fields")
    for f in dataclasses.fields(config):
        shown = getattr(defaults, f.name) if defaults is not None else f.default
        group.add_argument(option_name(f.name), dest=f.name, default=argparse.SUPPRESS,
                           help=f"{default_note}{shown!r}".replace("%", "%%"), **option_kind(hints[f.name]))


def config_overrides(args: argparse.Namespace, config: type) -> dict[str, Any]:
    """The fields of ``config`` that were given on the command line, by name."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(config) if hasattr(args, f.name)}


@contextmanager
def usage_errors(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Turn a ``ValueError`` (a configuration's own check) into a usage error: the message, exit code 2."""
    try:
        yield
    except ValueError as e:
        parser.error(str(e))


def at_least(low: int) -> Callable[[str], int]:
    """An ``int`` converter that rejects values below ``low``, for counts such as steps and seeds."""

    def convert(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more; got {value}")
        return value

    convert.__name__ = f"int >= {low}"  # argparse names it in "invalid ... value"
    return convert


def positive_float(text: str) -> float:
    """A ``float`` converter that rejects values not above 0 (and NaN)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive; got {value}")
    return value
