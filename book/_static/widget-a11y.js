// Names for the saved widgets, as a screen reader needs them. The widget manager draws the widgets after the
// page loads, and gives neither the figure inside a widget an alt text nor a slider's handle (role="slider")
// a name. This watches the page as the widgets appear and
//  - gives every image inside a widget the alt text of its cell (data-alt on the widget's view tag, written
//    by tools/sphinx_a11y.py from the cell's mystnb.image.alt metadata);
//  - names every control inside a widget that has no name of its own by the widget's description (its
//    visible label), through aria-labelledby, so that a slider is announced as "length of v, 1.5".
(function () {
  "use strict";
  var counter = 0;

  function hasName(el) {
    if (el.getAttribute("aria-label") || el.getAttribute("aria-labelledby")) return true;
    if (el.id && document.querySelector('label[for="' + CSS.escape(el.id) + '"]')) return true;
    return el.closest("label") !== null;
  }

  function describe(root) {
    root.querySelectorAll(".widget-subarea img:not([alt])").forEach(function (img) {
      var area = img.closest(".widget-subarea");
      var tag = area && area.nextElementSibling;
      var alt = tag && tag.matches("script[data-alt]") ? tag.getAttribute("data-alt") : "";
      img.setAttribute("alt", alt || "figure drawn by the widget above");
    });
    root.querySelectorAll('.jupyter-widgets [role="slider"], .jupyter-widgets input, .jupyter-widgets select, ' +
                          '.jupyter-widgets textarea').forEach(function (control) {
      if (hasName(control)) return;
      var widget = control.closest(".widget-inline-hbox, .widget-inline-vbox, .jupyter-widgets");
      var label = widget && widget.querySelector(".widget-label");
      if (!label || !label.textContent.trim()) return;
      if (!label.id) label.id = "widget-label-" + (++counter);
      control.setAttribute("aria-labelledby", label.id);
    });
  }

  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; describe(document); });
  }

  function start() {
    describe(document);
    new MutationObserver(schedule).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
