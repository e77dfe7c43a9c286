"""attnbook: attention and Transformers from the dot product up.

The package behind the course. ``attnbook.numpy`` and ``attnbook.torch`` hold the same concepts
under the same names (NumPy for Part I, PyTorch from Part II on); ``attnbook.exercises`` checks the
learner's answers; ``attnbook.plotting`` and ``attnbook.widgets`` draw the figures.
"""

__version__ = "0.1.0"
