#!/usr/bin/env bash
# Real nodes for the local control plane: kubelets with their own containerd, running real
# containers from local images (e2e/images.sh), beside kwok's simulated nodes. Started and
# stopped by e2e/cluster.sh (REAL_NODES=N); run alone only on a plane that is up.
#
#   e2e/real-nodes.sh up N     start real-node-0 .. real-node-<N-1> (root only)
#   e2e/real-nodes.sh down     stop them and undo every change to the machine
#   e2e/real-nodes.sh status   say what runs
#   e2e/real-nodes.sh pid NODE the kubelet's pid (tests stop a node with SIGSTOP)
#
# Each node i has, under $RUN/real/node-i:
#   - a containerd of its own (root, state, socket, runc root): the kubelet owns every pod
#     its runtime shows, so nodes never share a runtime;
#   - a Linux bridge rkcm-rn<i> with 10.250.<i>.1/24, the node's address and its pods'
#     gateway; pods get addresses from 10.250.<i>.0/24 (CNI bridge + host-local), reach the
#     pods of the other real nodes through this host, and reach the API server at the
#     `kubernetes` Service address (10.0.0.1:443, DNAT to the plane's loopback port);
#   - a kubelet (cgroupfs driver, cgroup root /rkcm-real-node-<i> in every hierarchy),
#     client and serving certificates from the plane's CA, webhook authorization, image
#     garbage collection off (the local images can never be pulled again);
#   - labels type=real and rkcm.test/real-node=true, and the taint
#     rkcm.test/real-node=true:NoSchedule: pods land on a real node only when they tolerate
#     it (the simulated nodes are type=kwok), so suites written for kwok never get a kubelet.
#
# Side effects outside the plane's directory, undone by `down`: the bridges, one iptables
# NAT rule, the sysctls the kubelet and the bridge plugin set (vm.overcommit_memory,
# kernel.panic, kernel.panic_on_oops, net.ipv4.ip_forward: saved at `up`, restored), cgroup
# directories, and the directories the kubelet and CNI create at fixed paths
# (/var/lib/kubelet, /var/log/containers, /var/lib/cni, /run/containerd: removed if they
# did not exist before).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=${RKCM_CLUSTER_DIR:-${TMPDIR:-/tmp}/rkcm-cluster-$(id -u)}
R=$RUN/real
SUBNET_PREFIX=10.250
SERVICE_IP=10.0.0.1
TAINT_KEY=rkcm.test/real-node
NAT_COMMENT=rkcm-real-nodes
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward"
# Paths the kubelet, containerd's shims and CNI use whatever their configuration says.
OUTSIDE="/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /opt/cni"
PACKAGES="containerd runc containernetworking-plugins busybox-static iptables gcc libc6-dev"

log() { printf '[real-nodes %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'real-nodes: error: %s\n' "$*" >&2; exit 1; }

node_name() { echo "real-node-$1"; }
bridge() { echo "rkcm-rn$1"; }
node_ip() { echo "$SUBNET_PREFIX.$1.1"; }
alive_pid() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---------- prerequisites ----------

missing_packages() {
  local miss=()
  command -v containerd >/dev/null || miss+=(containerd)
  command -v ctr >/dev/null || miss+=(containerd)
  command -v runc >/dev/null || miss+=(runc)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    miss+=(containernetworking-plugins)
  command -v busybox >/dev/null && ! ldd "$(command -v busybox)" >/dev/null 2>&1 || miss+=(busybox-static)
  command -v iptables >/dev/null || miss+=(iptables)
  command -v gcc >/dev/null || miss+=(gcc)
  [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -e /usr/lib/libc.a ] || miss+=(libc6-dev)
  printf '%s\n' "${miss[@]}" | sort -u | tr '\n' ' '
}

ensure_packages() {
  local miss
  miss=$(missing_packages)
  [ -z "${miss// /}" ] && return 0
  command -v apt-get >/dev/null ||
    die "missing packages: $miss; install them with your package manager (Debian names: $PACKAGES)"
  log "installing $miss (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends $miss >"$RUN/logs/apt-get.log" 2>&1; then
    apt-get update >>"$RUN/logs/apt-get.log" 2>&1 || true
    apt-get install -y --no-install-recommends $miss >>"$RUN/logs/apt-get.log" 2>&1 ||
      die "installing $miss failed (log: $RUN/logs/apt-get.log); run: apt-get update && apt-get install -y --no-install-recommends $miss"
  fi
  # The package may start a containerd of its own (on systems with an init that does so):
  # it is left alone, the nodes never use its socket.
  miss=$(missing_packages)
  [ -z "${miss// /}" ] || die "still missing after apt-get: $miss"
}

cgroup_hierarchies() { # every mounted cgroup hierarchy (v1 controllers, name=systemd, v2)
  awk '$9 == "cgroup" || $9 == "cgroup2" {print $5}' /proc/self/mountinfo | sort -u
}

make_cgroups() { # make_cgroups NAME: /NAME in every hierarchy (the kubelet checks each)
  local h
  for h in $(cgroup_hierarchies); do
    mkdir -p "$h/$1" || die "cannot create cgroup $h/$1"
    if [ -f "$h/cpuset.cpus" ] && [ -f "$h/$1/cpuset.cpus" ]; then
      [ -s "$h/$1/cpuset.cpus" ] && [ -n "$(cat "$h/$1/cpuset.cpus")" ] || cat "$h/cpuset.cpus" >"$h/$1/cpuset.cpus"
      [ -n "$(cat "$h/$1/cpuset.mems")" ] || cat "$h/cpuset.mems" >"$h/$1/cpuset.mems"
    fi
  done
}

remove_cgroups() { # remove_cgroups NAME: kill what is left inside, then remove depth first
  local h d pid
  for h in $(cgroup_hierarchies); do
    [ -d "$h/$1" ] || continue
    for _ in 1 2 3 4 5; do
      local left=0
      while read -r d; do
        for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; left=1; done
      done < <(find "$h/$1" -type d)
      [ "$left" = 0 ] && break
      sleep 0.2
    done
    find "$h/$1" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    if [ -d "$h/$1" ]; then log "warning: cgroup $h/$1 could not be removed"; fi
  done
}

# ---------- certificates, configuration ----------

node_pki() { # node_pki I DIR: kubelet client (system:node:<name>) and serving certificates
  local name ip p=$RUN/pki
  name=$(node_name "$1"); ip=$(node_ip "$1")
  (
    cd "$2"
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=clientAuth' >client.ext
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$name" \
      -keyout client.key -out client.csr 2>/dev/null
    openssl x509 -req -in client.csr -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 3650 \
      -extfile client.ext -out client.crt 2>/dev/null
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' "subjectAltName=IP:$ip,DNS:$name" >serving.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout serving.key -out serving.csr 2>/dev/null
    openssl x509 -req -in serving.csr -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 3650 \
      -extfile serving.ext -out serving.crt 2>/dev/null
    rm -f ./*.csr ./*.ext
  ) || die "creating the certificates of $(node_name "$1") failed"
}

write_node_config() { # write_node_config I DIR API-SERVER
  local i=$1 d=$2 server=$3 name ip br
  name=$(node_name "$i"); ip=$(node_ip "$i"); br=$(bridge "$i")
  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  # Root here may not lower a process's oom_score_adj; without this every sandbox fails
  # to start ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
EOF
  mkdir -p "$d/cni" "$d/manifests" "$d/kubelet" "$d/pod-logs"
  cat >"$d/cni/10-rkcm.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "rkcm-$name",
  "plugins": [
    {
      "type": "bridge", "bridge": "$br", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$d/ipam",
               "ranges": [[{"subnet": "$SUBNET_PREFIX.$i.0/24", "gateway": "$ip"}]],
               "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
EOF
  cat >"$d/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rkcm-e2e
  cluster: {server: "$server", certificate-authority: "$RUN/pki/ca.crt"}
users:
- name: $name
  user: {client-certificate: "$d/pki/client.crt", client-key: "$d/pki/client.key"}
contexts:
- name: $name
  context: {cluster: rkcm-e2e, user: $name}
current-context: $name
EOF
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
tlsCertFile: $d/pki/serving.crt
tlsPrivateKeyFile: $d/pki/serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$d/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /rkcm-$name
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
staticPodPath: $d/manifests
podLogsDir: $d/pod-logs
resolvConf: /etc/resolv.conf
maxPods: 110
# The local images cannot be pulled again: image garbage collection never runs.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 876000h
# All nodes share this machine's disk and memory; evict only when nearly nothing is left.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
shutdownGracePeriod: 0s
registerWithTaints:
- {key: $TAINT_KEY, value: "true", effect: NoSchedule}
EOF
}

# ---------- up ----------

save_machine_state() {
  local k p
  [ -f "$R/sysctl.saved" ] || for k in $SYSCTLS; do echo "$k=$(sysctl -n "$k")"; done >"$R/sysctl.saved"
  if [ ! -f "$R/outside.absent" ]; then
    : >"$R/outside.absent"
    for p in $OUTSIDE; do [ -e "$p" ] || echo "$p" >>"$R/outside.absent"; done
  fi
}

api_port() { sed -n 's|.*server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$RUN/kubeconfig" | head -1; }

cmd_up() {
  local n=${1:-} i t0
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "usage: $0 up N (1..200)"
  [ "$(id -u)" = 0 ] ||
    die "real nodes need root (containerd, kubelet, bridges, cgroups); run as root, or start the plane with REAL_NODES=0"
  [ -f "$RUN/env.sh" ] || die "no control plane in $RUN: real nodes join a running plane (e2e/cluster.sh up)"
  BIN=$(. "$RUN/env.sh"; echo "$RKCM_E2E_BIN")
  [ -x "$BIN/kubelet" ] || die "kubelet missing in $BIN (run e2e/build.sh)"
  local port server
  port=$(api_port); [ -n "$port" ] || die "no API server address in $RUN/kubeconfig"
  server=https://127.0.0.1:$port
  for i in $(seq 0 $((n - 1))); do
    if ip link show "$(bridge "$i")" >/dev/null 2>&1 && [ ! -d "$R/node-$i" ]; then
      die "bridge $(bridge "$i") exists but belongs to no node of $RUN: real nodes of another plane run on this machine (stop that plane), or remove it: ip link delete $(bridge "$i")"
    fi
  done
  if ip -o addr show | grep -q " $SUBNET_PREFIX\." && ! ip -o addr show | grep " $SUBNET_PREFIX\." | grep -q ' rkcm-rn'; then
    die "$SUBNET_PREFIX.0.0/16 is already used on this machine; the real nodes need it to themselves"
  fi
  t0=$(date +%s.%N)
  mkdir -p "$R" "$RUN/logs" "$RUN/pids"
  ensure_packages
  [ -d /sys/fs/cgroup ] && [ -n "$(cgroup_hierarchies)" ] || die "no cgroup hierarchy is mounted under /sys/fs/cgroup"
  local images
  images=$(bash "$here/images.sh") || die "building the local images failed"
  save_machine_state

  # Pods reach the API server at the `kubernetes` Service address, as in a cluster with a
  # service proxy: one NAT rule for traffic from the real nodes' pods, to the loopback port
  # (route_localnet lets the bridges route to 127.0.0.1).
  iptables -t nat -C PREROUTING -s "$SUBNET_PREFIX.0.0/16" -d "$SERVICE_IP/32" -p tcp --dport 443 \
    -m comment --comment "$NAT_COMMENT" -j DNAT --to-destination "127.0.0.1:$port" 2>/dev/null ||
    iptables -t nat -A PREROUTING -s "$SUBNET_PREFIX.0.0/16" -d "$SERVICE_IP/32" -p tcp --dport 443 \
      -m comment --comment "$NAT_COMMENT" -j DNAT --to-destination "127.0.0.1:$port" ||
    die "adding the NAT rule for the kubernetes Service failed (iptables -t nat)"

  for i in $(seq 0 $((n - 1))); do
    local d=$R/node-$i name br
    name=$(node_name "$i"); br=$(bridge "$i")
    if alive_pid "$RUN/pids/$name-kubelet.pid"; then log "$name already runs"; continue; fi
    mkdir -p "$d/pki" "$d/logs"
    node_pki "$i" "$d/pki"
    write_node_config "$i" "$d" "$server"
    ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge || die "creating bridge $br failed"
    ip addr replace "$(node_ip "$i")/24" dev "$br"
    ip link set "$br" up
    sysctl -qw "net.ipv4.conf.$br.route_localnet=1"
    make_cgroups "rkcm-$name"

    setsid containerd --config "$d/containerd.toml" >"$RUN/logs/$name-containerd.log" 2>&1 </dev/null &
    echo $! >"$RUN/pids/$name-containerd.pid"
    local waited=0
    until ctr --address "$d/containerd.sock" version >/dev/null 2>&1; do
      alive_pid "$RUN/pids/$name-containerd.pid" ||
        { tail -20 "$RUN/logs/$name-containerd.log" >&2; die "containerd of $name exited; log: $RUN/logs/$name-containerd.log"; }
      waited=$((waited + 1)); [ "$waited" -lt 150 ] || die "containerd of $name did not answer in 30 s"
      sleep 0.2
    done
    local img
    for img in busybox httpd pause; do
      ctr --address "$d/containerd.sock" -n k8s.io images import "$images/$img.tar" >/dev/null ||
        die "importing the $img image into $name failed"
    done

    setsid "$BIN/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$d/kubeconfig" \
      --root-dir="$d/kubelet" --hostname-override="$name" --node-ip="$(node_ip "$i")" \
      --node-labels="type=real,$TAINT_KEY=true" --v=2 \
      >"$RUN/logs/$name-kubelet.log" 2>&1 </dev/null &
    echo $! >"$RUN/pids/$name-kubelet.pid"
    log "started $name: containerd pid $(cat "$RUN/pids/$name-containerd.pid"), kubelet pid $!, address $(node_ip "$i")"
  done
  echo "$n" >"$R/count"

  local deadline=$(( $(date +%s) + 60 + 5 * n )) ready=0
  while :; do
    ready=$("$BIN/kubectl" --kubeconfig "$RUN/kubeconfig" get nodes -l type=real \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True || true)
    [ "$ready" -ge "$n" ] && break
    for i in $(seq 0 $((n - 1))); do
      alive_pid "$RUN/pids/$(node_name "$i")-kubelet.pid" || {
        tail -30 "$RUN/logs/$(node_name "$i")-kubelet.log" >&2
        die "the kubelet of $(node_name "$i") exited; log: $RUN/logs/$(node_name "$i")-kubelet.log"; }
    done
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "$ready of $n real nodes Ready; kubelet logs: $RUN/logs/real-node-*-kubelet.log"
    fi
    sleep 0.2
  done
  log "$n real nodes Ready in $(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")s (images: $images)"
}

# ---------- down ----------

stop_pid() { # stop_pid PIDFILE WHAT: TERM, KILL after 10 s
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -CONT "$pid" 2>/dev/null || true # a node a test stopped with SIGSTOP
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $2 (pid $pid)"
  fi
  rm -f "$1"
}

mounts_under() { # mount points below $1, deepest first
  awk -v p="$1/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r
}

cmd_down() {
  [ -d "$R" ] || return 0
  local d i name sock
  for d in "$R"/node-*; do
    [ -d "$d" ] || continue
    i=${d##*/node-}; name=$(node_name "$i"); sock=$d/containerd.sock
    # The kubelet first: it would restart the containers killed below.
    stop_pid "$RUN/pids/$name-kubelet.pid" "kubelet of $name"
    # The containers (every process in the node's cgroups), then the shims, then containerd.
    remove_cgroups "rkcm-$name"
    pkill -9 -f -- "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
    stop_pid "$RUN/pids/$name-containerd.pid" "containerd of $name"
    pkill -9 -f -- "-address $sock" 2>/dev/null || true
    if ip link show "$(bridge "$i")" >/dev/null 2>&1; then ip link delete "$(bridge "$i")"; fi
  done
  local m
  for m in $(mounts_under "$R"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  while iptables -t nat -S PREROUTING 2>/dev/null | grep -q -- "--comment $NAT_COMMENT"; do
    local rule
    rule=$(iptables -t nat -S PREROUTING 2>/dev/null | grep -- "--comment $NAT_COMMENT" | head -1 | sed 's/^-A /-D /')
    eval "iptables -t nat $rule" || break
  done
  if [ -f "$R/sysctl.saved" ]; then
    while IFS= read -r kv; do sysctl -qw "$kv" || log "warning: could not restore $kv"; done <"$R/sysctl.saved"
  fi
  if [ -f "$R/outside.absent" ]; then
    while IFS= read -r p; do
      [ -n "$p" ] || continue
      for m in $(mounts_under "$p"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
      rm -rf --one-file-system "$p"
    done <"$R/outside.absent"
  fi
  # Symbolic links the kubelets left in a /var/log/containers that existed before.
  [ -d /var/log/containers ] && find /var/log/containers -maxdepth 1 -type l -lname "$R/*" -delete 2>/dev/null || true
  if [ -n "$(mounts_under "$R")" ]; then
    die "mounts remain under $R, not removing it: $(mounts_under "$R" | tr '\n' ' ')"
  fi
  rm -rf --one-file-system "$R"
  log "real nodes removed"
}

cmd_status() {
  local d i name
  [ -d "$R" ] || { echo "real nodes: none"; return 0; }
  for d in "$R"/node-*; do
    [ -d "$d" ] || continue
    i=${d##*/node-}; name=$(node_name "$i")
    for c in containerd kubelet; do
      if alive_pid "$RUN/pids/$name-$c.pid"; then echo "$name $c: running (pid $(cat "$RUN/pids/$name-$c.pid"))"
      else echo "$name $c: not running"; fi
    done
  done
}

case "${1:-}" in
  up) cmd_up "${2:-}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  pid) [ -f "$RUN/pids/${2:-}-kubelet.pid" ] || die "no node ${2:-}"; cat "$RUN/pids/$2-kubelet.pid" ;;
  *) echo "usage: $0 up N|down|status|pid NODE" >&2; exit 2 ;;
esac
