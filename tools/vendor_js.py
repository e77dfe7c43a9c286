"""Fetch the JavaScript the site needs to show widgets without a CDN, from the npm registry.

The widget manager (``@jupyter-widgets/html-manager``) and RequireJS are downloaded once as npm
tarballs, checked against the registry's sha512 integrity, cached in ``.cache/npm``, and the files
the site loads are copied into ``book/_static/vendor/`` (which git ignores). Python's standard library
does all of it, so building the book needs no Node.js. Usage: ``python -m tools.vendor_js``.
"""

from __future__ import annotations

import base64
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

# package, version, file inside the tarball, name under _static/vendor
FILES = [
    ("requirejs", "2.3.7", "package/require.js", "require.js"),
    ("@jupyter-widgets/html-manager", "1.0.6", "package/dist/embed-amd.js", "embed-amd.js"),
]


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


def main() -> None:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, version, member, target in FILES:
        out = VENDOR / target
        if out.exists():
            continue
        with tarfile.open(fileobj=io.BytesIO(_tarball(name, version)), mode="r:gz") as tar:
            out.write_bytes(tar.extractfile(member).read())
        print(f"vendor_js: {name}@{version} -> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
