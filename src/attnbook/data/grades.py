"""A small synthetic key-value table for chapter 3: grade point average to starting salary."""

from __future__ import annotations

import numpy as np


def grades_and_salaries(n: int = 14, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(grades, salaries)``: ``n`` made-up graduates, sorted by grade.

    Grades lie in [2.0, 4.0]; salaries (thousands per year) rise with the grade, with some
    curvature and noise, rounded to one decimal. Shapes: both ``(n,)``.
    """
    rng = np.random.default_rng(seed)
    grades = np.sort(np.round(rng.uniform(2.0, 4.0, size=n), 2))
    salaries = 42 + 6 * (grades - 2) + 5 * (grades - 2) ** 2 + rng.normal(0, 2.0, size=n)
    return grades, np.round(salaries, 1)
