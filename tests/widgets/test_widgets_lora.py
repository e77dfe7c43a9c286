"""Chapter 27's figures: the drop-down offers every recorded run, and each figure draws what it says."""

import matplotlib.pyplot as plt
import pytest

from attnbook.widgets import controls, forgetting_figure, lora_curves_figure, lora_explorer

RUNS = {"rank 1": {"trainable": 10, "steps": [0, 50, 100], "new": [3.0, 2.5, 2.2], "old": [1.9, 2.0, 2.05]},
        "full": {"trainable": 1000, "steps": [0, 50, 100], "new": [3.0, 2.0, 1.6], "old": [1.9, 2.3, 2.6]}}


def test_the_explorer_offers_every_run():
    assert controls(lora_explorer(RUNS, total=1000))["fine-tuning"] == (("rank 1", "full"), "rank 1")


def test_the_curves_show_the_chosen_run_and_its_share_of_the_parameters():
    fig = lora_curves_figure(RUNS, "rank 1", total=1000, new_name="code", old_name="Shakespeare")
    assert "rank 1: 10 trainable parameters, 1.00% of the model's 1,000" in fig._suptitle.get_text()
    new_ax, old_ax = fig.axes
    assert new_ax.get_title() == "code: 3.00 at the start, 2.20 at the end"
    assert old_ax.get_title() == "Shakespeare: 1.90 at the start, 2.05 at the end"
    # the chosen run is drawn last, in colour, over the others in grey
    assert list(new_ax.lines[-1].get_ydata()) == RUNS["rank 1"]["new"]
    plt.close(fig)


def test_the_static_figure_draws_each_run_through_every_measurement_to_where_it_ends():
    fig = forgetting_figure(RUNS)
    (ax,) = fig.axes
    points = {line.get_label(): (line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines}
    assert points["base model, before fine-tuning"] == (1.9, 3.0)
    assert points["full: 1,000 trainable"] == (2.6, 1.6) and points["rank 1: 10 trainable"] == (2.05, 2.2)
    paths = [line for line in ax.lines if len(line.get_xdata()) > 1]
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in paths] == [
        (run["old"], run["new"]) for run in RUNS.values()]  # (old, new) at steps 0, 50 and 100, in order
    assert ax.get_title().endswith("at steps 0, 50, 100")
    plt.close(fig)


def test_malformed_runs_are_refused():
    with pytest.raises(ValueError, match="lacks \\['old'\\]"):
        forgetting_figure({"a": {"trainable": 1, "steps": [0], "new": [1.0]}})
    with pytest.raises(ValueError, match="one entry each per measurement"):
        forgetting_figure({"a": {"trainable": 1, "steps": [0, 1], "new": [1.0], "old": [1.0]}})
    with pytest.raises(ValueError, match="chosen must be one of"):
        lora_curves_figure(RUNS, "rank 2", total=10)
