#!/usr/bin/env bash
# A real-node smoke test: the real kubelet, with containerd and runc, runs a
# pod of snapflow's image against a control plane of its own, and the pod's
# output must be the image's `snapflow version`. It checks what the local
# node of the test suite stands in for: that the image runs on a node.
#
# Needs root, containerd and runc (Debian packages), and builds the kubelet
# (bash hack/tools.sh kubelet) and the image (make image) when missing. Not
# part of make test: the kubelet's first build takes minutes. docs/local-node.md
# says what this machine needed and why.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/bin"
[[ $(id -u) -eq 0 ]] || { echo "kubelet-smoke: run as root (the kubelet and containerd need it)" >&2; exit 2; }
for t in containerd ctr runc; do
  command -v "$t" >/dev/null || { echo "kubelet-smoke: $t is missing: apt-get install -y containerd runc" >&2; exit 2; }
done
bash "$ROOT/hack/tools.sh" etcd kube kubelet
[[ -f "$BIN/image/snapflow-linux-amd64.tar" ]] || (cd "$ROOT" && make image)

WORK=$(mktemp -d /tmp/snapflow-kubelet.XXXXXX)
pids=()
cleanup() {
  # Nothing here needs a graceful stop, and the API server would take a minute.
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # The kubelet's mounts (it bind-mounts its root dir) and containerd's
  # shims go with the directory.
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io -address $WORK" 2>/dev/null || true
  awk -v w="$WORK" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  rm -rf "$WORK" 2>/dev/null || true
}
trap cleanup EXIT
fail() { # fail WHY: keep the logs, stop everything
  local logs; logs=$(mktemp -d /tmp/snapflow-kubelet-logs.XXXXXX)
  cp "$WORK"/*.log "$logs"/ 2>/dev/null || true
  "$BIN/kubectl" --kubeconfig "$WORK/kubeconfig" get events -A >"$logs/events.txt" 2>&1 || true
  echo "kubelet-smoke: $1; logs in $logs" >&2
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # wait_for SECONDS WHAT CMD...
  local until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < until)) || fail "timed out waiting for $what"
    sleep 1
  done
}

etcd_port=$(free_port) peer_port=$(free_port) api_port=$(free_port) kubelet_port=$(free_port) healthz_port=$(free_port)
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/sa.key" -out "$WORK/sa.crt" -days 1 -subj /CN=service-accounts 2>/dev/null
echo "$token,smoke,smoke,\"system:masters\"" >"$WORK/tokens.csv"

"$BIN/etcd" --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" >"$WORK/etcd.log" 2>&1 &
pids+=($!)
# The node's name does not resolve, so the API server reaches the kubelet
# (logs) by its address.
"$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" --secure-port "$api_port" --bind-address 127.0.0.1 \
  --cert-dir "$WORK/apiserver" --token-auth-file "$WORK/tokens.csv" --authorization-mode AlwaysAllow \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$WORK/sa.crt" \
  --service-account-signing-key-file "$WORK/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --kubelet-preferred-address-types InternalIP >"$WORK/apiserver.log" 2>&1 &
pids+=($!)
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: smoke, cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}}]
users: [{name: smoke, user: {token: $token}}]
contexts: [{name: smoke, context: {cluster: smoke, user: smoke}}]
current-context: smoke
EOF
k() { "$BIN/kubectl" --kubeconfig "$WORK/kubeconfig" "$@"; }
wait_for 60 "the API server" k get --raw /readyz

# containerd in a directory of its own. This machine denies a negative
# oom_score_adj (no CAP_SYS_RESOURCE), which the CRI asks for the pod
# sandbox: restrict_oom_score_adj clamps it at containerd's own score.
containerd config default >"$WORK/containerd.toml"
sed -i -e "s#^root = .*#root = \"$WORK/containerd/root\"#" -e "s#^state = .*#state = \"$WORK/containerd/state\"#" \
  -e "s#address = \"/run/containerd/containerd.sock\"#address = \"$WORK/containerd.sock\"#" \
  -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' "$WORK/containerd.toml"
containerd --config "$WORK/containerd.toml" >"$WORK/containerd.log" 2>&1 &
pids+=($!)
wait_for 30 "containerd" test -S "$WORK/containerd.sock"

# No registry is reachable: load the image, and let it stand in for the
# pause image of the pod sandbox (whose process only has to start).
ctr --address "$WORK/containerd.sock" -n k8s.io images import "$BIN/image/snapflow-linux-amd64.tar" >/dev/null
image=$(ctr --address "$WORK/containerd.sock" -n k8s.io images ls -q | grep '^docker.io/snapflow/snapflow:' | head -1)
pause=$(sed -n 's/.*sandbox_image = "\(.*\)"/\1/p' "$WORK/containerd.toml")
ctr --address "$WORK/containerd.sock" -n k8s.io images tag "$image" "$pause" >/dev/null

# cgroup v1 needs failCgroupV1: false; containerd reports no capacity for
# its image filesystem, which the default eviction thresholds read as disk
# pressure.
cat >"$WORK/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: unix://$WORK/containerd.sock
failSwapOn: false
port: $kubelet_port
healthzPort: $healthz_port
readOnlyPort: 0
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
EOF
"$BIN/kubelet" --kubeconfig "$WORK/kubeconfig" --config "$WORK/kubelet.yaml" --root-dir "$WORK/kubelet" \
  --cert-dir "$WORK/kubelet-pki" --hostname-override smoke-node >"$WORK/kubelet.log" 2>&1 &
pids+=($!)
wait_for 60 "the kubelet to register its node" k get node smoke-node

# No scheduler and no controller manager run: the pod names its node, and
# the namespace's default ServiceAccount is made by hand. No CNI is set up
# either, so the node stays NotReady and the pod uses the host's network.
k create serviceaccount default >/dev/null
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: smoke}
spec:
  nodeName: smoke-node
  hostNetwork: true
  restartPolicy: Never
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers:
    - name: snapflow
      image: $image
      imagePullPolicy: Never
      args: [version]
      securityContext: {runAsUser: 65532, runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
EOF
phase() { k get pod smoke -o jsonpath='{.status.phase}{" "}{.status.containerStatuses[0].state.terminated.reason}'; }
for ((i = 0; i < 120; i++)); do
  case $(phase) in
    Succeeded*) break ;;
    Failed* | *StartError* | *Error*) fail "the pod did not run: $(phase)" ;;
  esac
  sleep 1
done
[[ $(phase) == Succeeded* ]] || fail "timed out waiting for the pod: $(phase)"
out=$(k logs smoke)
# The image's tag is its version with + spelled _ (tags allow no +).
want="snapflow $(tr _ + <"$BIN/image/tag")"
echo "kubelet-smoke: the pod printed: $out"
[[ $out == "$want "* ]] || fail "want $want"
echo "kubelet-smoke: passed"
