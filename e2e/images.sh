#!/usr/bin/env bash
# The local images of the real nodes, built from distribution files with no registry and
# no container engine (e2e/oci-image.py writes OCI image archives):
#
#   busybox   the busybox applets (sh, sleep, nc, httpd, ...), as docker.io/library/busybox
#   httpd     busybox httpd serving /usr/local/apache2/htdocs on port 80 (the path and port of
#             the httpd image upstream's tests use), as docker.io/library/httpd
#   pause     the pod sandbox (e2e/images/pause.c, static), as registry.k8s.io/pause
#
# Each image carries several names (tags), listed below; pods use them with
# imagePullPolicy IfNotPresent (or Never): nothing can be pulled here.
#
#   e2e/images.sh              build what is missing, print the directory of the archives
#   e2e/images.sh names IMAGE  print the names of one image
#
# The archives are cached under $HOME (RKCM_E2E_CACHE), keyed by everything they are built
# from, so a change to a script or a new busybox package builds them again.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RKCM_E2E_CACHE:-$HOME/.cache/rkcm-e2e}

BUSYBOX_NAMES="docker.io/library/busybox:latest docker.io/library/busybox:1.36 registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
HTTPD_NAMES="docker.io/library/httpd:latest docker.io/library/httpd:2.4 registry.k8s.io/e2e-test-images/httpd:2.4.38-4 registry.k8s.io/e2e-test-images/httpd:2.4.39-4"
# 3.10.2 is the sandbox image the real nodes' containerd is configured with (kubeadm's
# pause for v1.37); 3.10 is the image the test suites put in pod templates.
PAUSE_NAMES="registry.k8s.io/pause:3.10.2 registry.k8s.io/pause:3.10.1 registry.k8s.io/pause:3.10"

die() { printf 'images: error: %s\n' "$*" >&2; exit 1; }
log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "${1:-}" = names ]; then
  case "${2:-}" in
    busybox) echo "$BUSYBOX_NAMES" ;; httpd) echo "$HTTPD_NAMES" ;; pause) echo "$PAUSE_NAMES" ;;
    *) die "usage: $0 names busybox|httpd|pause" ;;
  esac
  exit 0
fi

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || die "busybox is missing: apt-get install -y busybox-static"
# A dynamically linked busybox would need its libraries in every image.
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  die "$BUSYBOX is dynamically linked: apt-get install -y busybox-static"
fi
command -v gcc >/dev/null || die "gcc is missing (it builds the pause binary): apt-get install -y gcc libc6-dev"

key=$(cat "$here/images.sh" "$here/oci-image.py" "$here/images/pause.c" "$BUSYBOX" | sha256sum | cut -c1-16)
OUT=$CACHE/images/$key
if [ -s "$OUT/busybox.tar" ] && [ -s "$OUT/httpd.tar" ] && [ -s "$OUT/pause.tar" ]; then
  echo "$OUT"
  exit 0
fi

log "building busybox, httpd and pause images into $OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -static -Os -s -o "$work/pause" "$here/images/pause.c" ||
  die "compiling the pause binary failed (static linking needs libc6-dev: apt-get install -y libc6-dev)"

# spec NAMES CONFIG-JSON WITH-BUSYBOX EXTRA-FILES-JSON > spec.json
spec() {
  python3 - "$@" <<'PY'
import json, subprocess, sys
names, config, with_busybox, extra = sys.argv[1].split(), json.loads(sys.argv[2]), sys.argv[3] == "1", json.loads(sys.argv[4])
files = []
if with_busybox:
    busybox = sys.argv[5]
    files.append({"path": "/bin/busybox", "src": busybox, "mode": 0o755})
    applets = subprocess.run([busybox, "--list-full"], check=True, capture_output=True, text=True).stdout.split()
    for applet in applets:
        if applet != "bin/busybox":
            depth = applet.count("/")
            files.append({"path": "/" + applet, "symlink": "../" * depth + "bin/busybox"})
    files += [
        {"path": "/tmp", "dir": True, "mode": 0o1777},
        {"path": "/root", "dir": True, "mode": 0o700},
        {"path": "/etc/passwd", "content": "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\nwww-data:x:33:33:www-data:/var/www:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
        {"path": "/etc/group", "content": "root:x:0:\ndaemon:x:1:\nwww-data:x:33:\nnogroup:x:65534:\n"},
    ]
print(json.dumps({"names": names, "config": config, "files": files + extra}))
PY
}

spec "$BUSYBOX_NAMES" '{"Cmd": ["sh"], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}' 1 '[]' "$BUSYBOX" >"$work/busybox.json"
# sh as PID 1 traps TERM so the container stops at once when its pod is deleted (httpd
# itself would be PID 1 without a TERM handler, and the kernel ignores the signal then).
spec "$HTTPD_NAMES" '{"Cmd": ["sh", "-c", "trap \"exit 0\" TERM INT; httpd -f -p 80 -h /usr/local/apache2/htdocs & wait"], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "ExposedPorts": {"80/tcp": {}}, "WorkingDir": "/usr/local/apache2"}' 1 \
  '[{"path": "/usr/local/apache2/htdocs/index.html", "content": "<html><body><h1>It works!</h1></body></html>\n"}]' "$BUSYBOX" >"$work/httpd.json"
spec "$PAUSE_NAMES" '{"Entrypoint": ["/pause"], "User": "65535:65535"}' 0 "[{\"path\": \"/pause\", \"src\": \"$work/pause\", \"mode\": 493}]" >"$work/pause.json"

mkdir -p "$OUT.tmp"
for image in busybox httpd pause; do
  python3 "$here/oci-image.py" "$work/$image.json" "$OUT.tmp/$image.tar" >/dev/null || die "building the $image image failed"
done
rm -rf "$OUT"; mv "$OUT.tmp" "$OUT"
log "images ready: $(cd "$OUT" && du -h ./*.tar | awk '{printf "%s %s  ", $2, $1}')"
echo "$OUT"
