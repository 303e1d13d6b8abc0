#!/usr/bin/env python3
"""Builds a container image as an OCI image archive (an OCI layout in one tar), with no
container engine and no registry. `ctr images import` loads the archive into containerd.

    oci-image.py SPEC.json OUT.tar

The spec is JSON:

    {
      "names": ["docker.io/library/busybox:latest", ...],   # every name the image gets
      "config": {"Entrypoint": [...], "Cmd": [...], "User": "65532:65532", "Env": [...],
                 "WorkingDir": "/", "ExposedPorts": {"80/tcp": {}}, "Labels": {...}},
      "files": [                                              # the one layer, in any order
        {"path": "/bin/busybox", "src": "/usr/bin/busybox", "mode": 493},
        {"path": "/bin/sh", "symlink": "busybox"},
        {"path": "/tmp", "dir": true, "mode": 1023},
        {"path": "/home/nonroot", "dir": true, "mode": 448, "uid": 65532, "gid": 65532},
        {"path": "/etc/passwd", "content": "root:x:0:0:root:/root:/bin/sh\\n"},
        {"path": "/usr/share/zoneinfo", "tree": "/usr/share/zoneinfo"}
      ],
      "created": "1970-01-01T00:00:00Z"
    }

The archive is reproducible: entries sorted, owned by root unless an entry gives "uid" and
"gid", every time stamp 0, gzip without a name or time. A "src" file keeps its bytes; its mode is the spec's, else the
source's. A "tree" copies a directory with its files, directories and symbolic links.
Parent directories are added as needed (mode 0755).
"""

import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def fail(msg):
    sys.exit(f"oci-image: {msg}")


class Layer:
    """The entries of one layer, keyed by path (no leading slash)."""

    def __init__(self):
        self.entries = {}

    def _parents(self, path):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/".join(parts[:i])
            if parent not in self.entries:
                self.entries[parent] = ("dir", 0o755, None, (0, 0))

    def add(self, path, kind, mode, data, owner=(0, 0)):
        path = path.strip("/")
        if not path:
            fail("an entry needs a path below /")
        self._parents(path)
        self.entries[path] = (kind, mode, data, owner)

    def add_tree(self, dest, src):
        if not os.path.isdir(src):
            fail(f"tree source {src} is not a directory")
        self.add(dest, "dir", 0o755, None)
        for root, dirs, files in os.walk(src):
            dirs.sort()
            rel = os.path.relpath(root, src)
            base = dest.strip("/") if rel == "." else f"{dest.strip('/')}/{rel}"
            for name in dirs + sorted(files):
                full = os.path.join(root, name)
                st = os.lstat(full)
                path = f"{base}/{name}"
                if stat.S_ISLNK(st.st_mode):
                    self.add(path, "symlink", 0o777, os.readlink(full))
                elif stat.S_ISDIR(st.st_mode):
                    self.add(path, "dir", stat.S_IMODE(st.st_mode), None)
                elif stat.S_ISREG(st.st_mode):
                    with open(full, "rb") as f:
                        self.add(path, "file", stat.S_IMODE(st.st_mode), f.read())

    def tar_gz(self):
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries):
                kind, mode, data, (uid, gid) = self.entries[path]
                info = tarfile.TarInfo(path)
                info.mode = mode
                info.uid, info.gid = uid, gid
                info.uname = info.gname = "root" if (uid, gid) == (0, 0) else ""
                info.mtime = 0
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = data
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
        out = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
            gz.write(raw.getvalue())
        return out.getvalue(), diff_id


def layer_from(spec):
    layer = Layer()
    for entry in spec.get("files", []):
        path = entry.get("path") or fail(f"entry without a path: {entry}")
        if "src" in entry:
            try:
                with open(entry["src"], "rb") as f:
                    data = f.read()
                mode = entry.get("mode", stat.S_IMODE(os.stat(entry["src"]).st_mode))
            except OSError as e:
                fail(f"{path}: reading {entry['src']}: {e}")
            layer.add(path, "file", mode, data)
        elif "content" in entry:
            layer.add(path, "file", entry.get("mode", 0o644), entry["content"].encode())
        elif "symlink" in entry:
            layer.add(path, "symlink", 0o777, entry["symlink"])
        elif entry.get("dir"):
            owner = (entry.get("uid", 0), entry.get("gid", 0))
            layer.add(path, "dir", entry.get("mode", 0o755), None, owner)
        elif "tree" in entry:
            layer.add_tree(path, entry["tree"])
        else:
            fail(f"{path}: an entry needs src, content, symlink, dir or tree")
    return layer


def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    return f"sha256:{digest}", data


def build(spec):
    names = spec.get("names") or fail("the spec names no image")
    layer, diff_id = layer_from(spec).tar_gz()
    created = spec.get("created", "1970-01-01T00:00:00Z")
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": spec.get("config", {}),
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "e2e/oci-image.py"}],
    }
    config_digest, config_bytes = blob(json.dumps(config, sort_keys=True).encode())
    layer_digest, layer_bytes = blob(layer)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer_bytes)}],
    }
    manifest_digest, manifest_bytes = blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    # containerd names an imported image after this annotation
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                },
            }
            for name in names
        ],
    }
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
    }
    for digest, data in (
        (config_digest, config_bytes),
        (layer_digest, layer_bytes),
        (manifest_digest, manifest_bytes),
    ):
        files["blobs/sha256/" + digest.split(":", 1)[1]] = data
    return files, manifest_digest


def write_archive(files, out):
    tmp = out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirname in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(dirname)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(files[path]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[path]))
    os.replace(tmp, out)


def main():
    if len(sys.argv) != 3:
        fail("usage: oci-image.py SPEC.json OUT.tar")
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    files, digest = build(spec)
    write_archive(files, sys.argv[2])
    print(digest)


if __name__ == "__main__":
    main()
