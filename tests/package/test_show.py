"""``attnbook.show``: the package's own source as a chapter displays it, compared with ``inspect``'s reading of the
same files."""

import inspect
import json
import subprocess
import sys
import textwrap

import pytest

import attnbook
import attnbook.torch as at
from attnbook import show
from attnbook.torch.decoding import generate


def source(obj):
    return textwrap.dedent(inspect.getsource(obj)).rstrip("\n")


@pytest.mark.parametrize(("obj", "path", "name"), [
    (at.LayerNorm, "attnbook/torch/layernorm.py", "LayerNorm"),
    (at.scaled_dot_product_attention, "attnbook/torch/attention.py", "scaled_dot_product_attention"),
    (at.MultiHeadAttention.forward, "attnbook/torch/multihead.py", "MultiHeadAttention.forward"),
    (at.EncoderBlock, "attnbook/torch/blocks.py", "EncoderBlock"),
])
def test_the_header_names_the_file_and_the_code_is_the_source(obj, path, name):
    lines = repr(show(obj)).split("\n")
    assert lines[0] == f"# {path}: {name}"
    assert "\n".join(lines[1:]) == source(obj)


def test_a_method_is_shown_from_column_zero_and_a_bound_method_as_its_function():
    text = repr(show(at.LayerNorm.forward))
    assert text.split("\n")[1].startswith("def forward(self")
    assert repr(show(at.LayerNorm(4).forward)) == text


def test_a_decorated_function_shows_its_decorator_and_its_own_file():
    text = repr(show(generate))
    assert text.split("\n")[:2] == ["# attnbook/torch/decoding.py: generate", "@torch.no_grad()"]
    assert "def generate(" in text


def test_a_module_shows_whole():
    import attnbook.torch.layernorm as module
    assert repr(show(module)) == "# attnbook/torch/layernorm.py\n" + inspect.getsource(module).rstrip("\n")


def test_several_objects_one_after_another():
    text = repr(show(at.LayerNorm, at.FeedForward))
    assert text == repr(show(at.LayerNorm)) + "\n\n" + repr(show(at.FeedForward))


def test_both_mime_types():
    shown = show(at.LayerNorm)
    plain, markdown = repr(shown), shown._repr_markdown_()
    assert markdown == f"```python\n{plain}\n```"


def test_ipython_displays_plain_text_and_markdown():
    from IPython.core.formatters import DisplayFormatter

    formatter = DisplayFormatter()
    data, _ = formatter.format(show(at.LayerNorm))
    assert data["text/plain"] == repr(show(at.LayerNorm))
    assert data["text/markdown"] == f"```python\n{data['text/plain']}\n```"


def test_part_of_a_function_keeps_the_signature_and_marks_what_it_leaves_out():
    code = source(generate).split("\n")
    first = next(i for i, line in enumerate(code) if "with eval_mode(model)" in line)
    last = next(i for i, line in enumerate(code) if "for step in range" in line)
    signature_end = next(i for i, line in enumerate(code) if line.endswith("-> torch.Tensor:"))
    text = repr(show(generate, start="with eval_mode(model)", stop="for step in range"))
    expected = (["# attnbook/torch/decoding.py: generate"] + code[:signature_end + 1] + ["    ..."]
                + code[first:last + 1] + ["            ..."])
    assert text.split("\n") == expected


def test_part_from_the_start_or_to_the_end():
    code = source(at.LayerNorm).split("\n")
    text = repr(show(at.LayerNorm, start="def forward")).split("\n")
    assert text[1:3] == [code[0], "    ..."] and text[3:] == code[code.index("    def forward(self, x: "
                                                                         "torch.Tensor) -> torch.Tensor:"):]
    text = repr(show(at.LayerNorm, stop="super().__init__()")).split("\n")
    assert text[-1] == "        ..." and text[-2].strip() == "super().__init__()"
    assert text[1:-1] == code[:len(text) - 2]


@pytest.mark.parametrize("obj", [len, inspect.getsource, json, pytest.raises, 3, "LayerNorm"])
def test_refuses_what_is_not_attnbook(obj):
    with pytest.raises(ValueError, match="attnbook"):
        show(obj)


def test_refuses_a_line_that_is_not_there_and_parts_of_several():
    with pytest.raises(ValueError, match="start='no such line' matches no line"):
        show(at.LayerNorm, start="no such line")
    with pytest.raises(ValueError, match="stop='super' matches no line .*after the start line"):
        show(at.LayerNorm, start="def forward", stop="super")
    with pytest.raises(ValueError, match="one at a time"):
        show(at.LayerNorm, at.FeedForward, start="def forward")
    with pytest.raises(ValueError, match="at least one"):
        show()


def test_importing_attnbook_does_not_import_torch():
    code = "import sys, attnbook; attnbook.show; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
    assert attnbook.show is show
