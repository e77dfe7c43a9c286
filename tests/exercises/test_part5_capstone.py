"""Part V's capstone (chapter 27): a ViT from the learner's own parts, adapted with the learner's own LoRA.

The solution is the one in the cells written for chapter 27 (``data/part5_capstone_cells.json``), run from a file
so that its source can be read back as a notebook's can. Each typical mistake is that solution with one thing
changed, and must fail with a message that names the part; answers that hand the work to the package, to
``peft`` or to ``torch.nn``'s attention are refused.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

import attnbook.torch as at
from attnbook.exercises._harness import Outcome
from attnbook.exercises._part5 import CASES, CHECKS_PER_CASE, check_vit_with_lora, random_vit
from attnbook.torch.vit import ViT
from tools import student

CELLS = Path(__file__).parent / "data" / "part5_capstone_cells.json"


def _cells() -> list[nbformat.NotebookNode]:
    return [nbformat.from_dict(cell) for cell in json.loads(CELLS.read_text())]


def _solution_source() -> str:
    (code,) = [c.source for c in _cells() if c.cell_type == "code" and "class MyViT" in c.source]
    return code


def _load(source: str, tmp_path: Path, name: str = "answer") -> dict:
    """The answer's classes and functions, defined from a file (as a notebook cell's source can be read)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    namespace = {"__name__": name}
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 (the exercise's own cell)
    return namespace


def _check(ns: dict):
    return check_vit_with_lora(ns["MyViT"], ns["load_vit"], ns["add_lora_qv"])


def _changed(tmp_path: Path, *edits: tuple[str, str]) -> dict:
    source = _solution_source()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return _load(source, tmp_path)


# --- the cells ------------------------------------------------------------------------------------------------------


def test_the_cells_are_a_capstone_in_the_books_exercise_format():
    cells = _cells()
    nbformat.validate(nbformat.v4.new_notebook(cells=cells))
    statement = cells[0].source
    assert statement.startswith(":::{exercise} Capstone: ") and statement.splitlines()[0].endswith("(hard)")
    assert ":label: ex-27-capstone" in statement and "*Apply.*" in statement
    assert cells[1].source.startswith(":::{solution-start} ex-27-capstone\n:class: dropdown\n:::")
    assert cells[3].source == ":::{solution-end}\n:::"
    assert re.match(r"^check_\w+\(", cells[4].source)
    assert all(student.is_solution_cell(c) for c in cells[1:4:2])
    assert student.solution_hints(cells[2].source)  # a folded hint cell goes before the code


def test_the_checker_counts_what_it_says():
    configs = [case.config for case in CASES]
    assert {c.pool for c in configs} == {"mean", "cls"} and {c.n_layers for c in configs} == {1, 2}
    assert {c.image_size for c in configs} == {8, 16}
    assert all(case.alpha != case.rank for case in CASES)  # a scale of 1 would hide a forgotten alpha / r
    assert len(CASES) == 4


# --- the solution and the skeleton ----------------------------------------------------------------------------------


def test_the_solution_passes(tmp_path):
    verdict = _check(_load(_solution_source(), tmp_path))
    assert verdict and verdict.outcome is Outcome.PASSED, verdict.message
    assert verdict.message.startswith(f"vit_with_lora: all {CHECKS_PER_CASE * len(CASES)} checks passed")


def test_the_solution_leaves_the_notebooks_random_numbers_alone(tmp_path):
    ns = _load(_solution_source(), tmp_path)
    torch.manual_seed(0)
    _check(ns)
    after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(3))


def test_the_trainable_count_is_four_r_d_per_block(tmp_path):
    """The solution's sentence: r (d + d) numbers for each of the 2 L adapters."""
    ns = _load(_solution_source(), tmp_path)
    for case in CASES:
        c = case.config
        model = ns["MyViT"](c)
        ns["add_lora_qv"](model, case.rank, case.alpha)
        assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 4 * c.n_layers * case.rank * c.d_model


def test_the_student_skeleton_is_not_attempted(tmp_path):
    skeleton = student.strip_solutions(_solution_source(), "capstone")
    assert "BEGIN SOLUTION" not in skeleton and skeleton.count("raise NotImplementedError") >= 8
    verdict = _check(_load(skeleton, tmp_path, "skeleton"))
    assert not verdict and not verdict.attempted and "not attempted yet" in verdict.message, verdict.message


def test_an_unwritten_adapter_is_not_attempted_either(tmp_path):
    ns = _changed(tmp_path, ("    for p in model.parameters():\n        p.requires_grad_(False)\n    adapters = []",
                             "    raise NotImplementedError\n    adapters = []"))
    verdict = _check(ns)
    assert not verdict.attempted and "add_lora_qv raises NotImplementedError" in verdict.message


# --- the typical mistakes, each named ----------------------------------------------------------------------------

MISTAKES = {
    "patches numbered column by column": (
        [(".permute(0, 2, 4, 1, 3, 5)", ".permute(0, 4, 2, 1, 3, 5)")],
        "The first part that disagrees is patches"),
    "each patch read channels last": (
        [(".permute(0, 2, 4, 1, 3, 5)", ".permute(0, 2, 4, 3, 5, 1)")],
        "The first part that disagrees is patches"),
    "positions added before the class token is put in front": (
        [("        if self.cls is not None:\n            x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1)\n"
          "        x = trace[\"tokens\"] = x + self.positions\n",
          "        x = x + self.positions[-x.shape[1]:]\n        if self.cls is not None:\n"
          "            x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1)\n        trace[\"tokens\"] = x\n")],
        "The first part that disagrees is tokens"),
    "a post-norm block": (
        [("        x = x + self.attn(self.norm_a(x))\n        return x + self.down(F.gelu(self.up(self.norm_b(x))))",
          "        x = self.norm_a(x + self.attn(x))\n        return self.norm_b(x + self.down(F.gelu(self.up(x))))")],
        "The first part that disagrees is block0: each block is pre-norm"),
    "scores not divided by sqrt(d_head)": (
        [(" / math.sqrt(d_head), dim=-1)", ", dim=-1)")], "The first part that disagrees is block0"),
    "no final layer norm": (
        [("x = trace[\"final_norm\"] = self.final(x)", "trace[\"final_norm\"] = x")],
        "The first part that disagrees is final_norm"),
    "the class token read with mean pooling": (
        [("pooled = x[:, 0] if self.cls is not None else x.mean(dim=1)", "pooled = x[:, 0]")],
        "The first part that disagrees is logits"),
    "LoRA on the keys instead of the values": (
        [("block.attn.v = MyLoRALinear(block.attn.v, rank, alpha)",
          "block.attn.k = MyLoRALinear(block.attn.k, rank, alpha)"),
         ("adapters += [block.attn.q, block.attn.v]", "adapters += [block.attn.q, block.attn.k]")],
        "Block 0's value adapter wraps the key projection; it should wrap the value projection"),
    "a scale of alpha instead of alpha / r": (
        [("self.scale, self.merged = base, alpha / rank, False", "self.scale, self.merged = base, alpha, False")],
        "Block 0's query adapter scales x A B by alpha"),
    "no scale at all": (
        [("y + self.scale * (x @ self.A) @ self.B", "y + (x @ self.A) @ self.B")],
        "Block 0's query adapter adds x A B without its scale"),
    "a merge that forgets the scale": (
        [("(self.scale * self.A @ self.B).T", "(self.A @ self.B).T")],
        "merge() of block 0's query adapter forgets the scale"),
    "a merge that keeps adding the adapter in forward": (
        [("self.merged = True", "pass")], "adds its change twice"),
    "B drawn at random": (
        [("self.B = nn.Parameter(torch.zeros(rank, d_out))", "self.B = nn.Parameter(torch.randn(rank, d_out))")],
        "starts with B != 0"),
    "the model left trainable": (
        [("    for p in model.parameters():\n        p.requires_grad_(False)\n", "")],
        "parameters require gradients, the package's adapted ViT"),
    "A and B in torch.nn.Linear's layout": (
        [("self.A = nn.Parameter(torch.empty(d_in, rank)", "self.A = nn.Parameter(torch.empty(rank, d_in)")],
        "has A of shape"),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_typical_mistake_fails_naming_its_part(name, tmp_path):
    edits, words = MISTAKES[name]
    verdict = _check(_changed(tmp_path, *edits))
    assert not verdict and verdict.attempted, verdict.message
    assert words in verdict.message, verdict.message


def test_an_answer_without_a_trace_is_told_to_fill_it(tmp_path):
    ns = _changed(tmp_path, ("trace = {} if trace is None else trace", "trace = {}"),
                  ("x = trace[\"final_norm\"] = self.final(x)", "trace[\"final_norm\"] = x"))
    verdict = _check(ns)
    assert "fill the dict passed as `trace`" in verdict.message, verdict.message


# --- delegation is refused ---------------------------------------------------------------------------------------


def test_the_packages_vit_is_refused(tmp_path):
    class PackageViT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.inner = ViT(config)

        def forward(self, images, trace=None):
            return self.inner(images)

    ns = _load(_solution_source(), tmp_path)
    verdict = check_vit_with_lora(PackageViT, ns["load_vit"], ns["add_lora_qv"])
    assert verdict.outcome is Outcome.REFUSED and "attnbook.torch.vit.ViT" in verdict.message, verdict.message


def test_a_package_vit_built_beforehand_is_refused_by_the_module_tree(tmp_path):
    built = {}
    with torch.random.fork_rng(devices=[]):
        for case in CASES:
            built[case.seed] = random_vit(case.config, case.seed)

    class Holder(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.inner = next(m for m in built.values() if m.config == config)

    ns = _load(_solution_source(), tmp_path)
    verdict = check_vit_with_lora(Holder, ns["load_vit"], ns["add_lora_qv"])
    assert verdict.outcome is Outcome.REFUSED and "your model's module `inner`" in verdict.message, verdict.message


def test_the_packages_lora_is_refused(tmp_path):
    ns = _changed(tmp_path, ("block.attn.q = MyLoRALinear(block.attn.q, rank, alpha)",
                             "block.attn.q = at.LoRALinear(block.attn.q, rank, alpha)"))
    ns["at"] = at
    verdict = _check(ns)
    assert verdict.outcome is Outcome.REFUSED and "attnbook.torch.lora.LoRALinear" in verdict.message, verdict.message


def test_peft_is_refused(tmp_path):
    # peft's LoRA layer, as far as the policy can tell: code whose module is peft's
    fake = {"__name__": "peft.tuners.lora.layer", "nn": nn, "torch": torch}
    exec("class Linear(nn.Module):\n"  # noqa: S102
         "    def __init__(self, base, r, lora_alpha):\n"
         "        super().__init__()\n"
         "        self.base = base\n"
         "        self.A = nn.Parameter(torch.randn(base.in_features, r))\n"
         "        self.B = nn.Parameter(torch.zeros(r, base.out_features))\n", fake)
    ns = _load(_solution_source(), tmp_path)
    ns["MyLoRALinear"] = fake["Linear"]
    verdict = _check(ns)
    assert verdict.outcome is Outcome.REFUSED and "peft" in verdict.message, verdict.message


def test_torch_multihead_attention_is_refused(tmp_path):
    ns = _changed(tmp_path, ("        self.attn = MyAttention(d_model, n_heads)\n",
                             "        self.attn = MyAttention(d_model, n_heads)\n"
                             "        self.mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)\n"))
    verdict = _check(ns)
    assert verdict.outcome is Outcome.REFUSED and "MultiheadAttention" in verdict.message, verdict.message


def test_fused_attention_is_refused(tmp_path):
    ns = _changed(tmp_path, ("weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), dim=-1)  "
                             "# (B, h, T, T), no mask\n        return self.out((weights @ v)",
                             "return self.out(F.scaled_dot_product_attention(q, k, v)"))
    verdict = _check(ns)
    assert verdict.outcome is Outcome.REFUSED and "scaled_dot_product_attention" in verdict.message, verdict.message


def test_a_convolution_for_the_patches_is_refused(tmp_path):
    ns = _changed(tmp_path, ("return self.proj(x.reshape(B, (H // p) * (W // p), C * p * p))",
                             "w = self.proj.weight.reshape(-1, C, p, p)\n"
                             "        return F.conv2d(images, w, self.proj.bias, stride=p).flatten(2).transpose(1, 2)"))
    verdict = _check(ns)
    assert verdict.outcome is Outcome.REFUSED and "conv2d" in verdict.message, verdict.message


def test_answers_that_are_not_classes_or_functions_are_told_so():
    verdict = check_vit_with_lora(None, None, None)
    assert verdict.outcome is Outcome.WRONG_FORM
    assert "check_vit_with_lora(MyViT, load_vit, add_lora_qv)" in verdict.message
