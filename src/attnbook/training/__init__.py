"""Training in plain PyTorch (Part III): the optimisation config, schedules, losses, the one training loop, and
evaluation."""

from attnbook.training.evaluate import exact_match
from attnbook.training.losses import sequence_loss
from attnbook.training.optimisation import Optimisation
from attnbook.training.schedule import lr_at
from attnbook.training.trainer import TrainConfig, TrainResult, set_seed, train

__all__ = ["Optimisation", "TrainConfig", "TrainResult", "exact_match", "lr_at", "sequence_loss", "set_seed", "train"]
# The seq2seq recipe (attnbook.training.seq2seq) imports the models; import it directly where needed.
