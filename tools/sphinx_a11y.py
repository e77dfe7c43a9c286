"""A Sphinx extension: what a screen reader needs from the pages, where the HTML the tools write falls short.

The figure a saved widget draws gets the alt text of the cell that shows the widget. MyST-NB applies a
cell's ``mystnb.image.alt`` metadata to the cell's own image outputs, but a widget's figure lives in the
notebook's saved widget state and is drawn in the browser by the widget manager, with no alt.
This writes the cell's alt text onto the widget's view tag (``data-alt``), where ``book/_static/widget-a11y.js``
reads it and puts it on the images the widget shows (and names the widget's controls by their descriptions).

The bibliography's entries are list items. docutils 0.21 writes the citation list as ``role="list"`` holding
entries of ``role="doc-biblioentry"``, a role ARIA 1.2 deprecates and that is no list item, so a screen reader
meets a list without items (axe-core: aria-required-children, critical).
"""

from __future__ import annotations

import html

from docutils import nodes

VIEW_TAG = '<script type="application/vnd.jupyter.widget-view+json">'


def _alt(cell: nodes.Element) -> str | None:
    return ((cell.get("cell_metadata") or {}).get("mystnb") or {}).get("image", {}).get("alt")


def _label_widget_views(app, doctree, docname) -> None:
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code" or not _alt(cell):
            continue
        for raw in cell.findall(nodes.raw):
            if VIEW_TAG in raw.astext():
                tagged = VIEW_TAG.replace(">", f' data-alt="{html.escape(_alt(cell), quote=True)}">')
                raw[:] = [nodes.Text(raw.astext().replace(VIEW_TAG, tagged))]


def _bibliography_items(app, pagename, templatename, context, doctree) -> None:
    if "body" in context and 'role="doc-biblioentry"' in context["body"]:
        context["body"] = context["body"].replace('role="doc-biblioentry"', 'role="listitem"')


def setup(app):
    app.connect("doctree-resolved", _label_widget_views)
    app.connect("html-page-context", _bibliography_items)
    app.add_js_file("widget-a11y.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
