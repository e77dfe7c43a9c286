"""Adam in NumPy, the update of ``torch.optim.Adam`` (chapter 19; Kingma and Ba, 2015)."""

from __future__ import annotations

import math

import numpy as np


class Adam:
    """Adam over a dict of NumPy parameters, updated in place by ``step(grads)``.

    With ``m`` and ``v`` running averages of the gradient and of its square, step ``t`` moves each parameter by
    ``-lr * mhat / (sqrt(vhat) + eps)``, with the bias corrections ``mhat = m / (1 - beta1^t)`` and
    ``vhat = v / (1 - beta2^t)``: the defaults and the formula of ``torch.optim.Adam`` without weight decay.
    Refuses ``lr <= 0``, betas outside ``[0, 1)`` and ``eps <= 0``.
    """

    def __init__(self, params: dict[str, np.ndarray], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        if not lr > 0:
            raise ValueError(f"lr must be positive; got {lr}")
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1) (a running average forgets); got {betas!r}")
        if not eps > 0:
            raise ValueError(f"eps must be positive (it keeps the step finite where vhat is 0); got {eps!r}")
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads: dict[str, np.ndarray]) -> None:
        """Update every parameter from its gradient; ``grads`` must have the parameters' keys and shapes."""
        if grads.keys() != self.params.keys():
            missing, extra = self.params.keys() - grads.keys(), grads.keys() - self.params.keys()
            raise ValueError(f"grads must have the parameters' keys; missing {sorted(missing)}, extra {sorted(extra)}")
        self.t += 1
        b1, b2 = self.betas
        step_size = self.lr / (1 - b1**self.t)
        root_c2 = math.sqrt(1 - b2**self.t)
        for k, p in self.params.items():
            g = grads[k]
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            p -= step_size * self.m[k] / (np.sqrt(self.v[k]) / root_c2 + self.eps)  # in place: the dict sees it
