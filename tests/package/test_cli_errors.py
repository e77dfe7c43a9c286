"""Every option of ``attnbook train`` and ``attnbook bench`` given a bad value stops with a usage error that names
it (exit code 2, no traceback), before any data is read or any training; a run that cannot get its data, or a
resume into a checkpoint of other settings, stops with a paragraph (exit code 1), not a traceback."""

import argparse
import urllib.error

import pytest

from attnbook import bench, train
from attnbook.training.lm import PRESETS

BAD_NUMBERS = ("x", "-1", "nan")


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return parser._subparsers._group_actions[0].choices[name]


def bad_values(action: argparse.Action) -> list[list[str]]:
    """Words that must be refused after ``action``'s option."""
    if action.choices is not None:
        return [["nonsense"]]
    if isinstance(action, argparse.BooleanOptionalAction) or action.nargs == 0:
        return [["false"]]  # a switch takes no value
    if action.dest == "device":
        return [["tpu"], ["cuda:x"]]
    if action.dest == "text_file":
        return [["/nonexistent/file.txt"]]
    if action.dest == "out_dir":
        return [[__file__]]  # a file, not a folder
    return [[word] for word in BAD_NUMBERS]


def cases(command: str, parser: argparse.ArgumentParser) -> list[tuple[str, list[str]]]:
    found = []
    for action in options(parser):
        option = next(o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-"))
        for words in bad_values(action):
            found.append((option, [option, *words]))
    return found


TRAIN = cases("gpt", subparser(train.build_parser(), "gpt"))
BENCH = [(option, [name, *argv]) for name in bench.BENCHMARKS
         for option, argv in cases(name, subparser(bench.build_parser(), name))]


def refused(main, argv: list[str], option: str, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2, (argv, err)
    assert "Traceback" not in err and "usage:" in err, err
    last = err.strip().splitlines()[-1]
    assert option in last, (argv, last)
    return last


def test_every_option_is_tried():
    train_options = {o for o, _ in TRAIN}
    assert {"--lr", "--eps", "--device", "--precision", "--bias", "--preset", "--seed", "--out-dir"} <= train_options
    assert len(train_options) == len(options(subparser(train.build_parser(), "gpt")))
    assert len({argv[0] for _, argv in BENCH}) == len(bench.BENCHMARKS)


@pytest.mark.parametrize(("option", "argv"), TRAIN, ids=[" ".join(a) for _, a in TRAIN])
def test_train_refuses_a_bad_value_by_its_option(option, argv, capsys, monkeypatch):
    monkeypatch.setattr(train, "train_gpt", lambda *a, **k: pytest.fail(f"{argv} trained"))
    refused(train.main, ["gpt", *argv], option, capsys)


@pytest.mark.parametrize(("option", "argv"), BENCH, ids=[" ".join(a) for _, a in BENCH])
def test_bench_refuses_a_bad_value_by_its_option(option, argv, capsys):
    refused(bench.main, argv, option, capsys)


@pytest.mark.parametrize(("argv", "option"), [
    (["--device", "cuda"], "--device"),
    (["--precision", "bf16", "--device", "cpu"], "--precision"),
    (["--min-lr", "0.5", "--lr", "0.1"], "--min-lr"),
    (["--n-heads", "3"], "--n-heads"),
    (["--positions", "rotary", "--d-model", "12", "--n-heads", "4"], "--positions"),
    (["--optimizer", "adamw", "--matrix-lr", "0.01"], "--matrix-lr"),
    (["--warmup", "50", "--steps", "10"], "--warmup"),
    (["--target", "1.5", "--eval-every", "0"], "--target"),
    (["--resume"], "--resume"),
    (["--resume", "--out-dir", "/nonexistent/run"], "--resume"),
])
def test_train_refuses_an_impossible_combination_by_its_option(argv, option, capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)  # a machine without a GPU, whatever this one has
    monkeypatch.setattr(train, "train_gpt", lambda *a, **k: pytest.fail(f"{argv} trained"))
    last = refused(train.main, ["gpt", *argv], option, capsys)
    assert "argument " + option in last


def test_a_first_run_offline_says_what_to_do_in_one_paragraph(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ATTNBOOK_CACHE_DIR", str(tmp_path / "cache"))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(SystemExit) as done:
        train.main(["gpt", "--preset", "tiny", "--sample", "0"])
    err = capsys.readouterr().err
    assert done.value.code == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 6, err  # the usage line and the message, nothing chained
    assert "could not be downloaded" in err and "ATTNBOOK_DATA_DIR" in err and "--text-file" in err


def test_a_resume_with_other_settings_is_a_message_not_a_traceback(tmp_path, capsys, verse_text):
    text = tmp_path / "verse.txt"
    text.write_text(verse_text, encoding="utf-8")
    run = ["gpt", "--preset", "tiny", "--steps", "4", "--warmup", "1", "--eval-every", "2", "--text-file", str(text),
           "--out-dir", str(tmp_path / "run"), "--sample", "0", "--no-progress"]
    train.main(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        train.main([*run, "--resume", "--d-model", "64"])
    err = capsys.readouterr().err
    assert done.value.code == 1 and "Traceback" not in err
    assert "trained with another model" in err and "d_model: saved 32, requested 64" in err


def test_the_help_has_a_sentence_for_every_option_and_no_markup(capsys):
    with pytest.raises(SystemExit):
        train.main(["gpt", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    for action in options(subparser(train.build_parser(), "gpt")):
        assert action.help and not action.help.startswith("the preset's value"), action.dest
    assert PRESETS["cpu-small"].lr == 1e-3 and "the peak learning rate" in out
