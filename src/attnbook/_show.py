"""``show``: the package's own source, displayed in a chapter (chapters 12 to 15 show the code they teach).

A chapter that shows a class with ``show(at.EncoderBlock)`` prints the installed code itself, not a copy that
could drift from it: nbval compares the shown text with the stored output, so a change to the shown code fails
the chapter until it is re-executed and its prose re-read. Importing this module does not import torch.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent  # the installed attnbook folder


@dataclass(frozen=True)
class Source:
    """Source code to display: ``text`` (header lines and code) as plain text, or as a fenced block of Python in
    markdown, which JupyterLab, Colab and the book's site highlight."""

    text: str

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}\n```"


def _target(obj: object) -> object:
    """What ``obj`` was written as: the function of a bound method, the getter of a property, the function a
    decorator wrapped."""
    obj = getattr(obj, "__func__", obj)  # a bound method or a classmethod
    if isinstance(obj, property):
        obj = obj.fget
    return inspect.unwrap(obj) if callable(obj) else obj


def _name(obj: object) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


def _module_name(obj: object) -> str | None:
    return obj.__name__ if isinstance(obj, ModuleType) else getattr(obj, "__module__", None)


def source_of(obj: object) -> tuple[str, str]:
    """``(header, code)`` for a class, function, method or module of ``attnbook``: the header names its file
    relative to the package and the object (``# attnbook/torch/blocks.py: EncoderBlock``), the code is
    ``inspect.getsource`` with its common indentation removed (a method starts at column 0).
    Refuses, with a ``ValueError``, anything defined outside ``attnbook`` or without source."""
    target = _target(obj)
    module = _module_name(target)
    if not isinstance(module, str) or not (module == "attnbook" or module.startswith("attnbook.")):
        raise ValueError(f"show displays the source of attnbook's own classes, functions and methods; got "
                         f"{_name(obj)!r} from {module or 'no module'!r}")
    try:
        path = Path(inspect.getsourcefile(target) or "").resolve()
        code = inspect.getsource(target)
    except (OSError, TypeError) as error:
        raise ValueError(f"show found no source for {_name(obj)!r} ({error})") from error
    if not path.is_relative_to(ROOT):
        raise ValueError(f"show displays attnbook's own files; {_name(obj)!r} lives in {path.name}")
    relative = Path("attnbook") / path.relative_to(ROOT)
    what = "" if isinstance(target, ModuleType) else f": {_name(target)}"
    return f"# {relative.as_posix()}{what}", textwrap.dedent(code).rstrip("\n")


def _first(lines: list[str], text: str, after: int, what: str, name: str) -> int:
    for i in range(after, len(lines)):
        if text in lines[i]:
            return i
    where = "" if after == 0 else " after the start line"
    raise ValueError(f"{what}={text!r} matches no line of {name!r}{where}")


def _signature_end(lines: list[str]) -> int:
    """The index of the line that ends the first ``def`` or ``class`` statement's header (the one ending in ``:``)."""
    opened = False
    for i, line in enumerate(lines):
        opened = opened or line.lstrip().startswith(("def ", "async def ", "class "))
        if opened and line.split("#")[0].rstrip().endswith(":"):
            return i
    return 0


def select(code: str, start: str | None = None, stop: str | None = None, name: str = "the source") -> str:
    """The lines of ``code`` from the first line containing ``start`` to the first line from there on containing
    ``stop``, both included (``None``: the first line, the last line). The decorators and the ``def`` or ``class``
    line (all of a signature that spans lines) are always kept; every run of lines left out becomes one line
    ``...`` indented as its first line was."""
    lines = code.split("\n")
    first = 0 if start is None else _first(lines, start, 0, "start", name)
    last = len(lines) - 1 if stop is None else _first(lines, stop, first, "stop", name)
    head = _signature_end(lines)
    kept = sorted({*range(head + 1), *range(first, last + 1)})
    out, previous = [], -1
    for i in kept:
        if i > previous + 1:
            gap = lines[previous + 1]
            out.append(gap[: len(gap) - len(gap.lstrip())] + "...")
        out.append(lines[i])
        previous = i
    if previous < len(lines) - 1:
        gap = lines[previous + 1]
        out.append(gap[: len(gap) - len(gap.lstrip())] + "...")
    return "\n".join(out)


def show(*objs: object, start: str | None = None, stop: str | None = None) -> Source:
    """Display the source of ``attnbook``'s classes, functions or methods, as the package holds them.

    ``show(at.LayerNorm)`` in a notebook cell displays ``# attnbook/torch/layernorm.py: LayerNorm`` and the class's
    code: as plain text (what nbval compares) and as a highlighted block of Python. Several objects are shown one
    after another. For one object, ``start`` and ``stop`` keep the lines from the first one containing ``start``
    to the first one from there on containing ``stop``; the ``def`` or ``class`` line stays, and each run of left
    out lines shows as ``...``. Refuses (``ValueError``) anything from outside ``attnbook``, no object, part
    selection with several objects, and a ``start`` or ``stop`` that matches no line.
    """
    if not objs:
        raise ValueError("show needs at least one class, function or method of attnbook")
    if len(objs) > 1 and (start is not None or stop is not None):
        raise ValueError("start and stop select lines of one object; show the objects one at a time")
    parts = []
    for obj in objs:
        header, code = source_of(obj)
        if start is not None or stop is not None:
            code = select(code, start, stop, _name(obj))
        parts.append(f"{header}\n{code}")
    return Source("\n\n".join(parts))
