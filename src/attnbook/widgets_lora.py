"""Chapter 27's figures: what fine-tuning learns on a new text and forgets of the old one, per way of fine-tuning.

Each figure takes the recorded runs, a dict from a run's name (``"full"``, ``"rank 4"``, ...) to a dict with
``trainable`` (the number of parameters trained), ``steps`` (the steps at which both losses were measured,
starting at 0) and ``new`` and ``old`` (the validation losses on the new text and on the old one at those
steps). Only what ipywidgets 7 and 8 share is used, since Colab ships 7.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt


def _check_runs(runs: dict[str, dict]) -> None:
    if not runs:
        raise ValueError("runs is empty: give at least one recorded run")
    for name, run in runs.items():
        missing = [k for k in ("trainable", "steps", "new", "old") if k not in run]
        if missing:
            raise ValueError(f"run {name!r} lacks {missing}; each run needs 'trainable', 'steps', 'new' and 'old'")
        if not len(run["steps"]) == len(run["new"]) == len(run["old"]):
            raise ValueError(f"run {name!r}: steps, new and old must have one entry each per measurement; got "
                             f"{len(run['steps'])}, {len(run['new'])} and {len(run['old'])}")


def lora_curves_figure(runs: dict[str, dict], chosen: str, total: int, new_name: str = "new text",
                       old_name: str = "old text"):
    """Two panels, the loss on the new text and on the old one against the fine-tuning step, every run in
    grey and ``chosen`` in colour; the title gives its trainable parameters as a share of ``total``, the
    model's parameter count (chapter 27). Returns the figure."""
    _check_runs(runs)
    if chosen not in runs:
        raise ValueError(f"chosen must be one of {list(runs)}; got {chosen!r}")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, key, what in zip(axes, ("new", "old"), (new_name, old_name), strict=True):
        for name, run in runs.items():
            if name != chosen:
                ax.plot(run["steps"], run[key], "o-", color="0.75", ms=3, lw=1)
        run = runs[chosen]
        ax.plot(run["steps"], run[key], "o-", color="C0" if key == "new" else "C3", lw=2, label=chosen)
        ax.set_xlabel("fine-tuning step")
        ax.set_ylabel(f"validation loss on {what} (nats)")
        ax.set_title(f"{what}: {run[key][0]:.2f} at the start, {run[key][-1]:.2f} at the end", fontsize=10)
        ax.legend(fontsize=8)
    trainable = runs[chosen]["trainable"]
    fig.suptitle(f"{chosen}: {trainable:,} trainable parameters, {trainable / total:.2%} of the model's {total:,} "
                 "(grey: the other runs)", fontsize=11)
    fig.tight_layout()
    return fig


def lora_explorer(runs: dict[str, dict], total: int, new_name: str = "new text",
                  old_name: str = "old text") -> widgets.VBox:
    """A drop-down over the recorded runs, drawing ``lora_curves_figure`` for the one chosen (chapter 27).

    Going down the ranks to full fine-tuning, the trainable parameters grow; the drawing shows what each run
    learned of the new text and lost of the old one, step by step."""
    _check_runs(runs)
    names = list(runs)
    run = widgets.Dropdown(options=names, value=names[0], description="fine-tuning",
                           style={"description_width": "initial"})

    def draw(name: str) -> None:
        lora_curves_figure(runs, name, total, new_name, old_name)
        plt.show()

    out = widgets.interactive_output(draw, {"name": run})
    return widgets.VBox([run, out])


def forgetting_figure(runs: dict[str, dict], new_name: str = "new text", old_name: str = "old text"):
    """The trade-off as training goes: each run's loss on the old text (x) against its loss on the new one (y)
    at every measurement, a line from where the base model starts (the runs' common first measurement) through
    each recorded step to a large dot where the run ends, labelled with its trainable parameters (chapter 27).
    Down is learning, right is forgetting; at one height, the run further left has forgotten less for the same
    learning. Returns the figure."""
    _check_runs(runs)
    first = next(iter(runs.values()))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(first["old"][0], first["new"][0], "k*", ms=12, label="base model, before fine-tuning")
    for k, (name, run) in enumerate(runs.items()):
        ax.plot(run["old"], run["new"], ".-", color=f"C{k}", ms=5, lw=1, alpha=0.6)  # every measurement, in order
        ax.plot(run["old"][-1], run["new"][-1], "o", color=f"C{k}", ms=8,
                label=f"{name}: {run['trainable']:,} trainable")
    steps = ", ".join(str(s) for s in first["steps"])
    ax.set_xlabel(f"validation loss on {old_name} (nats; right: forgotten)")
    ax.set_ylabel(f"validation loss on {new_name} (nats; down: learned)")
    ax.set_title(f"what each way of fine-tuning learns and forgets, measured at steps {steps}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
