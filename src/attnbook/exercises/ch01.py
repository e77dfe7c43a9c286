"""Checkers for the coding exercises of chapter 1 (vectors, dot products and similarity)."""

from __future__ import annotations

import numpy as np

from attnbook.data import toy_word_embeddings
from attnbook.exercises._harness import BudgetChecker, Case, Checker, Mistake
from attnbook.numpy import analogy, cosine_similarity, nearest, pairwise_cosine_similarity

# The package's own similarity search: an answer that calls one of these has not written the search.
_SIMILARITY = (nearest, analogy, pairwise_cosine_similarity, cosine_similarity,
               "attnbook.torch.pairwise_cosine_similarity", "attnbook.torch.cosine_similarity")


# --- every word's nearest neighbours -------------------------------------------------------------

def _neighbour_cases() -> list[Case]:
    rng = np.random.default_rng(101)
    _, E = toy_word_embeddings()
    cases = [
        Case("the toy embeddings, k=3", (E, 3)),
        # The last row is parallel to the first: its cosine with row 0 is 1, as with itself, so sorting and then
        # dropping the first column may drop row 0 and keep the row itself. Rows 1 to 3 lie nearer one another
        # than to rows 0 and 4 (whose cosines with any row are equal), so that no row's k best hold a tie.
        Case("five 2-D rows [[1, 0], [0, 1], [-1, 1], [-1, 0.2], [2, 0]] (the last parallel to the first), k=2",
             (np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0], [-1.0, 0.2], [2.0, 0.0]]), 2)),
    ]
    # Lengths spread over two orders of magnitude: ranking by dot product then differs from cosine.
    lengths = np.exp(rng.uniform(-2.3, 2.3, size=(9, 1)))
    cases.append(Case("9 random rows of very different lengths, d=4, k=3",
                      (lengths * rng.normal(size=(9, 4)), 3)))
    # k = V - 1 reaches every other row, the least similar (negative cosines) included.
    cases.append(Case("6 random rows, d=3, k=5 (every other row)", (rng.normal(size=(6, 3)), 5)))
    cases.append(Case("20 random rows, d=16, k=1", (rng.normal(size=(20, 16)), 1)))
    return cases


def _neighbours(E: np.ndarray, k: int) -> np.ndarray:
    return np.stack([nearest(E[i], E, k=k, exclude=[i]) for i in range(E.shape[0])])


def _cosines(E: np.ndarray) -> np.ndarray:
    unit = E / np.linalg.norm(E, axis=1, keepdims=True)
    return unit @ unit.T


def _top(S: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-S, axis=1, kind="stable")[:, :k]


def _with_self(E: np.ndarray, k: int) -> np.ndarray:
    return _top(_cosines(E), k)


def _by_dot(E: np.ndarray, k: int) -> np.ndarray:
    S = E @ E.T
    np.fill_diagonal(S, -np.inf)
    return _top(S, k)


def _worst_first(E: np.ndarray, k: int) -> np.ndarray:
    S = _cosines(E)
    np.fill_diagonal(S, np.inf)
    return np.argsort(S, axis=1, kind="stable")[:, :k]


def _first_column_dropped(E: np.ndarray, k: int) -> np.ndarray:
    # Sorted with the row itself among the candidates, then the first column dropped as if it were always the row
    # itself: a row parallel to another ties with it at cosine 1 and may come second.
    return _top(_cosines(E), k + 1)[:, 1:]


def _columns_normalised(E: np.ndarray, k: int) -> np.ndarray:
    unit = E / np.linalg.norm(E, axis=0, keepdims=True)
    S = unit @ unit.T
    np.fill_diagonal(S, -np.inf)
    return _top(S, k)


check_neighbours = Checker(
    name="neighbours",
    doc="Check ``fn(E, k) -> (V, k) ints``: row ``i`` lists the ``k`` rows of ``E`` most cosine-similar to "
        "row ``i``, best first, leaving out ``i`` itself.",
    reference=_neighbours,
    cases=_neighbour_cases(),
    mistakes=(
        Mistake(_with_self, "every word is its own best match (cosine 1): leave row i out of row i's candidates."),
        Mistake(_first_column_dropped, "dropping the first column of the sorted cosines assumes each row comes "
                "first in its own list; a row parallel to it has cosine 1 too and may come first. Rule row i out "
                "of its own candidates before sorting."),
        Mistake(_by_dot, "rank by cosine, not by dot product: a long vector wins dot products whatever its "
                "direction."),
        Mistake(_worst_first, "best first: sort by decreasing similarity."),
        Mistake(_columns_normalised, "each word is a row: scale every row, not every column, to length 1."),
    ),
    forbidden=_SIMILARITY,
)


# --- many analogies at once ------------------------------------------------------------------------

def _analogy_cases() -> list[Case]:
    words, E = toy_word_embeddings()
    i = {w: n for n, w in enumerate(words)}
    questions = [("man", "king", "woman"), ("king", "prince", "queen"), ("man", "boy", "woman"),
                 ("woman", "queen", "man"), ("boy", "prince", "girl")]
    a, b, c = (np.array([i[q[n]] for q in questions]) for n in range(3))
    cases = [Case("five analogies on the toy embeddings", (a, b, c, E))]
    # In random embeddings the target b - a + c lies closest to b or c themselves, so these cases tell
    # apart an answer that forgets to leave the question words out, or leaves out every question's.
    rng = np.random.default_rng(103)
    for V, d, n in ((20, 6, 8), (30, 10, 12), (12, 3, 1)):
        E_rand = rng.normal(size=(V, d)) * np.exp(rng.uniform(-1.0, 1.0, size=(V, 1)))
        abc = np.stack([rng.choice(V, size=3, replace=False) for _ in range(n)])
        cases.append(Case(f"{n} random analogies, {V} words in d={d}", (abc[:, 0], abc[:, 1], abc[:, 2], E_rand)))
    return cases


def _solve_analogies(a: np.ndarray, b: np.ndarray, c: np.ndarray, E: np.ndarray) -> np.ndarray:
    return np.array([nearest(E[y] - E[x] + E[z], E, k=1, exclude=[x, y, z])[0]
                     for x, y, z in zip(a, b, c, strict=True)], dtype=np.int64)


def _target_cosines(a, b, c, E) -> np.ndarray:
    target = E[b] - E[a] + E[c]
    return (target / np.linalg.norm(target, axis=1, keepdims=True)) @ (
        E / np.linalg.norm(E, axis=1, keepdims=True)).T


def _best(S: np.ndarray) -> np.ndarray:
    return np.argmax(S, axis=1)


def _no_exclusion(a, b, c, E) -> np.ndarray:
    return _best(_target_cosines(a, b, c, E))


def _every_questions_words(a, b, c, E) -> np.ndarray:
    S = _target_cosines(a, b, c, E)
    S[:, np.concatenate([a, b, c])] = -np.inf
    return _best(S)


def _wrong_direction(a, b, c, E) -> np.ndarray:
    return _solve_analogies(b, a, c, E)


def _analogy_by_dot(a, b, c, E) -> np.ndarray:
    S = (E[b] - E[a] + E[c]) @ E.T
    rows = np.arange(len(a))
    for idx in (a, b, c):
        S[rows, idx] = -np.inf
    return _best(S)


def _analogies_big_case() -> Case:
    rng = np.random.default_rng(104)
    E = rng.normal(size=(60, 16))
    abc = np.stack([rng.choice(60, size=3, replace=False) for _ in range(200)])
    return Case("200 random analogies, 60 words in d=16", (abc[:, 0], abc[:, 1], abc[:, 2], E))


check_solve_analogies = BudgetChecker(
    name="solve_analogies",
    doc="Check ``fn(a, b, c, E) -> (n,) ints``: for each ``q``, the row of ``E`` most cosine-similar to "
        "``E[b[q]] - E[a[q]] + E[c[q]]``, leaving out ``a[q]``, ``b[q]`` and ``c[q]``.",
    reference=_solve_analogies,
    cases=_analogy_cases(),
    mistakes=(
        Mistake(_no_exclusion, "leave each question's three words out of its candidates: the target is usually "
                "closest to one of them."),
        Mistake(_every_questions_words, "leave out each question's own three words only: row q loses the "
                "columns a[q], b[q] and c[q], not the words of every question."),
        Mistake(_wrong_direction, "the target is E[b] - E[a] + E[c]: start from b, remove a, add c."),
        Mistake(_analogy_by_dot, "rank by cosine, not by dot product: the rows of E have different lengths."),
    ),
    forbidden=_SIMILARITY,
    big_case=_analogies_big_case(),
    calls_budget=120,  # a handful per array operation; a loop over the 200 questions makes 200 at the least
    calls_hint="it loops over the questions in Python, which the statement rules out. Build all the targets at "
               "once, (n, d), score them against every word, (n, V), and rule out each row's three words by "
               "indexing with (row, column) pairs.",
)


# --- a stack of torch.nn.Linear weights as one row-convention matrix ---------------------------------

def _stack_cases() -> list[Case]:
    rng = np.random.default_rng(105)
    cases = [
        # Square layers first: a missing transpose or a wrong order gives no shape error, only wrong
        # numbers, and on these two each of the mistakes below gives different ones.
        Case("two square layers, stored weights [[1, 2], [0, 1]] then [[0, 1], [2, 0]]",
             ([np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [2.0, 0.0]])],)),
        Case("one layer, stored weight [[1, 2, 3], [4, 5, 6]] (d_in=3, d_out=2)",
             ([np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])],)),
        Case("three random square layers, d=3", ([rng.normal(size=(3, 3)) for _ in range(3)],)),
    ]
    for dims in ((3, 4, 2), (5, 2, 6, 3), (2, 7, 7, 4, 1)):
        weights = [rng.normal(size=(d_out, d_in)) for d_in, d_out in zip(dims[:-1], dims[1:], strict=True)]
        cases.append(Case(f"{len(weights)} random layers, widths {' -> '.join(map(str, dims))}", (weights,)))
    return cases


def _combined_row_weight(weights: list[np.ndarray]) -> np.ndarray:
    """The stack run by PyTorch itself on the rows of the identity: row i of the result is where e_i goes."""
    import torch  # only here: the NumPy chapters' checkers import without PyTorch

    x = torch.eye(weights[0].shape[1], dtype=torch.float64)
    for w in weights:
        x = torch.nn.functional.linear(x, torch.as_tensor(np.asarray(w, dtype=np.float64)))
    return x.numpy()


def _chain(matrices: list[np.ndarray]) -> np.ndarray:
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


def _stored_in_order(weights) -> np.ndarray:
    return _chain(list(weights))


def _column_matrix(weights) -> np.ndarray:
    return _chain(list(weights)[::-1])


def _transposes_reversed(weights) -> np.ndarray:
    return _chain([w.T for w in list(weights)[::-1]])


check_combined_row_weight = Checker(
    name="combined_row_weight",
    doc="Check ``fn(weights) -> (d_in, d_out)``: ``weights`` lists the stored weights of ``torch.nn.Linear`` "
        "layers without bias, first layer first, each of shape (d_out, d_in); returns the one row-convention "
        "matrix ``W`` with ``X @ W`` equal to the layers applied in turn.",
    reference=_combined_row_weight,
    cases=_stack_cases(),
    mistakes=(
        Mistake(_stored_in_order, "a stored weight has shape (d_out, d_in) and acts as x W^T: transpose each one "
                "before it multiplies row vectors from the right."),
        Mistake(_column_matrix, "that is the stack's column-convention matrix, which acts from the left on "
                "columns (W_n ... W_1 x); rows need its transpose."),
        Mistake(_transposes_reversed, "on a row vector the first layer acts first, so its matrix is the "
                "leftmost factor: x W_1^T W_2^T ..."),
    ),
    atol=1e-10,
    forbidden=("torch.nn.functional.linear", "torch.nn.Linear.forward"),
)
