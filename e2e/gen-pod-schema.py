#!/usr/bin/env python3
"""Writes controllers/runtime/src/api/protobuf/pod_schema.rs: the protobuf field numbers of every
message a Pod's metadata and spec can hold, for rkcm's protobuf encoder of pod creates.

The numbers come from the pinned upstream modules (k8s.io/api and k8s.io/apimachinery at the
version of e2e/versions.env) in the Go module cache: their generated.proto files give the
messages and fields, their types.go files say which fields JSON inlines into the parent (an
embedded Go struct with an empty JSON name, such as Volume's VolumeSource).

    go mod download k8s.io/api@v0.37.1 k8s.io/apimachinery@v0.37.1   # if not cached yet
    python3 e2e/gen-pod-schema.py
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "controllers/runtime/src/api/protobuf/pod_schema.rs")


def version():
    with open(os.path.join(ROOT, "e2e/versions.env")) as f:
        for line in f:
            if line.startswith("K8S_PIN="):
                return "v0." + line.split("=", 1)[1].strip().split(".", 1)[1]
    sys.exit("K8S_PIN not found in e2e/versions.env")


def modcache():
    return subprocess.check_output(["go", "env", "GOMODCACHE"], text=True).strip()


# (package of the proto file, module, directory inside the module)
SOURCES = [
    ("k8s.io.api.core.v1", "k8s.io/api", "core/v1"),
    ("k8s.io.apimachinery.pkg.apis.meta.v1", "k8s.io/apimachinery", "pkg/apis/meta/v1"),
    ("k8s.io.apimachinery.pkg.api.resource", "k8s.io/apimachinery", "pkg/api/resource"),
    ("k8s.io.apimachinery.pkg.util.intstr", "k8s.io/apimachinery", "pkg/util/intstr"),
    ("k8s.io.apimachinery.pkg.runtime", "k8s.io/apimachinery", "pkg/runtime"),
]

# Messages whose JSON is not an object of their proto fields: encoded by hand in encode.rs.
SPECIAL = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
}
# Messages a created pod never carries; a JSON value of one makes the encoder give up (the
# create is then sent as JSON).
UNSUPPORTED = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.api.core.v1.PodStatus",
}
SCALARS = {"string": "Str", "bool": "Bool", "int32": "Int", "int64": "Int"}

FIELD = re.compile(r"^\s+(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAP = re.compile(r"^\s+map<string,\s*([\w.]+)>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse_proto(path, package):
    messages = {}
    current = None
    with open(path) as f:
        for line in f:
            m = re.match(r"^message (\w+) \{", line)
            if m:
                current = package + "." + m.group(1)
                messages[current] = []
                continue
            if line.startswith("}"):
                current = None
                continue
            if current is None:
                continue
            m = FIELD.match(line)
            if m:
                label, typ, name, num = m.groups()
                messages[current].append((name, int(num), qualify(typ, package), label == "repeated", False))
                continue
            m = MAP.match(line)
            if m:
                typ, name, num = m.groups()
                messages[current].append((name, int(num), qualify(typ, package), False, True))
    return messages


def qualify(typ, package):
    if typ in SCALARS or typ in ("bytes", "double", "float"):
        return typ
    if typ.startswith("."):
        return typ[1:]
    return package + "." + typ


def parse_inline(path, package):
    """(message, proto field number) pairs that JSON inlines into the parent object."""
    inline = set()
    current = None
    with open(path) as f:
        for line in f:
            m = re.match(r"^type (\w+) struct \{", line)
            if m:
                current = package + "." + m.group(1)
                continue
            if line.startswith("}"):
                current = None
                continue
            m = re.search(r'json:"([^"]*)".*protobuf:"\w+,(\d+),', line)
            if current and m and m.group(1).split(",")[0] == "":
                inline.add((current, int(m.group(2))))
    return inline


def main():
    base = modcache()
    ver = version()
    messages, inline = {}, set()
    for package, module, sub in SOURCES:
        d = os.path.join(base, f"{module}@{ver}", sub)
        messages.update(parse_proto(os.path.join(d, "generated.proto"), package))
        types = os.path.join(d, "types.go")
        if os.path.exists(types):
            inline |= parse_inline(types, package)

    # Messages reachable from Pod's metadata and spec, in a stable order.
    order, index = [], {}
    pending = ["k8s.io.api.core.v1.Pod"]
    while pending:
        name = pending.pop(0)
        if name in index or name in SPECIAL or name in UNSUPPORTED:
            continue
        if name not in messages:
            sys.exit(f"message {name} not found")
        index[name] = len(order)
        order.append(name)
        for _, _, typ, _, _ in messages[name]:
            if typ not in SCALARS and typ not in ("bytes", "double", "float"):
                pending.append(typ)

    def kind(typ):
        if typ in SCALARS:
            return f"Kind::{SCALARS[typ]}"
        if typ in ("bytes", "double", "float") or typ in UNSUPPORTED:
            return "Kind::Unsupported"
        if typ in SPECIAL:
            return f"Kind::{SPECIAL[typ]}"
        return f"Kind::Message({index[typ]})"

    out = []
    out.append("//! Protobuf field numbers of the messages a Pod's metadata and spec hold, from the")
    out.append(f"//! generated.proto files of k8s.io/api and k8s.io/apimachinery {ver}.")
    out.append("//! Written by `e2e/gen-pod-schema.py`; do not edit by hand.")
    out.append("")
    out.append("use super::schema::{Field, Kind, Message};")
    out.append("")
    out.append("/// Index of `Pod` in [`MESSAGES`].")
    out.append("pub const POD: usize = 0;")
    out.append("")
    out.append("pub static MESSAGES: &[Message] = &[")
    for name in order:
        short = name.rsplit(".", 1)[1]
        out.append(f"    Message {{ name: \"{short}\", fields: &[")
        for fname, num, typ, repeated, is_map in sorted(messages[name], key=lambda f: f[0]):
            k = kind(typ)
            if is_map:
                k = f"Kind::Map(&{k})"
            out.append(
                f"        Field {{ json: \"{fname}\", number: {num}, kind: {k}, repeated: {str(repeated).lower()}, "
                f"inline: {str((name, num) in inline).lower()} }},"
            )
        out.append("    ] },")
    out.append("];")
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"{OUT}: {len(order)} messages, {sum(len(messages[n]) for n in order)} fields")


if __name__ == "__main__":
    main()
