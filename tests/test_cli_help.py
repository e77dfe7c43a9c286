"""Every command line of the package prints its help (argparse formats help strings with %)."""

import pytest

from attnbook import bench, train

COMMANDS = [(bench.main, []), (train.main, []), (train.main, ["gpt"])] + [
    (bench.main, [name]) for name in ("seq2seq", "gpt", "attention", "bpe", "mlm", "rotary", "modern", "speedrun")]


@pytest.mark.parametrize(("main", "args"), COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_prints(main, args, capsys):
    with pytest.raises(SystemExit) as done:
        main([*args, "--help"])
    assert done.value.code == 0
    assert "usage: python -m attnbook." in capsys.readouterr().out
