"""How sure is a difference measured on a finite sample? A paired bootstrap interval (chapter 18)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnbook._validate import require_ndim, require_same_shape


@dataclass(frozen=True)
class Interval:
    """A measured mean difference and the bounds of its bootstrap interval."""

    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the whole interval lies on one side of 0: a difference the sample resolves."""
        return self.low > 0 or self.high < 0


def paired_bootstrap(a: torch.Tensor, b: torch.Tensor, n_resamples: int = 2000, level: float = 0.95,
                     seed: int = 0) -> Interval:
    """The mean of ``a - b`` over paired items ``(N,)`` and its percentile bootstrap interval.

    Paired: ``a[i]`` and ``b[i]`` were measured on the same item (the same window of text, with and
    without a change), so each resample draws ``N`` items with replacement and keeps both of their values;
    what the items have in common cancels in ``a[i] - b[i]``. The interval holds the middle ``level`` of the
    resampled means. Resampling is seeded (``seed``), so the interval repeats exactly. Chapter 18.
    """
    require_ndim("a", a.shape, 1, "(N,) one value per item")
    require_same_shape(("a", "b"), a.shape, b.shape)
    if len(a) < 2:
        raise ValueError(f"paired_bootstrap needs at least 2 items; got {len(a)}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1; got {n_resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    diff = (a.double() - b.double()).cpu()
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(diff), (n_resamples, len(diff)), generator=g)  # (R, N): the items of each resample
    means = diff[picks].mean(dim=1)  # (R,)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=means.dtype)).tolist()
    return Interval(float(diff.mean()), low, high)
