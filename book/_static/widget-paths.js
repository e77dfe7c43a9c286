// Loaded between RequireJS and the widget manager: the manager loads its icon fonts from beside its own module
// (@jupyter-widgets/html-manager/dist/), which RequireJS would look for beside the page. Point that module at
// the site's own copy, _static/vendor/html-manager/ (fetched by tools/vendor_js.py), so the fonts load offline.
(function () {
  "use strict";
  var here = document.currentScript.src;
  require.config({paths: {"@jupyter-widgets/html-manager/dist": here.slice(0, here.lastIndexOf("/") + 1) +
                                                                   "vendor/html-manager"}});
})();
