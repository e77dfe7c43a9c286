"""Checkers for the coding exercises of chapter 16 (training an encoder-decoder)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.data.tasks import BOS, EOS, PAD
from attnbook.exercises._harness import (
    COMPARED,
    Case,
    Checker,
    Mistake,
    Outcome,
    Problem,
    _guarded_compare,
    _recorded,
    _values,
)
from attnbook.torch.decoding import greedy_decode
from attnbook.torch.transformer import EncoderDecoderTransformer, TransformerConfig
from attnbook.training.losses import sequence_loss
from attnbook.training.schedule import lr_at


def _smoothed_masked_loss(logits, tgt, eps):
    return sequence_loss(logits, tgt, PAD, eps)


def _log_probs(logits):
    return torch.log_softmax(logits.double(), dim=-1)


def _padding_counted(logits, tgt, eps):
    log_p = _log_probs(logits)
    V = logits.shape[-1]
    picked = log_p.gather(-1, tgt[..., None])[..., 0]
    return -((1 - eps) * picked + eps / V * log_p.sum(-1)).mean()


def _others_only(logits, tgt, eps):
    log_p, real = _log_probs(logits), tgt != PAD
    V = logits.shape[-1]
    picked = log_p.gather(-1, tgt[..., None])[..., 0]
    rest = log_p.sum(-1) - picked
    return -((1 - eps) * picked + eps / (V - 1) * rest)[real].mean()


def _unsmoothed(logits, tgt, eps):
    return -_log_probs(logits).gather(-1, tgt[..., None])[..., 0][tgt != PAD].mean()


def _per_sequence_mean(logits, tgt, eps):
    log_p, real = _log_probs(logits), (tgt != PAD).double()
    V = logits.shape[-1]
    per_position = -((1 - eps) * log_p.gather(-1, tgt[..., None])[..., 0] + eps / V * log_p.sum(-1))
    return ((per_position * real).sum(1) / real.sum(1)).mean()


def _loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(16)
    cases = []
    for B, T, V, eps in ((1, 3, 4, 0.1), (3, 5, 6, 0.2), (4, 7, 14, 0.1)):
        tgt = torch.randint(1, V, (B, T), generator=g)  # any token but PAD
        for row in range(1, B):  # later rows shorter: their ends are padding
            tgt[row, T - row:] = PAD
        cases.append(Case(f"logits ({B}, {T}, {V}), {int((tgt == PAD).sum())} padded targets, eps={eps}",
                          (torch.randn(B, T, V, generator=g), tgt, eps)))
    return cases


check_smoothed_masked_loss = Checker(
    name="smoothed_masked_loss",
    doc="Check ``fn(logits, tgt, eps) -> float``: label-smoothed cross-entropy, mean over the non-padding "
        "positions of ``tgt``.",
    reference=_smoothed_masked_loss,
    cases=_loss_cases(),
    mistakes=(
        Mistake(_padding_counted, "padded positions count here: average only over the positions whose target "
                "is not PAD."),
        Mistake(_others_only, "PyTorch's label_smoothing spreads eps over all V tokens, the right one included: "
                "eps / V each, plus 1 - eps on the target."),
        Mistake(_unsmoothed, "that is the loss without smoothing: the target distribution also puts eps / V on "
                "every token."),
        Mistake(_per_sequence_mean, "that averages each sequence first, so a short sequence weighs as much as a "
                "long one: average over all real positions of the batch at once."),
    ),
    atol=1e-6,
    forbidden=(sequence_loss, F.cross_entropy),
)


def _schedule(step, peak, warmup, total):  # a wrapper: the checker's reference is not lr_at itself
    return lr_at(step, peak, warmup, total, final=0.0, shape="cosine")


def _from_zero(step, peak, warmup, total):
    return peak * step / warmup if step < warmup else _schedule(step, peak, warmup, total)


def _decay_over_total_minus_warmup(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


def _no_warmup(step, peak, warmup, total):
    return peak * 0.5 * (1 + math.cos(math.pi * step / (total - 1)))


check_warmup_cosine = Checker(
    name="warmup_cosine",
    doc="Check ``fn(step, peak, warmup, total) -> float``: linear warm-up reaching ``peak`` at step ``warmup - 1``, "
        "then half a cosine down to 0 at step ``total - 1``.",
    reference=_schedule,
    cases=[*(Case(f"step={s}, peak=1e-3, warmup=100, total=1000", (s, 1e-3, 100, 1000)) for s in (0, 49, 99, 100)),
           # the last step of a short run: the rate must have reached 0 there
           Case("step=9, peak=1.0, warmup=2, total=10", (9, 1.0, 2, 10)),
           *(Case(f"step={s}, peak=1e-3, warmup=100, total=1000", (s, 1e-3, 100, 1000)) for s in (550, 999))],
    mistakes=(
        Mistake(_from_zero, "steps count from 0, and step 0 already trains: the warm-up starts one increment "
                "above 0 and reaches peak at step warmup - 1, its last step, not at step warmup."),
        Mistake(_no_warmup, "rise along a straight line during the first `warmup` steps before decaying."),
        Mistake(_decay_over_total_minus_warmup, "the decay must be complete at the last step, total - 1: it "
                "takes total - 1 - warmup steps after the warm-up, not total - warmup."),
    ),
    forbidden=(lr_at,),
    atol=1e-12,
)


# --- beam search -------------------------------------------------------------------------------------

class _TableModel:
    """A stand-in for an encoder-decoder whose next-token logits are a fixed table keyed by the prefix.

    ``table`` maps the tokens after ``BOS`` (a tuple) to a row of ``V`` logits; a prefix missing from it
    gets ``default``. ``encode`` and ``decode`` have the signatures of ``EncoderDecoderTransformer``'s, so
    a search written for the real model runs on it unchanged (``decode`` also takes a memory of one row
    for several prefixes, which the real model refuses). Equal tables make equal models, so the harness
    can tell that an answer left its model alone.
    """

    def __init__(self, table: dict[tuple[int, ...], list[float]], default: list[float]) -> None:
        self.table = {k: tuple(v) for k, v in table.items()}
        self.default = tuple(default)
        self.training = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TableModel) and (self.table, self.default) == (other.table, other.default)

    __hash__ = None  # mutable, compared by value

    def eval(self) -> _TableModel:
        self.training = False
        return self

    def train(self, mode: bool = True) -> _TableModel:
        self.training = mode
        return self

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return src.double()[..., None], (src != PAD)[:, None, :]

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        rows = [[self.table.get(tuple(r[1:t + 1]), self.default) for t in range(len(r))] for r in tgt.tolist()]
        return torch.tensor(rows, dtype=torch.float64)  # (B, T, V): position t predicts token t + 1

    def __call__(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt, *self.encode(src))


class _SeededModel(EncoderDecoderTransformer):
    """The package's encoder-decoder, compared by its weights (the harness checks an answer left it alone)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _SeededModel):
            return False
        mine, theirs = self.state_dict(), other.state_dict()
        return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)

    __hash__ = EncoderDecoderTransformer.__hash__  # modules sit in sets (named_modules)


def _next_log_probs(model, memory, src_mask, prefixes):
    """``(n, V)`` log-probabilities of the next token after each prefix (the tokens after BOS)."""
    tgt = torch.tensor([[BOS, *p] for p in prefixes])
    n = len(prefixes)
    logits = model.decode(tgt, memory.expand(n, -1, -1), src_mask.expand(n, -1, -1))[:, -1]
    return torch.log_softmax(logits.double(), dim=-1)


def _rank(h):  # best first: the higher total, and on a tie the lexicographically smaller token sequence
    return -h[2], h[0]


def _finished(h):
    return bool(h[0]) and h[0][-1] == EOS


def _search(model, src, beam_width, max_len, *, expand_finished=False, add_probabilities=False, per_beam=False,
            last_live_beam=False, pick_last=False):
    """Beam search as the exercise states it; each keyword plants one typical mistake."""
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        beam, done = [((), (), 0.0)], []  # hypotheses: (tokens after BOS, their log-probabilities, score)
        for _ in range(max_len):
            live = [h for h in beam if expand_finished or not _finished(h)]
            if not live:
                break
            candidates = [] if expand_finished else [h for h in beam if _finished(h)]  # carried over as they are
            rows = _next_log_probs(model, memory, src_mask, [h[0] for h in live]).tolist()
            for (tokens, steps, score), row in zip(live, rows, strict=True):
                mine = [(tokens + (tok,), steps + (lp,), score + (math.exp(lp) if add_probabilities else lp))
                        for tok, lp in enumerate(row)]
                if per_beam:  # each hypothesis keeps its own best, instead of all of them competing
                    mine = sorted(mine, key=_rank)[:max(1, beam_width // len(live))]
                candidates += mine
            ranked = sorted(candidates, key=_rank)
            if last_live_beam:  # a finished hypothesis that earns a place leaves the beam; live ones refill it
                done += [h for h in ranked[:beam_width] if _finished(h)]
                ranked = [h for h in ranked if not _finished(h)]
            beam = ranked[:beam_width]
        final = sorted(beam or done, key=_rank)  # the last beam, whatever finished before it
        best = final[-1] if pick_last else final[0]
    return list(best[0]), list(best[1])


def _beam_search(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len)


def _expands_finished(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len, expand_finished=True)


def _sums_probabilities(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len, add_probabilities=True)


def _top_per_beam(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len, per_beam=True)


def _last_of_beam(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len, pick_last=True)


def _best_of_last_beam(model, src, beam_width, max_len):
    return _search(model, src, beam_width, max_len, last_live_beam=True)


def _table(weights: dict[int, float], V: int = 6) -> list[float]:
    """A row of logits: the log of ``weights``, with 0.001 for every token not named (PAD and BOS too)."""
    return [math.log(weights.get(tok, 1e-3)) for tok in range(V)]


def _table_case(label, table, beam_width, max_len, default=None):
    model = _TableModel({k: _table(v) for k, v in table.items()}, _table(default or {EOS: 0.9}))
    return Case(f"a table model of next-token probabilities (tokens 0-5, BOS 1, EOS 2): {label}; "
                f"beam_width={beam_width}, max_len={max_len}", (model, torch.tensor([[4, 5, 3]]), beam_width, max_len))


def _seeded_model(seed: int) -> _SeededModel:
    """A tiny untrained encoder-decoder, its output layer scaled up so that its choices are not all near ties."""
    torch.manual_seed(seed)
    model = _SeededModel(TransformerConfig(14, 14, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                           max_len=16)).double().eval()
    with torch.no_grad():
        model.unembed.W_u.mul_(10.0)
        model.unembed.b[EOS] += 1.0  # so that hypotheses end now and then
    return model


def _model_case(seed, beam_width, max_len):
    src = torch.randint(4, 14, (1, 5), generator=torch.Generator().manual_seed(seed))
    return Case(f"a tiny random EncoderDecoderTransformer (seed {seed}), source {src[0].tolist()}, "
                f"beam_width={beam_width}, max_len={max_len}", (_seeded_model(seed), src, beam_width, max_len))


def _beam_cases() -> list[Case]:
    return [
        # greedy takes 4 (0.5) and then at best 0.3; 5 then the end (0.4 x 0.9) is likelier
        _table_case("greedy's first choice is not the best start", {(): {4: 0.5, 5: 0.4, EOS: 0.1},
                    (4,): {EOS: 0.3, 3: 0.3, 4: 0.2, 5: 0.2}, (5,): {EOS: 0.9, 3: 0.1}}, 2, 4),
        _table_case("4 and 5 tie at every step", {(): {4: 0.4, 5: 0.4, EOS: 0.2}, (4,): {EOS: 0.6, 3: 0.4},
                    (5,): {EOS: 0.6, 3: 0.4}}, 1, 3),
        _table_case("4 and 5 tie at every step", {(): {4: 0.4, 5: 0.4, EOS: 0.2}, (4,): {EOS: 0.6, 3: 0.4},
                    (5,): {EOS: 0.6, 3: 0.4}}, 3, 3),
        # both places of the second step belong to the hypothesis that starts with 4
        _table_case("one hypothesis earns both places", {(): {4: 0.5, 5: 0.45}, (4,): {3: 0.5, 4: 0.49},
                    (5,): {EOS: 0.3, 3: 0.3, 4: 0.3}, (4, 3): {EOS: 0.9, 3: 0.1},
                    (4, 4): {EOS: 0.95, 3: 0.05}}, 2, 4),
        # products rank 4 3 (0.42) above 5 then the end (0.38); sums of probabilities the other way round
        _table_case("nothing ends within max_len", {(): {4: 0.6, 5: 0.4}, (4,): {3: 0.7, EOS: 0.3},
                    (5,): {EOS: 0.95, 3: 0.05}}, 2, 2),
        _table_case("the end token is never likely", {(): {3: 0.5, 4: 0.3, 5: 0.2}}, 3, 4, default={4: 0.6, 5: 0.4}),
        _model_case(10, 1, 6),  # greedy's answer
        _model_case(10, 2, 6),
        _model_case(10, 3, 6),
        _model_case(5, 4, 6),
    ]


def _tokens_of(answer) -> list[int] | None:
    """The tokens of an answer ``(tokens, log_probs)``, or ``None`` when it has no readable tokens."""
    try:
        values = _values(answer)
        tokens = values[0] if values.ndim == 2 and len(values) == 2 else None
    except Exception:  # tokens and log-probabilities of different lengths: read the tokens alone
        try:
            tokens = _values(answer[0])
        except Exception:
            return None
    if tokens is None or tokens.ndim != 1:
        return None
    tokens = tokens.astype(np.float64)
    if not (np.isfinite(tokens).all() and (tokens == np.round(tokens)).all()):
        return None
    return [int(t) for t in tokens]


def _is_total(answer) -> bool:
    """Whether ``answer`` is a pair of tokens and a single number (the total instead of one per token)."""
    try:
        return len(answer) == 2 and _values(answer[1]).ndim == 0
    except Exception:
        return False


@dataclass(repr=False)
class _SearchChecker(Checker):
    """A ``Checker`` for a search returning ``(tokens, log_probs)``: a wrong answer is described by its tokens,
    and a mistake is named when the learner's tokens are the mistake's (whatever log-probabilities came along)."""

    def _check_case(self, fn, case, forbidden=(), hints=True):
        recorded, returned = _recorded(fn)
        problem = Checker._check_case(self, recorded, case, forbidden, hints=False)  # as every checker runs it
        got = _tokens_of(returned.get("answer"))
        if problem is not None and problem.outcome in COMPARED | {Outcome.WRONG_FORM} and got is not None \
                and _is_total(returned["answer"]):
            return Problem(Outcome.WRONG_FORM,
                           f"returned the tokens {got} with one number beside them (input: {case.label}); return "
                           "the log-probability of each token, a list as long as the tokens (their sum is the "
                           "score).")
        if problem is None or got is None or problem.outcome not in COMPARED:
            return problem  # it raised, hung, delegated, changed its input, or returned no readable tokens
        want = _tokens_of(self.reference(*copy.deepcopy(case.args)))
        if got != want:
            problem = Problem(Outcome.WRONG_VALUE,
                              f"returned the tokens {got}, but the best hypothesis is {want} (input: {case.label}).")
        else:
            problem = Problem(Outcome.WRONG_VALUE,
                              f"the tokens are right, but not the log-probabilities that came with them "
                              f"({problem.text[:-1]}); each is the log-softmax of the decoder's last position for "
                              "the tokens before it.")
        typicals = []
        for mistake in self.mistakes:
            try:
                typicals.append((mistake, mistake.fn(*copy.deepcopy(case.args))))
            except Exception:  # a typical mistake may crash where the learner's did not
                continue
        # A mistake whose whole answer (tokens and log-probabilities) is the learner's first; then one whose
        # tokens alone are: two mistakes may find the same tokens by different wrong routes.
        for mistake, typical in typicals:
            if _guarded_compare(typical, returned["answer"], self.atol, self.rtol) is None:
                return problem.extended(f"Hint: {mistake.hint}")
        for mistake, typical in typicals:
            if _tokens_of(typical) == got != want:
                return problem.extended(f"Hint: {mistake.hint}")
        return problem


check_beam_search = _SearchChecker(
    name="beam_search",
    doc="Check ``fn(model, src, beam_width, max_len) -> (tokens, log_probs)``: beam search on an encoder-decoder "
        "(``model.encode(src)`` once, ``model.decode(prefixes, memory, src_mask)``) for one source ``src`` "
        "``(1, S)``, from BOS; finished hypotheses (ending in EOS) keep their place and stop growing; at most "
        "``max_len`` tokens after BOS; the best by total log-probability, ties to the smaller token sequence; "
        "its tokens after BOS and each one's log-probability.",
    reference=_beam_search,
    cases=_beam_cases(),
    mistakes=(
        Mistake(_expands_finished, "a hypothesis that has produced the end token is finished: carry it over "
                "unchanged, with its score, instead of extending it past the end."),
        Mistake(_sums_probabilities, "a sequence's probability is the product of its tokens' probabilities: add "
                "log-probabilities, not probabilities (a sum of probabilities grows with every token)."),
        Mistake(_top_per_beam, "choose the beam_width best among all candidates together (every hypothesis times "
                "every token, and the finished ones): one hypothesis may earn several places, another none."),
        Mistake(_last_of_beam, "return the best hypothesis of the final beam, the one with the highest total "
                "log-probability, not the last one kept."),
        Mistake(_best_of_last_beam, "the best hypothesis may have finished steps before the search stopped: "
                "keep finished hypotheses in the beam (or set them aside) and return the best of all, not the best "
                "of the last beam of unfinished ones."),
    ),
    atol=1e-5, rtol=1e-5,  # float32 log-probabilities pass; a token is an integer, 1 away from any other
    forbidden=(greedy_decode, "attnbook.torch.inspect.decode_with_cross_attention"),
)
