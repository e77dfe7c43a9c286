"""``python -m attnbook`` (or the ``attnbook`` command): what the package runs, and its version.

    attnbook                                  the commands, one line each
    attnbook --version                        the version
    attnbook train gpt --preset tiny          the same as  python -m attnbook.train gpt --preset tiny
    attnbook bench speedrun --suite race      the same as  python -m attnbook.bench speedrun --suite race
"""

from __future__ import annotations

import argparse
import importlib
import sys

from attnbook import __version__

# The commands that take their own arguments: the module whose main() runs them.
COMMANDS = {"train": "attnbook.train", "bench": "attnbook.bench"}


def listing() -> str:
    """One line per command: ``attnbook train gpt``, then every benchmark."""
    try:
        from attnbook.bench import BENCHMARKS
        from attnbook.train import MODELS
    except ImportError as e:  # the NumPy part of the package runs without PyTorch; these do not
        return (f"attnbook train and attnbook bench need PyTorch, which is not installed ({e}): "
                "pip install 'attnbook[torch]'")
    rows = [(f"attnbook train {name}", text) for name, text in MODELS.items()]
    rows += [(f"attnbook bench {name}", text) for name, text in BENCHMARKS.items()]
    width = max(len(command) for command, _ in rows)
    lines = [f"  {command:<{width}}  {text}" for command, text in rows]
    return "commands (add --help to any for its options):\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        command = importlib.import_module(COMMANDS[argv[0]])
        command.main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="attnbook", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=None if "--version" in argv else listing())
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("command", nargs="?", choices=list(COMMANDS),
                        help="train or bench, followed by its own arguments")
    parser.parse_args(argv)  # here only --help, --version, or a command that is not one
    print(f"attnbook {__version__}: attention and Transformers from the dot product up.")
    print(listing())


if __name__ == "__main__":
    main()
