"""The command lines: every one prints its help (argparse formats help strings with %), every option it lists
is accepted with the type of the field it sets, and a bad value is a usage error (exit code 2) naming it."""

import dataclasses
import types
import typing

import pytest

from attnbook import bench, train
from attnbook._cli import option_kind
from attnbook.bench.speedrun import VARIANTS
from attnbook.torch.feedforward import ACTIVATIONS
from attnbook.torch.transformer import GPT_ACTIVATIONS
from attnbook.training.lm import PRESETS, GPTRunConfig, preset

BENCHMARKS = ("seq2seq", "gpt", "attention", "bpe", "mlm", "rotary", "modern", "speedrun", "induction", "vit")
COMMANDS = [(bench.main, []), (train.main, []), (train.main, ["gpt"])] + [(bench.main, [name]) for name in BENCHMARKS]


def usage_error(main, argv, capsys) -> str:
    """Run a command line that must stop with a usage error; return what it printed to stderr."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2, argv
    err = capsys.readouterr().err
    assert "usage:" in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(("main", "args"), COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_prints(main, args, capsys):
    with pytest.raises(SystemExit) as done:
        main([*args, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m attnbook." in out
    if args:
        assert "(default: " in out


def other_value(hint, default):
    """A valid value of type ``hint`` different from ``default``, and how to write it on the command line."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return other_value(inner, None if default is None else default)
    if typing.get_origin(hint) is typing.Literal:
        value = next(v for v in typing.get_args(hint) if v != default)
        return value, [str(value)]
    if hint is bool:
        return not default, [("--" if not default else "--no-")]
    if hint is int:
        value = 2 * default if default else 2
        return value, [str(value)]
    if hint is float:
        value = default / 2 if default else 0.5
        return value, [repr(value)]
    if hint is str:
        return default + "x", [default + "x"]
    raise AssertionError(f"no value for {hint}")


def test_every_run_config_field_is_set_through_the_parser():
    """Every field of GPTRunConfig at once, each to a value other than the preset's: each arrives with its type
    (read from the annotation, not the command line) and the configuration holds it."""
    hints = typing.get_type_hints(GPTRunConfig)
    base = PRESETS["cpu-small"]
    argv, expected = ["gpt", "--preset", "cpu-small"], {}
    for f in dataclasses.fields(GPTRunConfig):
        # A device and a precision this machine has, whatever it is (the others are refused before training).
        value, words = {"device": ("cpu", ["cpu"]), "precision": ("fp32", ["fp32"])}.get(f.name) or \
            other_value(hints[f.name], getattr(base, f.name))
        option = f.name.replace("_", "-")
        argv += [words[0] + option] if hints[f.name] is bool else ["--" + option, *words]
        expected[f.name] = value
    args = train.build_parser().parse_args(argv)
    config = preset(args.preset, **{name: getattr(args, name) for name in expected})
    for name, value in expected.items():
        got = getattr(args, name)
        assert got == value and type(got) is type(value), (name, got, value)
        assert getattr(config, name) == value, name
        assert value != getattr(base, name), name
    assert len(expected) == len(dataclasses.fields(GPTRunConfig))


def test_an_option_left_out_keeps_the_presets_value_and_none_is_written_none():
    args = train.build_parser().parse_args(["gpt", "--matrix-lr", "none", "--target", "1.5"])
    assert args.matrix_lr is None and args.target == 1.5
    assert not hasattr(args, "lr")  # left out: the preset's value stays


def test_the_choices_are_the_annotations():
    assert set(GPT_ACTIVATIONS) == {*ACTIVATIONS, "swiglu"}
    assert option_kind(typing.Literal["a", "b"]) == {"type": str, "choices": ["a", "b"]}
    for unsupported in (list[int], bool | None, typing.Literal["a", 1], int | str | None):
        with pytest.raises(TypeError, match="option"):
            option_kind(unsupported)


@pytest.mark.parametrize(("argv", "names"), [
    (["--lr", "fast"], ["--lr", "invalid float value: 'fast'"]),
    (["--steps", "2.5"], ["--steps", "invalid int value: '2.5'"]),
    (["--matrix-lr", "quick"], ["--matrix-lr", "'quick'"]),
    (["--optimizer", "sgd"], ["--optimizer", "'adamw', 'muon'"]),
    (["--compile", "yes"], ["--compile", "a switch takes no value (got 'yes')"]),
    (["--preset", "huge"], ["--preset", "'tiny'"]),
    (["--matrix-lr", "0.02"], ["--matrix-lr", "optimizer='muon'"]),  # the configuration's own check
    (["--warmup", "50", "--steps", "10"], ["argument --warmup: must lie in [0, --steps = 10]"]),
])
def test_train_rejects_bad_values_naming_the_field(argv, names, capsys):
    err = usage_error(train.main, ["gpt", "--preset", "tiny", *argv], capsys)
    for name in names:
        assert name in err, (name, err)


@pytest.mark.parametrize(("argv", "names"), [
    (["speedrun", "--variants", "nonsense"], ["--variants", "'nonsense'", *map(repr, VARIANTS)]),
    (["speedrun", "--target", "low"], ["--target", "'low'"]),
    (["speedrun", "--target", "-1"], ["--target", "must be positive"]),
    (["speedrun", "--eval-every", "0"], ["--eval-every", "must be 1 or more"]),
    (["modern", "--arms", "nonsense"], ["--arms", "'gpt2'", "'llama'"]),
    (["rotary", "--preset", "huge"], ["--preset", "'cpu-small'"]),
    (["attention", "--lengths", "512", "x"], ["--lengths", "'x'"]),
    (["seq2seq", "--tasks", "divide"], ["--tasks", "'reverse'"]),
])
def test_bench_rejects_bad_values_naming_the_field(argv, names, capsys):
    err = usage_error(bench.main, argv, capsys)
    for name in names:
        assert name in err, (name, err)


def test_bench_short_runs_are_valid_recipes():
    """A run shorter than a recipe's warm-up gets a warm-up that fits it, not an error about an option it lacks."""
    assert bench.mlm_config("notebook", 10).warmup == 10
    from attnbook.training import mlm

    assert bench.mlm_config("notebook", 3000).warmup == mlm.PRESETS["notebook"].warmup
    runs = bench.speedrun_configs(["baseline", "muon rotary, 1000 steps"], [1, 2], 1.9, eval_every=10)
    assert [(name, c.seed, c.optimizer, c.target) for name, c in runs] == [
        ("baseline", 1, "adamw", 1.9), ("muon rotary, 1000 steps", 1, "muon", 1.9), ("baseline", 2, "adamw", 1.9),
        ("muon rotary, 1000 steps", 2, "muon", 1.9)]


def test_train_with_a_target_trains(text_file, capsys):
    train.main(["gpt", "--preset", "tiny", "--steps", "10", "--warmup", "1", "--target", "0.01",
                "--eval-every", "5", "--sample", "0", "--no-progress", "--text-file", str(text_file)])
    assert "steps 10, validation loss" in capsys.readouterr().out  # 0.01 is far out of reach in 10 steps


def test_train_with_muon_and_its_rate_trains(text_file, tmp_path, capsys):
    train.main(["gpt", "--preset", "tiny", "--steps", "10", "--warmup", "1", "--optimizer", "muon", "--matrix-lr",
                "0.02", "--text-file", str(text_file), "--sample", "0", "--no-progress", "--out-dir", str(tmp_path)])
    assert "steps 10, validation loss" in capsys.readouterr().out
    from attnbook.training.checkpoint import load_checkpoint

    config = load_checkpoint(tmp_path / "ckpt.pt")["config"]
    assert (config["optimizer"], config["matrix_lr"]) == ("muon", 0.02)


def test_attnbook_lists_every_command_and_its_version(capsys):
    from attnbook import __main__ as attnbook_main
    from attnbook import __version__

    attnbook_main.main([])
    out = capsys.readouterr().out
    assert out.startswith(f"attnbook {__version__}:")
    for name, text in bench.BENCHMARKS.items():
        assert f"attnbook bench {name}" in out and text in out
    assert "attnbook train gpt" in out and train.MODELS["gpt"] in out
    with pytest.raises(SystemExit) as done:
        attnbook_main.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"attnbook {__version__}\n"
    assert set(bench.BENCHMARKS) == set(BENCHMARKS)  # every subcommand is listed


def test_attnbook_hands_train_and_bench_their_arguments(capsys):
    from attnbook import __main__ as attnbook_main

    err = usage_error(attnbook_main.main, ["bench", "speedrun", "--variants", "nonsense"], capsys)
    assert "'nonsense'" in err and "'muon rotary, 1000 steps'" in err
    err = usage_error(attnbook_main.main, ["train", "gpt", "--lr", "fast"], capsys)
    assert "--lr" in err
    usage_error(attnbook_main.main, ["nonsense"], capsys)
    with pytest.raises(SystemExit) as done:
        attnbook_main.main(["train", "gpt", "--help"])
    assert done.value.code == 0 and "--matrix-lr" in capsys.readouterr().out
