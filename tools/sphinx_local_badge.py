"""A Sphinx extension: serve the "Open in Colab" badge image from the site itself.

The notebooks link the badge image on Colab's server, which is right in Colab and on GitHub; the
built site replaces that address with its own copy in ``_static``, so that it needs no network.
"""

from __future__ import annotations

from tools.badges import BADGE_IMAGE


def _local_badge(app, pagename, templatename, context, doctree) -> None:
    if "body" in context and BADGE_IMAGE in context["body"]:
        context["body"] = context["body"].replace(BADGE_IMAGE, context["pathto"]("_static/colab-badge.svg", 1))


def setup(app):
    app.connect("html-page-context", _local_badge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
