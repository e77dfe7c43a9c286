"""Every configuration class declares its fields one way (``attnbook._fields``): each field has a check and a help
sentence, a value of the wrong kind is refused by name in every class alike, and no field is written after
construction, so that ``dataclasses.replace(config, **change)`` equals the configuration built with the change."""

import dataclasses

import numpy as np
import pytest

from attnbook._fields import Checked, FieldError
from attnbook.numpy.backprop.gpt import GPTConfig as NumPyGPTConfig
from attnbook.torch.attn_only import AttnOnlyConfig, AttnOnlyShape
from attnbook.torch.feedforward import ACTIVATIONS, swiglu_hidden
from attnbook.torch.transformer import (
    FF_ACTIVATIONS,
    EncoderConfig,
    EncoderShape,
    GPTConfig,
    GPTShape,
    TransformerConfig,
)
from attnbook.torch.vit import ViTConfig
from attnbook.training.induction import InductionConfig
from attnbook.training.lm import GPTRunConfig, LMTrainConfig
from attnbook.training.mlm import MLMRunConfig
from attnbook.training.optimisation import Optimisation
from attnbook.training.trainer import TrainConfig

# Each class with the arguments it needs (the vocabularies given by position or by name).
CONFIGS = {
    TransformerConfig: ((), {"src_vocab_size": 11, "tgt_vocab_size": 13}), EncoderConfig: ((), {"vocab_size": 11}),
    EncoderShape: ((), {}), GPTShape: ((), {}),
    GPTConfig: ((), {"vocab_size": 11}), NumPyGPTConfig: ((), {"vocab_size": 11}), AttnOnlyShape: ((), {}),
    AttnOnlyConfig: ((), {"vocab_size": 11}), ViTConfig: ((), {}), Optimisation: ((), {}), TrainConfig: ((), {}),
    LMTrainConfig: ((), {}), GPTRunConfig: ((), {}), MLMRunConfig: ((), {}), InductionConfig: ((), {}),
}
# Changes that move a derived value, each valid for the classes that have its fields.
CHANGES = [{"d_model": 128}, {"d_model": 32, "n_heads": 2}, {"activation": "swiglu"}, {"d_ff": 96},
           {"activation": "swiglu", "d_model": 96}, {"steps": 50, "warmup": 10}, {"positions": "learned"},
           {"image_size": 16, "patch_size": 4}, {"pool": "cls"}, {"norm_first": True}, {"n_heads": 1},
           {"beta1": 0.8, "beta2": 0.95}, {"optimizer": "muon", "matrix_lr": 0.02}]


def build(cls, **change):
    args, kwargs = CONFIGS[cls]
    return cls(*args, **{**kwargs, **change})


def test_every_config_class_is_declared_with_checks_and_help():
    assert len(CONFIGS) == 15
    for cls in CONFIGS:
        assert issubclass(cls, Checked), cls
        for f in dataclasses.fields(cls):
            assert f.metadata.get("help") and callable(f.metadata.get("check")), (cls.__name__, f.name)


@pytest.mark.parametrize("cls", list(CONFIGS), ids=lambda c: c.__qualname__)
def test_replace_equals_the_config_built_with_the_change(cls):
    names = {f.name for f in dataclasses.fields(cls)}
    tried = 0
    for change in CHANGES:
        if not set(change) <= names:
            continue
        base = build(cls)
        try:
            direct = build(cls, **change)
        except FieldError:
            with pytest.raises(FieldError):  # a change this class refuses (SwiGLU in an encoder), refused alike
                dataclasses.replace(build(cls), **change)
            continue
        replaced = dataclasses.replace(base, **change)
        assert replaced == direct, (cls.__name__, change)
        for prop in ("ff_width", "grid", "n_tokens", "betas"):
            if hasattr(direct, prop):
                assert getattr(replaced, prop) == getattr(direct, prop), (cls.__name__, change, prop)
        tried += 1
    assert tried, cls


def test_the_feed_forward_width_is_derived_again_after_replace():
    small = GPTConfig(vocab_size=65, d_model=64)
    assert small.d_ff is None and small.ff_width == 256
    assert dataclasses.replace(small, d_model=128).ff_width == 512
    assert dataclasses.replace(small, activation="swiglu").ff_width == swiglu_hidden(64) == 171
    assert dataclasses.replace(small, d_ff=100, d_model=128).ff_width == 100
    assert dataclasses.replace(TransformerConfig(5, 5, d_model=16), d_model=32).ff_width == 128
    assert dataclasses.replace(EncoderConfig(5, d_model=16), d_model=32).ff_width == 128
    assert dataclasses.replace(NumPyGPTConfig(5, d_model=16, n_heads=2), d_model=32).ff_width == 128


WRONG_KINDS = [("n_layers", "4"), ("n_layers", 2.5), ("n_layers", True), ("d_model", -1), ("dropout", 1.0),
               ("dropout", "0.1"), ("eps", -1), ("lr", float("nan")), ("steps", 0), ("seed", -1), ("bias", 1),
               ("positions", "sideways"), ("activation", "swish"), ("eval_batches", 0), ("rate", "0.1")]


@pytest.mark.parametrize(("name", "value"), WRONG_KINDS, ids=lambda x: repr(x))
def test_a_value_of_the_wrong_kind_is_refused_by_name_in_every_class_that_has_it(name, value):
    classes = [cls for cls in CONFIGS if name in {f.name for f in dataclasses.fields(cls)}]
    assert classes
    for cls in classes:
        with pytest.raises(FieldError, match=rf"^{name} must be .*; got {value!r}") as caught:
            build(cls, **{name: value})
        assert caught.value.fields[0] == name, cls


@pytest.mark.parametrize("cls", list(CONFIGS), ids=lambda c: c.__qualname__)
def test_numpy_integers_are_integers_everywhere(cls):
    ints = {f.name: np.int64(getattr(build(cls), f.name)) for f in dataclasses.fields(cls)
            if f.type in ("int", int) and isinstance(getattr(build(cls), f.name), int)}
    assert build(cls, **ints) == build(cls)


def test_the_feed_forward_activations_are_feedforwards():
    assert set(FF_ACTIVATIONS) == set(ACTIVATIONS)


def test_the_rotary_width_rule_is_one_rule():
    for make in (lambda: GPTConfig(vocab_size=5, d_model=12, n_heads=4, positions="rotary"),
                 lambda: AttnOnlyConfig(vocab_size=5, d_model=12, n_heads=4, positions="rotary")):
        with pytest.raises(FieldError, match="d_head = d_model / n_heads must be even; got d_head = 3"):
            make()
