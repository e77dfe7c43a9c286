"""attnbook: attention and Transformers from the dot product up.

The package behind the course. ``attnbook.numpy`` and ``attnbook.torch`` hold the same concepts
under the same names (NumPy for Part I, PyTorch from Part II on); ``attnbook.exercises`` checks the
learner's answers; ``attnbook.plotting`` and ``attnbook.widgets`` draw the figures; ``attnbook.show``
displays the package's own code in a chapter.
"""

from importlib.metadata import PackageNotFoundError, version

from attnbook._lazy import lazy_exports

try:
    # The version is written once, in pyproject.toml; the installed package's metadata carries it.
    __version__ = version("attnbook")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

# attnbook.show, imported on first use (it needs neither torch nor anything above it).
__getattr__, __dir__ = lazy_exports("attnbook", {"show": "_show"})
__all__ = ["__version__", "show"]
