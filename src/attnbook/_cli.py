"""What the command lines share: options made from a configuration's field declarations, and usage errors.

``add_config_options(parser, GPTRunConfig)`` adds one ``--field-name`` per field, its type taken from the
field's annotation (``typing.get_type_hints``): ``int``, ``float`` and ``str`` convert the text; ``X | None``
converts like ``X`` and also takes ``none``; a ``Literal`` lists its values as choices; a ``bool`` becomes
``--field/--no-field``. Its help is the field's sentence (``attnbook._fields``). A value that does not convert,
or that the configuration refuses, is a usage error naming the option (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from attnbook._fields import FieldError

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


def plain(text: str) -> str:
    """``text`` without reStructuredText's double backticks, for a terminal; ``%`` doubled for argparse."""
    return text.replace("``", "").replace("%", "%%")


def add_config_options(parser: argparse.ArgumentParser, config: type, defaults: object | None = None,
                       default_note: str = "") -> None:
    """One option per field of the dataclass ``config``; fields left out are absent from the namespace.

    Each option's help is its field's sentence, then the value it has when the option is omitted: ``defaults``'s
    (an instance), after ``default_note``, or the field's default.
    """
    hints = typing.get_type_hints(config)
    group = parser.add_argument_group(f"{config.__name__} fields")
    for f in dataclasses.fields(config):
        shown = getattr(defaults, f.name) if defaults is not None else f.default
        meaning = f.metadata.get("help")
        if not meaning:
            raise TypeError(f"{config.__name__}.{f.name} has no help sentence: declare it with attnbook._fields")
        group.add_argument(option_name(f.name), dest=f.name, default=argparse.SUPPRESS,
                           help=plain(f"{meaning} ({default_note}{shown!r})"), **option_kind(hints[f.name]))


def config_overrides(args: argparse.Namespace, config: type) -> dict[str, Any]:
    """The fields of ``config`` that were given on the command line, by name."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(config) if hasattr(args, f.name)}


def option_message(error: FieldError) -> str:
    """A configuration's error in the command line's words: "argument --lr: must be positive; got -1.0", with
    the other fields it names (``lr = 0.001``) written as their options."""
    first, *others = error.fields
    message = str(error).removeprefix(f"{first} ")
    for name in sorted(others, key=len, reverse=True):  # longer names first: min_lr before lr
        message = re.sub(rf"(?<![\w-]){re.escape(name)}(?= =| must| is\b)", option_name(name), message)
    return f"argument {option_name(first)}: {message}"


def fail(parser: argparse.ArgumentParser, message: str, status: int = 2) -> NoReturn:
    """Stop with ``message`` under ``parser``'s usage line: status 2 for a usage error, 1 for a run that
    cannot go on (no data, a checkpoint of another run)."""
    if status == 2:
        parser.error(message)
    parser.print_usage()
    parser.exit(status, f"{parser.prog}: error: {message}\n")


@contextmanager
def usage_errors(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Turn a ``ValueError`` (a configuration's own check) into a usage error naming the option: exit code 2."""
    try:
        yield
    except ValueError as e:
        fail(parser, option_message(e) if isinstance(e, FieldError) and e.fields else str(e))


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, except that a value given to a switch (``--bias false``) is a usage error that names
    the switch and its two forms."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = sys.argv[1:] if argv is None else list(argv)
        before = words[words.index(extra[0]) - 1] if extra[0] in words and words.index(extra[0]) else ""
        if before.startswith("--"):
            name = before.removeprefix("--no-").removeprefix("--")
            parser.error(f"argument {before}: a switch takes no value (got {extra[0]!r}): write --{name} or "
                         f"--no-{name}")
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


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
