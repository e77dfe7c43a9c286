"""A Sphinx extension for the API reference (``book/api/``): each name documented once, and found by both names.

A package page documents what the package exports (its ``__all__``); the modules below it are documented on
the same page for the rest of their names. A name a package exports is skipped in its own module, so that it
is documented once, under the name the chapters use (``attnbook.torch.EncoderBlock``).

autodoc gives a class documented under its package's name its module's name too (``:canonical:``), so a
reference to ``attnbook.torch.blocks.EncoderBlock`` finds the same entry. This does the same for functions,
for which autodoc does not, so that ``from attnbook.torch.decoding import generate`` in a chapter links to
``attnbook.torch.generate``.

A highlighted source page (``sphinx.ext.viewcode``) links each documented name back to its entry, at one anchor
per module: the name of the module that first documented something from it, followed by the name.
``attnbook.torch.transformer``'s page thus points at ``attnbook.torch.EncoderShape`` for a class documented as
``attnbook.torch.transformer.EncoderShape``. Each such entry gets that anchor too, so that every link back lands
on its entry.

An exercise's checker (``attnbook.exercises.check_softmax_rows``) is an object that is called like a function
and carries its own docstring, the exercise's contract; autodoc documents no such object of a module, so this
documents it as a function.
"""

from __future__ import annotations

import importlib
import inspect
import sys

from docutils import nodes
from sphinx import addnodes
from sphinx.ext.autodoc import FunctionDocumenter, ModuleDocumenter
from sphinx.ext.viewcode import _get_full_modname


class CanonicalFunctionDocumenter(FunctionDocumenter):
    """autodoc's function entry, with the name of the module that defines the function as its canonical name."""

    def add_directive_header(self, sig: str) -> None:
        super().add_directive_header(sig)
        module = getattr(self.object, "__module__", None)
        qualname = getattr(self.object, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
            canonical = f"{module}.{qualname}"
            if canonical != self.fullname:
                self.add_line(f"   :canonical: {canonical}", self.get_sourcename())


class CallableObjectDocumenter(FunctionDocumenter):
    """A module's callable object with a docstring of its own (not its class's), documented as a function."""

    objtype = "callableobject"
    directivetype = "function"
    priority = FunctionDocumenter.priority + 1

    @classmethod
    def can_document_member(cls, member, membername, isattr, parent) -> bool:
        return (isinstance(parent, ModuleDocumenter) and callable(member) and not inspect.isclass(member)
                and not inspect.isroutine(member) and isinstance(vars(member).get("__doc__", None), str)
                if hasattr(member, "__dict__") else False)


def exported_above(module: str, name: str, obj: object) -> bool:
    """Whether a package above ``module`` exports ``obj`` under ``name`` (in its ``__all__``)."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:i])) or importlib.import_module(".".join(parts[:i]))
        if name in getattr(package, "__all__", ()) and getattr(package, name, None) is obj:
            return True
    return False


def _skip_exported(app, what, name, obj, skip, options):
    module = app.env.temp_data.get("autodoc:module")
    if what == "module" and module and not skip and exported_above(module, name, obj):
        return True
    return None


def _viewcode_anchors(app, doctree: nodes.document, docname: str) -> None:
    """Give each entry of ``docname`` the anchor that its source page's link back uses, where it lacks it."""
    modules = getattr(app.env, "_viewcode_modules", {})
    for signode in doctree.findall(addnodes.desc_signature):
        module, fullname = signode.get("module"), signode.get("fullname")
        if not module or not fullname:
            continue
        entry = modules.get(_get_full_modname(module, fullname) or module)
        if not entry or entry[2].get(fullname) != docname:
            continue
        anchor = f"{entry[3]}.{fullname}"
        if anchor not in signode["ids"] and anchor not in doctree.ids:
            signode["ids"].append(anchor)
            doctree.ids[anchor] = signode


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.add_autodocumenter(CanonicalFunctionDocumenter, override=True)
    app.add_autodocumenter(CallableObjectDocumenter)
    app.connect("autodoc-skip-member", _skip_exported)
    app.connect("doctree-resolved", _viewcode_anchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
