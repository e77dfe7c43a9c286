"""Fetch the JavaScript the site needs to show widgets without a CDN, from the npm registry.

The widget manager (``@jupyter-widgets/html-manager``) and RequireJS are downloaded once as npm
tarballs, checked against the registry's sha512 integrity, cached in ``.cache/npm``, and the files
the site loads are copied into ``book/_static/vendor/`` (which git ignores). The tools that check the site
(axe-core, the accessibility engine the site check runs in the browser) come the same way but stay in the
cache: the site does not serve them. Python's standard library does all of it, so neither building nor
checking the book needs Node.js. Usage: ``python -m tools.vendor_js``.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import io
import json
import sys
import tarfile
import urllib.request

from tools.notebooks import ROOT

REGISTRY = "https://registry.npmjs.org"
CACHE = ROOT / ".cache" / "npm"
VENDOR = ROOT / "book" / "_static" / "vendor"

# package, version, file inside the tarball (or a pattern), name under _static/vendor (or a folder for a pattern)
FILES = [
    ("requirejs", "2.3.7", "package/require.js", "require.js"),
    ("@jupyter-widgets/html-manager", "1.0.6", "package/dist/embed-amd.js", "embed-amd.js"),
    # The widgets' icon fonts, which the widget manager loads from beside its own module: widget-paths.js
    # points that module at this folder, so that the fonts come from the site too.
    ("@jupyter-widgets/html-manager", "1.0.6", "package/dist/*.woff2", "html-manager/"),
    ("@jupyter-widgets/html-manager", "1.0.6", "package/dist/*.woff", "html-manager/"),
    ("@jupyter-widgets/html-manager", "1.0.6", "package/dist/*.ttf", "html-manager/"),
]
# package, version, file inside the tarball: scripts the site check injects into pages, never served by the site
TOOLS = {
    "axe-core": ("axe-core", "4.14.1", "package/axe.min.js"),
}


def _tarball(name: str, version: str) -> bytes:
    cached = CACHE / f"{name.replace('/', '__')}-{version}.tgz"
    meta_url = f"{REGISTRY}/{name.replace('/', '%2F')}/{version}"
    if cached.exists():
        return cached.read_bytes()
    try:
        meta = json.load(urllib.request.urlopen(meta_url, timeout=60))
        data = urllib.request.urlopen(meta["dist"]["tarball"], timeout=120).read()
    except OSError as exc:
        sys.exit(f"could not download {name}@{version} from the npm registry ({exc}); the site needs it to show "
                 f"widgets offline. Connect to the network once, or put the tarball at {cached}")
    algo, _, digest = meta["dist"]["integrity"].partition("-")
    if algo != "sha512" or base64.b64encode(hashlib.sha512(data).digest()).decode() != digest:
        sys.exit(f"{name}@{version}: the downloaded tarball does not match the registry's integrity hash")
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(data)
    return data


def tool_script(key: str) -> str:
    """The text of a checking tool's script (``TOOLS``), downloaded into the cache on first use."""
    name, version, member = TOOLS[key]
    with tarfile.open(fileobj=io.BytesIO(_tarball(name, version)), mode="r:gz") as tar:
        return tar.extractfile(member).read().decode()


def main() -> None:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, version, member, target in FILES:
        if (VENDOR / target).exists() and not target.endswith("/"):
            continue
        with tarfile.open(fileobj=io.BytesIO(_tarball(name, version)), mode="r:gz") as tar:
            for info in tar.getmembers():
                if not fnmatch.fnmatch(info.name, member):
                    continue
                out = VENDOR / target / info.name.rsplit("/", 1)[-1] if target.endswith("/") else VENDOR / target
                if out.exists():
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(tar.extractfile(info).read())
                print(f"vendor_js: {name}@{version} -> {out.relative_to(ROOT)}")
    for name, version, _ in TOOLS.values():
        _tarball(name, version)  # into the cache now, so that the site check runs offline


if __name__ == "__main__":
    main()
