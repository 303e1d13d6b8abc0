#!/usr/bin/env bash
# `make image`: the rkcm container image as an OCI image archive, built with no container
# engine. Its content is what the Dockerfile produces on gcr.io/distroless/cc-debian12:nonroot:
#
#   /usr/local/bin/rkcm        the release binary (`make release`'s)
#   glibc and libgcc_s         the shared libraries the binary links against (ldd), with the
#                              dynamic loader, from this machine's Debian 12 packages (the
#                              Dockerfile's builder and runtime are Debian 12 too)
#   CA certificates, tzdata    /etc/ssl/certs/ca-certificates.crt, /usr/share/zoneinfo
#   /etc/passwd, /etc/group    root, nobody and nonroot (65532), /home/nonroot, /tmp
#   config                     USER 65532:65532, ENTRYPOINT /usr/local/bin/rkcm, port 10257,
#                              the Dockerfile's labels, distroless's PATH and SSL_CERT_FILE
#
#   e2e/image.sh [NAME...]     build; print the archive's path. The image is named
#                              docker.io/library/rkcm:<version> and every NAME given.
#
# RKCM_IMAGE_PROFILE=dev puts the dev-profile binary (stripped) in the image instead of the
# release one, everything else the same: `make test` uses it, which builds that binary
# anyway, so its image tests cost no release build (several minutes on two cores).
#
# The archive goes to $CARGO_TARGET_DIR/image/ (under $HOME, never the repository).
# Load it with `ctr -n k8s.io images import <archive>` (containerd), `docker load` or
# `podman load`, or push it with `skopeo copy oci-archive:<archive> docker://<registry>/rkcm:<tag>`.
# tests/rkcm/in_pod.rs checks that the image and the Dockerfile agree.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/rkcm/target}

die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }
log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for f in /etc/ssl/certs/ca-certificates.crt /usr/share/zoneinfo/UTC; do
  [ -e "$f" ] || die "$f is missing: apt-get install -y ca-certificates tzdata"
done
command -v ldd >/dev/null || die "ldd is missing (package libc-bin)"

# The labels name the commit and its date, as the Dockerfile's build arguments do. The binary
# is not stamped with them (src/serve.rs build_info() reads them at compile time): a stamped
# build and `make release` would rebuild the binary each time one follows the other.
commit=$(git rev-parse HEAD 2>/dev/null || true)
if [ -n "$commit" ]; then
  created=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)
else
  created=1970-01-01T00:00:00Z
fi

out=$CARGO_TARGET_DIR/image
mkdir -p "$out"
case "${RKCM_IMAGE_PROFILE:-release}" in
  release)
    log "building rkcm (release)"
    cargo build --release --locked -p rkcm >&2
    bin=$CARGO_TARGET_DIR/release/rkcm ;;
  dev)
    log "building rkcm (dev profile, stripped)"
    cargo build --locked -p rkcm >&2
    command -v strip >/dev/null || die "strip is missing (package binutils)"
    strip -o "$out/rkcm-dev" "$CARGO_TARGET_DIR/debug/rkcm"
    bin=$out/rkcm-dev ;;
  *) die "RKCM_IMAGE_PROFILE must be release or dev" ;;
esac
# `rkcm --version` prints "rkcm v0.1.0 ..."; the image tag is the chart's appVersion form.
version=$("$bin" --version | awk '{print $2}')
version=${version#v}
[ -n "$version" ] || die "$bin --version printed no version"

# Every shared library the binary loads, by the path the loader finds it at.
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
[ -n "$libs" ] || die "ldd found no libraries for $bin"

archive=$out/rkcm-$version.tar
spec=$(mktemp)
trap 'rm -f "$spec"' EXIT
python3 - "$bin" "$version" "$commit" "$created" "$libs" "$@" >"$spec" <<'PY'
import json, os, sys
binary, version, commit, created, libs = sys.argv[1:6]
names = [f"docker.io/library/rkcm:{version}"] + [
    n if "/" in n.split(":")[0] or "." in n.split("/")[0] else f"docker.io/library/{n}" for n in sys.argv[6:]
]
files = [{"path": "/usr/local/bin/rkcm", "src": binary, "mode": 0o755}]
for lib in libs.split():
    files.append({"path": lib, "src": os.path.realpath(lib), "mode": 0o755})
files += [
    {"path": "/etc/ssl/certs/ca-certificates.crt", "src": "/etc/ssl/certs/ca-certificates.crt", "mode": 0o644},
    {"path": "/usr/share/zoneinfo", "tree": "/usr/share/zoneinfo"},
    {"path": "/etc/os-release", "src": "/etc/os-release", "mode": 0o644},
    {"path": "/etc/passwd", "content": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
    {"path": "/etc/group", "content": "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
    {"path": "/tmp", "dir": True, "mode": 0o1777},
    {"path": "/root", "dir": True, "mode": 0o700},
    {"path": "/home/nonroot", "dir": True, "mode": 0o700, "uid": 65532, "gid": 65532},
]
config = {
    "User": "65532:65532",
    "Entrypoint": ["/usr/local/bin/rkcm"],
    "ExposedPorts": {"10257/tcp": {}},
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
    "WorkingDir": "/home/nonroot",
    "Labels": {
        "org.opencontainers.image.title": "rkcm",
        "org.opencontainers.image.description": "Kubernetes controller-manager for the workload controllers, written in Rust",
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.revision": commit,
        "org.opencontainers.image.created": created,
    },
}
print(json.dumps({"names": names, "config": config, "files": files, "created": created}))
PY
python3 "$here/oci-image.py" "$spec" "$archive" >/dev/null || die "writing $archive failed"
log "image $(du -h "$archive" | cut -f1) (uncompressed layer: $(du -sh "$bin" | cut -f1) binary); names: docker.io/library/rkcm:$version $*"
echo "$archive"
