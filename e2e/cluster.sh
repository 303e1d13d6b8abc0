#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver, kube-scheduler, kwok (simulated kubelets)
# and upstream kube-controller-manager, as plain processes on loopback; with REAL_NODES=N
# also N real nodes (kubelets with containerd running real containers, e2e/real-nodes.sh).
#
#   e2e/cluster.sh up       start (idempotent: a healthy running plane is left as it is)
#   e2e/cluster.sh down     stop the processes this script started (pid files) and remove state
#   e2e/cluster.sh env      print the shell exports for the running plane
#   e2e/cluster.sh status   say what runs
#   e2e/cluster.sh stop NAME   stop one component (e.g. kube-apiserver), state kept
#   e2e/cluster.sh start NAME  start a stopped component again with its first command line
#                              (a fault of `make chaos`: the API server down, same etcd)
#
# Settings (environment):
#   NODES=3                 simulated nodes (kwok-node-0 ...); NODES=1000 works
#   REAL_NODES=0            real nodes (real-node-0 ...; root only): kubelets with their own
#                           containerd, labelled type=real and tainted
#                           rkcm.test/real-node=true:NoSchedule (see e2e/real-nodes.sh); on a
#                           running plane with fewer, the missing ones are added
#   KCM_CONTROLLERS=...     --controllers for upstream kube-controller-manager (default below)
#   KCM=0                   do not start upstream kube-controller-manager at all
#   K8S_VERSION=v1.35.4     the Kubernetes version of the plane (e2e/versions.env: v1.34 to
#                           v1.37, a bare minor means its newest patch; default the pin
#                           v1.37.1), built by e2e/build.sh into its own cache directory
#   RKCM_CLUSTER_DIR=...    state, logs and kubeconfig (default: $TMPDIR/rkcm-cluster-$UID
#                           for the pinned version, $TMPDIR/rkcm-cluster-$UID-<version> for
#                           another, so planes of several versions can run side by side)
#   AUDIT=1                 apiserver audit log (metadata of every request) in logs/audit.log;
#                           benchmarks count each manager's requests from it by user name
#   AUDIT_POD_CREATE_NAMESPACES="a b"   with AUDIT=1: pod creates in these namespaces are
#                           logged with their body (Request level), so a pod made from
#                           generateName can be told apart by its owner (the envelope
#                           benchmark's reaction latency)
#   AUDIT_LEASE_NAMESPACES="a b"   with AUDIT=1: Lease writes in these namespaces are logged
#                           with their body (Request level), so the holder each write set is
#                           in the log (chaos's rebalance scenario reads shard Lease terms)
#   EXTRA_USERS="u1 u2"     more users (system:masters) with a kubeconfig-<user> each, all on
#                           one shared key; chaos's rebalance scenario gives every replica it
#                           starts its own user
#   SCHEDULER_QPS=50 SCHEDULER_BURST=100   kube-scheduler's client limits (its defaults); the
#                           benchmark plane raises them so the scheduler is not what a
#                           manager under test waits for
#   KWOK_POD_WORKERS=N      pod stages kwok plays at once (kwok's podPlayStageParallelism,
#                           4 when unset): every simulated kubelet shares these workers, so a
#                           mass rollout waits on them; the benchmark plane raises it
#   KWOK_NODE_LEASE_SECONDS=40   the simulated nodes' Lease duration; kwok renews each node's
#                           Lease every quarter of it (10 s, as a kubelet). Nothing on this plane
#                           reads node Leases (no node lifecycle controller), so a plane with
#                           thousands of nodes can lengthen it to keep renewals off two cores
#
# Besides the admin kubeconfig, the plane writes kubeconfig-<user> for the users "rkcm" and
# "kcm" (both system:masters), so two managers under test are told apart by user name.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# shellcheck source=versions.env
. "$here/versions.env"
if [ "$K8S_VERSION" = "$K8S_PIN" ]; then
  RUN=${RKCM_CLUSTER_DIR:-${TMPDIR:-/tmp}/rkcm-cluster-$(id -u)}
else
  RUN=${RKCM_CLUSTER_DIR:-${TMPDIR:-/tmp}/rkcm-cluster-$(id -u)-$K8S_VERSION}
fi
# e2e/real-nodes.sh finds the plane by it. Real nodes use fixed host paths: one plane at a
# time can have them.
export RKCM_CLUSTER_DIR=$RUN
NODES=${NODES:-3}

# Controllers rkcm implements or will implement: upstream must not run them too, or both
# managers would fight over the same objects.
RKCM_OWNED=pod-garbage-collector-controller,replicaset-controller,replicationcontroller-controller,deployment-controller,statefulset-controller,daemonset-controller,job-controller,cronjob-controller,ttl-after-finished-controller
# Upstream controllers that would disturb tests: node lifecycle taints hand-made nodes that
# have no kubelet and taint eviction then deletes their pods.
DISTURBING=node-lifecycle-controller,taint-eviction-controller
default_kcm_controllers() {
  local out='*' c
  for c in ${RKCM_OWNED//,/ } ${DISTURBING//,/ }; do out+=",-$c"; done
  echo "$out"
}
KCM_CONTROLLERS=${KCM_CONTROLLERS:-$(default_kcm_controllers)}

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

alive() { [ -f "$RUN/pids/$1.pid" ] && kill -0 "$(cat "$RUN/pids/$1.pid")" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND every 0.2 s.
wait_until() {
  local what=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  log "$what: ok"
}

start_proc() { # start_proc NAME BINARY ARGS...: background process, logs and pid in $RUN
  local name=$1 bin=$2; shift 2
  [ -x "$bin" ] || die "binary $bin is missing (run e2e/build.sh)"
  mkdir -p "$RUN/cmd"
  printf '%s\0' "$bin" "$@" >"$RUN/cmd/$name"
  setsid "$bin" "$@" >"$RUN/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/pids/$name.pid"
  log "started $name (pid $!, log $RUN/logs/$name.log)"
}

check_started() { # fails with the log tail if the process already died
  alive "$1" || { tail -20 "$RUN/logs/$1.log" >&2; die "$1 exited at start; log: $RUN/logs/$1.log"; }
}

kc() { "$BIN/kubectl" --kubeconfig "$RUN/kubeconfig" "$@"; }

healthy() {
  [ -f "$RUN/env.sh" ] && alive etcd && alive kube-apiserver && alive kube-scheduler && alive kwok &&
    { [ ! -f "$RUN/pids/kube-controller-manager.pid" ] || alive kube-controller-manager; } &&
    BIN=$(. "$RUN/env.sh"; echo "$RKCM_E2E_BIN") && kc get --raw /readyz >/dev/null 2>&1 &&
    real_nodes_alive
}

real_nodes_alive() { # every real node started has its containerd and kubelet running
  local f
  for f in "$RUN"/pids/real-node-*.pid; do
    [ -e "$f" ] || continue
    kill -0 "$(cat "$f")" 2>/dev/null || return 1
  done
}

real_count() { cat "$RUN/real/count" 2>/dev/null || echo 0; }

start_real_nodes() { # adds real nodes up to REAL_NODES and records the count in env.sh
  [ "${REAL_NODES:-0}" -gt "$(real_count)" ] || return 0
  bash "$here/real-nodes.sh" up "$REAL_NODES"
  sed -i '/^export RKCM_REAL_NODES=/d' "$RUN/env.sh"
  echo "export RKCM_REAL_NODES=$REAL_NODES" >>"$RUN/env.sh"
}

make_pki() {
  local p=$RUN/pki; mkdir -p "$p"
  (
    cd "$p"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=rkcm-e2e-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=serverAuth' \
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' >server.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key \
      -out apiserver.csr 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out apiserver.crt 2>/dev/null
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
      'extendedKeyUsage=clientAuth' >client.ext
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=rkcm-e2e-admin" \
      -keyout admin.key -out admin.csr 2>/dev/null
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out admin.crt 2>/dev/null
    # The API server's client certificate for kubelets (logs, exec, port-forward).
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      -keyout kubelet-client.key -out kubelet-client.csr 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile client.ext -out kubelet-client.crt 2>/dev/null
    for u in rkcm kcm; do
      openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=$u" \
        -keyout "$u.key" -out "$u.csr" 2>/dev/null
      openssl x509 -req -in "$u.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile client.ext -out "$u.crt" 2>/dev/null
    done
    # EXTRA_USERS: one key shared by all (only the name on the certificate tells them apart).
    if [ -n "${EXTRA_USERS:-}" ]; then
      openssl genrsa -out extra-users.key 2048 2>/dev/null
      for u in ${EXTRA_USERS//,/ }; do
        openssl req -new -key extra-users.key -subj "/O=system:masters/CN=$u" -out "$u.csr" 2>/dev/null
        openssl x509 -req -in "$u.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
          -extfile client.ext -out "$u.crt" 2>/dev/null
        cp extra-users.key "$u.key"
      done
    fi
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # kubeadm's front-proxy CA (--requestheader-client-ca-file of its controller-manager);
    # only tests read it, nothing on the plane is configured with it.
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=front-proxy-ca" \
      -keyout front-proxy-ca.key -out front-proxy-ca.crt 2>/dev/null
  ) || die "creating certificates with openssl failed"
}

write_kubeconfig() { # write_kubeconfig FILE CERT-BASENAME
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rkcm-e2e
  cluster:
    server: https://127.0.0.1:$AP
    certificate-authority: $RUN/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $RUN/pki/$2.crt
    client-key: $RUN/pki/$2.key
contexts:
- name: rkcm-e2e
  context: {cluster: rkcm-e2e, user: admin}
current-context: rkcm-e2e
EOF
}

nodes_manifest() { # nodes_manifest FROM TO: Node objects kwok will manage
  local i
  for ((i = $1; i < $2; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec:
  podCIDR: 10.$((64 + i / 256)).$((i % 256)).0/24
  podCIDRs: [10.$((64 + i / 256)).$((i % 256)).0/24]
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: fake, kubeProxyVersion: fake}
EOF
  done
}

# The version of the plane in $RUN (recorded at start; planes before versions were recorded
# ran the pin).
plane_version() { (. "$RUN/env.sh" 2>/dev/null; echo "${RKCM_K8S_VERSION:-$K8S_PIN}"); }

cmd_up() {
  if [ -f "$RUN/env.sh" ] && [ "$(plane_version)" != "$K8S_VERSION" ] && healthy; then
    die "a plane of Kubernetes $(plane_version) runs in $RUN, not $K8S_VERSION: stop it first (RKCM_CLUSTER_DIR=$RUN bash e2e/cluster.sh down) or use another RKCM_CLUSTER_DIR"
  fi
  if healthy; then
    log "already running ($RUN); leaving it as it is"
    [[ ${REAL_NODES:-0} =~ ^[0-9]+$ ]] || die "REAL_NODES must be a number"
    start_real_nodes
    cmd_env_hint
    return 0
  fi
  if [ -d "$RUN/pids" ] && ls "$RUN"/pids/*.pid >/dev/null 2>&1; then
    log "found a partly running plane in $RUN: stopping it first"
    cmd_down
  fi
  command -v openssl >/dev/null || die "openssl is needed to create certificates"
  [[ ${REAL_NODES:-0} =~ ^[0-9]+$ ]] || die "REAL_NODES must be a number"
  local t0; t0=$(date +%s)
  BIN=$("$here/build.sh" | tail -1)
  [ -d "$BIN" ] || die "build did not produce a binary directory"
  if [ -d "$RUN/real" ]; then bash "$here/real-nodes.sh" down || die "removing old real nodes in $RUN failed"; fi
  rm -rf "$RUN"; mkdir -p "$RUN/logs" "$RUN/pids" "$RUN/etcd"
  make_pki

  EP=$(free_port); PP=$(free_port); AP=$(free_port); SP=$(free_port); CP=$(free_port); KP=$(free_port)
  write_kubeconfig "$RUN/kubeconfig" admin
  write_kubeconfig "$RUN/kubeconfig-rkcm" rkcm
  write_kubeconfig "$RUN/kubeconfig-kcm" kcm
  local u extra_users=${EXTRA_USERS:-}
  for u in ${extra_users//,/ }; do write_kubeconfig "$RUN/kubeconfig-$u" "$u"; done
  local audit=()
  if [ "${AUDIT:-0}" = 1 ]; then
    {
      printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'omitStages: [RequestReceived]' \
        'omitManagedFields: true' 'rules:'
      if [ -n "${AUDIT_POD_CREATE_NAMESPACES:-}" ]; then
        printf '%s\n' '- level: Request' '  verbs: [create]' \
          '  resources: [{group: "", resources: [pods]}]' '  namespaces:'
        for ns in ${AUDIT_POD_CREATE_NAMESPACES//,/ }; do printf '  - %s\n' "$ns"; done
      fi
      if [ -n "${AUDIT_LEASE_NAMESPACES:-}" ]; then
        printf '%s\n' '- level: Request' '  verbs: [create, update, patch]' \
          '  resources: [{group: coordination.k8s.io, resources: [leases]}]' '  namespaces:'
        for ns in ${AUDIT_LEASE_NAMESPACES//,/ }; do printf '  - %s\n' "$ns"; done
      fi
      printf '%s\n' '- level: Metadata'
    } >"$RUN/audit-policy.yaml"
    audit=(--audit-policy-file="$RUN/audit-policy.yaml" --audit-log-path="$RUN/logs/audit.log"
      --audit-log-maxsize=0 --audit-log-mode=blocking)
  fi

  start_proc etcd "$BIN/etcd" --name=node0 --data-dir="$RUN/etcd" \
    --listen-client-urls="http://127.0.0.1:$EP" --advertise-client-urls="http://127.0.0.1:$EP" \
    --listen-peer-urls="http://127.0.0.1:$PP" --initial-advertise-peer-urls="http://127.0.0.1:$PP" \
    --initial-cluster="node0=http://127.0.0.1:$PP" --quota-backend-bytes=8589934592 \
    --unsafe-no-fsync=true --log-level=warn
  wait_until "etcd health" 30 curl -sf "http://127.0.0.1:$EP/health" || { check_started etcd; die "etcd did not become healthy"; }

  # --watch-cache-sizes=podtemplates#0: PodTemplate watches go straight to etcd, so a test
  # can force a real 410 Gone by compacting etcd (the watch cache would serve old revisions
  # from memory). No controller watches PodTemplates.
  # TaintNodesByCondition admission is off: it taints every new node not-ready, and only the
  # node-lifecycle controller (off here, see DISTURBING) would lift the taint.
  # ServiceAccount admission stays on: upstream kube-controller-manager creates the
  # "default" ServiceAccount of every namespace. --advertise-address and
  # --endpoint-reconciler-type=none keep the apiserver on loopback with no default route.
  # Server-side sharded list and watch (KEP-5866, alpha since v1.36) for rkcm's sharded mode
  # and its tests; older servers do not know the gate.
  local gates=()
  case "$K8S_VERSION" in
    v1.34.*|v1.35.*) ;;
    *) gates=(--feature-gates=ShardedListAndWatch=true) ;;
  esac
  start_proc kube-apiserver "$BIN/kube-apiserver" "${gates[@]}" \
    --etcd-servers="http://127.0.0.1:$EP" \
    --bind-address=127.0.0.1 --secure-port="$AP" \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --tls-cert-file="$RUN/pki/apiserver.crt" --tls-private-key-file="$RUN/pki/apiserver.key" \
    --client-ca-file="$RUN/pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$RUN/pki/sa.pub" --service-account-signing-key-file="$RUN/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC \
    --allow-privileged=true \
    --watch-cache-sizes=podtemplates#0 \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --kubelet-client-certificate="$RUN/pki/kubelet-client.crt" --kubelet-client-key="$RUN/pki/kubelet-client.key" \
    --kubelet-certificate-authority="$RUN/pki/ca.crt" \
    --disable-admission-plugins=TaintNodesByCondition "${audit[@]}"
  wait_until "kube-apiserver ready" 90 "$BIN/kubectl" --kubeconfig "$RUN/kubeconfig" get --raw /readyz ||
    { check_started kube-apiserver; die "kube-apiserver not ready after 90 s; log: $RUN/logs/kube-apiserver.log"; }

  start_proc kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$RUN/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SP" \
    --kube-api-qps="${SCHEDULER_QPS:-50}" --kube-api-burst="${SCHEDULER_BURST:-100}"

  if [ "${KCM:-1}" != 0 ]; then
    start_proc kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$RUN/kubeconfig" \
      --leader-elect=false --bind-address=127.0.0.1 --secure-port="$CP" \
      --controllers="$KCM_CONTROLLERS" \
      --service-account-private-key-file="$RUN/pki/sa.key" --root-ca-file="$RUN/pki/ca.crt"
  fi

  local kwok_config=()
  if [ -n "${KWOK_POD_WORKERS:-}" ]; then
    # A configuration file gets none of kwok's defaults: its other workers are set to them.
    printf '%s\n' "apiVersion: config.kwok.x-k8s.io/v1alpha1" "kind: KwokConfiguration" \
      "options:" "  podPlayStageParallelism: $KWOK_POD_WORKERS" \
      "  nodePlayStageParallelism: 4" "  nodeLeaseParallelism: 4" \
      "  podsOnNodeSyncParallelism: 1" >"$RUN/kwok-config.yaml"
    kwok_config=(--config="$RUN/kwok-config.yaml")
  fi
  start_proc kwok "$BIN/kwok" --kubeconfig="$RUN/kubeconfig" --config="$BIN/kwok-stages.yaml" \
    "${kwok_config[@]}" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds="${KWOK_NODE_LEASE_SECONDS:-40}" --server-address="127.0.0.1:$KP" --cidr=10.64.0.0/10

  cat >"$RUN/env.sh" <<EOF
export KUBECONFIG=$RUN/kubeconfig
export RKCM_TEST_KUBECONFIG=$RUN/kubeconfig
export RKCM_TEST_ETCD_ENDPOINT=http://127.0.0.1:$EP
export RKCM_E2E_BIN=$BIN
export RKCM_CLUSTER_DIR=$RUN
export PATH=$BIN:\$PATH
export RKCM_REAL_NODES=0
export RKCM_K8S_VERSION=$K8S_VERSION
EOF

  local n=0 batch=500
  while [ "$n" -lt "$NODES" ]; do
    local to=$(( n + batch < NODES ? n + batch : NODES ))
    nodes_manifest "$n" "$to" | kc apply --server-side -f - >/dev/null || die "creating nodes $n..$to failed"
    n=$to
    log "nodes created: $n/$NODES"
  done
  if [ "$NODES" -gt 0 ]; then
    wait_until "$NODES nodes Ready" $(( 60 + NODES / 10 )) nodes_ready "$NODES" ||
      die "nodes did not become Ready; kwok log: $RUN/logs/kwok.log"
  fi
  for c in kube-scheduler kwok; do check_started "$c"; done
  [ "${KCM:-1}" = 0 ] || check_started kube-controller-manager
  if [ "${KCM:-1}" != 0 ]; then
    wait_until "default ServiceAccount" 60 kc -n default get serviceaccount default ||
      die "no default ServiceAccount; log: $RUN/logs/kube-controller-manager.log"
  fi
  start_real_nodes
  log "control plane (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION) up in $(( $(date +%s) - t0 ))s"
  cmd_env_hint
}

nodes_ready() {
  local ready
  ready=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)
  [ "$ready" -ge "$1" ]
}

cmd_env_hint() {
  local v=""
  [ "$K8S_VERSION" = "$K8S_PIN" ] || v="K8S_VERSION=$K8S_VERSION "
  cat >&2 <<EOF

The local control plane (Kubernetes $K8S_VERSION) runs. Use it with:
  eval "\$(${v}make -s cluster-env)"      # or: . $RUN/env.sh
  kubectl get nodes
Logs: $RUN/logs/   Stop: ${v}make cluster-down
EOF
}

cmd_down() {
  local name pid
  [ -d "$RUN/pids" ] || { log "nothing to stop in $RUN"; return 0; }
  # Real nodes first (their kubelets talk to the API server), and they hold mounts under
  # $RUN that must be gone before it is removed.
  if [ -d "$RUN/real" ]; then
    bash "$here/real-nodes.sh" down || die "stopping the real nodes failed; $RUN kept"
  fi
  # reverse start order: clients first, etcd last
  for name in kwok kube-controller-manager kube-scheduler kube-apiserver etcd; do
    [ -f "$RUN/pids/$name.pid" ] || continue
    pid=$(cat "$RUN/pids/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      log "stopped $name (pid $pid)"
    fi
    rm -f "$RUN/pids/$name.pid"
  done
  rm -rf "$RUN"
}

cmd_env() {
  [ -f "$RUN/env.sh" ] || die "no control plane in $RUN (run: make cluster-up)"
  cat "$RUN/env.sh"
}

cmd_status() {
  local name
  for name in etcd kube-apiserver kube-scheduler kube-controller-manager kwok; do
    if alive "$name"; then echo "$name: running (pid $(cat "$RUN/pids/$name.pid"))"
    else echo "$name: not running"; fi
  done
  [ ! -d "$RUN/real" ] || bash "$here/real-nodes.sh" status
}

stop_one() { # stop_one NAME: SIGTERM, SIGKILL after 15 s
  local pid
  [ -f "$RUN/pids/$1.pid" ] || return 0
  pid=$(cat "$RUN/pids/$1.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $1 (pid $pid)"
  fi
  rm -f "$RUN/pids/$1.pid"
}

cmd_stop() {
  [ -n "${1:-}" ] || die "usage: $0 stop NAME"
  [ -f "$RUN/cmd/$1" ] || die "no component $1 in $RUN"
  stop_one "$1"
}

cmd_start() {
  local name=${1:-} argv
  [ -n "$name" ] || die "usage: $0 start NAME"
  [ -f "$RUN/cmd/$name" ] || die "no component $name in $RUN"
  if alive "$name"; then log "$name already runs"; return 0; fi
  mapfile -d '' argv <"$RUN/cmd/$name"
  setsid "${argv[@]}" >>"$RUN/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/pids/$name.pid"
  log "started $name again (pid $!)"
  if [ "$name" = kube-apiserver ]; then
    BIN=$(. "$RUN/env.sh"; echo "$RKCM_E2E_BIN")
    wait_until "kube-apiserver ready" 90 kc get --raw /readyz ||
      { check_started kube-apiserver; die "kube-apiserver not ready after 90 s"; }
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  stop) cmd_stop "${2:-}" ;;
  start) cmd_start "${2:-}" ;;
  down) cmd_down ;;
  env) cmd_env ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|env|status|stop NAME|start NAME" >&2; exit 2 ;;
esac
