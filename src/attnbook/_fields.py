"""One way to declare a configuration field: its type, its check and the sentence that explains it, written once.

Every configuration class of the package (a model's sizes, a run's optimisation and loop) is a dataclass built on
``Checked`` whose fields are declared with the helpers below::

    @dataclass(kw_only=True)
    class Shape(Checked):
        n_layers: int = count(4, help="blocks in the stack")
        dropout: float = real(0.0, ok=lambda p: 0 <= p < 1, expected="in [0, 1)", help="the dropout rate")

        def check(self) -> None:  # rules that tie fields together, after each field's own check
            super().check()

``Checked.__post_init__`` runs each field's check, then ``check()``. A configuration never writes to its own
fields: a derived value (a width that defaults to 4 d_model) is a property, so ``dataclasses.replace(config,
d_model=128)`` derives it again. The command lines (``attnbook train``, ``attnbook bench``) take each option's
type, choices and help sentence from the same declarations, and name the option in a ``FieldError``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from numbers import Integral, Real
from typing import Any

MISSING: Any = dataclasses.MISSING


class FieldError(ValueError):
    """A configuration value that its field refuses. ``fields`` names the fields at fault (the first is the one
    the message is about), so that a command line can name its options instead."""

    def __init__(self, message: str, *fields: str) -> None:
        super().__init__(message)
        self.fields = fields


@contextmanager
def blame(*fields: str) -> Iterator[None]:
    """A ``ValueError`` raised inside (a shared check such as ``check_heads``) becomes a ``FieldError`` that
    names ``fields``, the first being the one to change."""
    try:
        yield
    except FieldError:
        raise
    except ValueError as e:
        raise FieldError(str(e), *fields) from None


def refuse(name: str, expected: str, value: object) -> FieldError:
    """The error for ``name = value``: "``name`` must be ``expected``; got ``value``"."""
    return FieldError(f"{name} must be {expected}; got {value!r}", name)


def is_count(value: object, minimum: int = 0) -> bool:
    """An integer (Python's or NumPy's; not ``bool``, not ``3.0``) of at least ``minimum``."""
    return not isinstance(value, bool) and isinstance(value, Integral) and value >= minimum


def is_real(value: object) -> bool:
    """A finite real number (an integer or a float, Python's or NumPy's; not ``bool``, NaN or infinity)."""
    return not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)


def _declare(default: Any, check: Callable[[str, Any], None], help: str, expected: str) -> Any:
    return dataclasses.field(default=default, metadata={"check": check, "help": help, "expected": expected})


def count(default: Any = MISSING, *, help: str, minimum: int = 1, optional: str | None = None,
          expected: str | None = None) -> Any:
    """A whole number, at least ``minimum``. ``optional``: ``None`` is accepted too, and this says what it means
    (for example ``"4 d_model"``)."""
    what = expected or f"a whole number, at least {minimum}"
    if optional:
        what = f"None ({optional}) or {what}"

    def check(name: str, value: Any) -> None:
        if not (optional and value is None) and not is_count(value, minimum):
            raise refuse(name, what, value)

    return _declare(default, check, help, what)


def real(default: Any = MISSING, *, help: str, ok: Callable[[float], bool] | None = None,
         expected: str = "a finite number", optional: str | None = None) -> Any:
    """A finite real number for which ``ok`` holds; ``expected`` says in words what is accepted (for example
    ``"positive"``). ``optional``: ``None`` is accepted too, and this says what it means."""
    what = f"None ({optional}) or {expected}" if optional else expected

    def check(name: str, value: Any) -> None:
        if optional and value is None:
            return
        if not is_real(value) or (ok is not None and not ok(value)):
            raise refuse(name, what, value)

    return _declare(default, check, help, what)


def choice(default: Any, values: tuple[str, ...], *, help: str) -> Any:
    """One of ``values`` (the arguments of the field's ``Literal`` type)."""
    what = "one of " + ", ".join(repr(v) for v in values)

    def check(name: str, value: Any) -> None:
        if value not in values or not isinstance(value, str):
            raise refuse(name, what, value)

    return _declare(default, check, help, what)


def flag(default: bool, *, help: str) -> Any:
    """``True`` or ``False`` (not 1 or 0)."""

    def check(name: str, value: Any) -> None:
        if not isinstance(value, bool):
            raise refuse(name, "True or False", value)

    return _declare(default, check, help, "True or False")


def text(default: str, *, help: str, expected: str = "a string") -> Any:
    """A string (a path, a device's name)."""

    def check(name: str, value: Any) -> None:
        if not isinstance(value, str):
            raise refuse(name, expected, value)

    return _declare(default, check, help, expected)


def custom(default: Any = MISSING, *, check: Callable[[str, Any], None], expected: str, help: str) -> Any:
    """A field with a check of its own: ``check(name, value)`` raises ``refuse(name, expected, value)``."""
    return _declare(default, check, help, expected)


def like(owner: type, name: str, default: Any) -> Any:
    """``owner``'s field ``name`` (its check and help) with another default: how a subclass changes a default
    without declaring the field a second time."""
    base = owner.__dataclass_fields__[name]
    return dataclasses.field(default=default, metadata=base.metadata)


def help_of(config: type, name: str) -> str:
    """The help sentence of ``config``'s field ``name``."""
    return config.__dataclass_fields__[name].metadata.get("help", "")


class Checked:
    """The base of every configuration: after ``__init__``, each field's own check (in declaration order), then
    ``check()``, the rules that tie fields together. Subclasses extend ``check`` and call ``super().check()``
    first, so that under multiple inheritance every base's rules run once, in the method resolution order."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            check = f.metadata.get("check")
            if check is not None:
                check(f.name, getattr(self, f.name))
        self.check()

    def check(self) -> None:
        """Rules between fields; nothing here."""
