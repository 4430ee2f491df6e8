#!/usr/bin/env bash
# Builds the pinned tool binaries into bin/ from the Go module proxy.
# Each tool is rebuilt only when bin/.versions/<tool> does not record the pinned version,
# so `make tools` is cheap after the first run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/bin"
STAMPS="$BIN/.versions"
WORK="$BIN/.build"
mkdir -p "$BIN" "$STAMPS" "$WORK"

KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.8}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.20.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
FAKE_GCS_SERVER_VERSION=${FAKE_GCS_SERVER_VERSION:-v1.56.1}
GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}

export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

log() { printf '[tools] %s\n' "$*" >&2; }

fresh() { # fresh TOOL VERSION -> 0 when bin/TOOL exists and was built at VERSION
  [[ -x "$BIN/$1" && -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]
}

stamp() { echo "$2" >"$STAMPS/$1"; }

timed() { # timed LABEL CMD... : run and report the wall time
  local label=$1 start; shift
  start=$(date +%s)
  "$@"
  log "$label built in $(( $(date +%s) - start ))s"
}

# Each tool is built in two steps: prep_* writes a module that requires it
# and downloads what it needs (network-bound), compile_* builds it
# (CPU-bound). All preps start at once in the background, so a cold
# machine downloads while it compiles instead of one after the other.

prep_kube() {
  local dir="$WORK/kube-$KUBE_VERSION"
  rm -rf "$dir"; mkdir -p "$dir"
  local minor=${KUBE_VERSION#v1.}
  local staging="v0.$minor"
  # k8s.io/kubernetes maps its staging modules to ./staging; read that list from its
  # own go.mod and point each at the published v0.x release of the same patch.
  local modfile
  modfile=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module snapflow.local/kubetools"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
}

compile_kube() {
  local dir="$WORK/kube-$KUBE_VERSION"
  log "kube-apiserver and kubectl $KUBE_VERSION (first run takes several minutes)"
  (cd "$dir" && timed kube-apiserver go build -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  stamp kube-apiserver "$KUBE_VERSION"
  (cd "$dir" && timed kubectl go build -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl)
  stamp kubectl "$KUBE_VERSION"
}

prep_etcd() {
  local dir="$WORK/etcd-$ETCD_VERSION"
  rm -rf "$dir"; mkdir -p "$dir"
  cat >"$dir/go.mod" <<MOD
module snapflow.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && go mod tidy >/dev/null)
}

compile_etcd() {
  log "etcd $ETCD_VERSION"
  (cd "$WORK/etcd-$ETCD_VERSION" && timed etcd go build -o "$BIN/etcd" .)
  stamp etcd "$ETCD_VERSION"
}

# kopia's CLI is only a benchmark peer. Its module version list is not
# served, so `go install ...@version` fails; build it inside a module that
# requires the exact version instead.
KOPIA_VERSION=${KOPIA_VERSION:-v0.22.3}
prep_kopia() {
  local dir="$WORK/kopia-$KOPIA_VERSION"
  rm -rf "$dir"; mkdir -p "$dir"
  cat >"$dir/go.mod" <<MOD
module snapflow.local/kopiacli

go 1.26

require github.com/kopia/kopia $KOPIA_VERSION
MOD
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/kopia/kopia"
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
}

compile_kopia() {
  log "kopia CLI $KOPIA_VERSION (benchmark peer)"
  (cd "$WORK/kopia-$KOPIA_VERSION" && timed kopia go build -o "$BIN/kopia" github.com/kopia/kopia)
  stamp kopia "$KOPIA_VERSION"
}

# The kubelet is only for the real-node smoke test (hack/kubelet-smoke.sh),
# built like kube-apiserver but in a module of its own, so its extra
# dependencies never reach the tools make test needs.
prep_kubelet() {
  local dir="$WORK/kubelet-$KUBE_VERSION" kube="$WORK/kube-$KUBE_VERSION"
  [[ -f "$kube/go.mod" ]] || prep_kube
  rm -rf "$dir"; mkdir -p "$dir"
  sed 's#^module .*#module snapflow.local/kubelet#' "$kube/go.mod" >"$dir/go.mod"
  cp "$kube/go.sum" "$dir/go.sum"
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n' >"$dir/tools.go"
  (cd "$dir" && go mod tidy >/dev/null)
}

compile_kubelet() {
  log "kubelet $KUBE_VERSION (real-node smoke test)"
  (cd "$WORK/kubelet-$KUBE_VERSION" && timed kubelet go build -o "$BIN/kubelet" k8s.io/kubernetes/cmd/kubelet)
  stamp kubelet "$KUBE_VERSION"
}

# A tool `go install`ed at a version builds with its own module's
# requirements; prep_install downloads the same ones (a module that
# requires only it selects the same versions) without compiling.
prep_install() { # prep_install NAME PKG VERSION
  local dir="$WORK/$1-$3"
  rm -rf "$dir"; mkdir -p "$dir"
  printf 'module snapflow.local/%s\n\ngo 1.26\n' "$1" >"$dir/go.mod"
  (cd "$dir" && go get "$2@$3" >/dev/null 2>&1 || true)
}

compile_install() { # compile_install NAME PKG VERSION
  log "$1 $3"
  GOBIN="$BIN" timed "$1" go install "$2@$3"
  stamp "$1" "$3"
}

tool_pkg() { # the package and version `go install` builds, for each installed tool
  case $1 in
    controller-gen) echo "sigs.k8s.io/controller-tools/cmd/controller-gen $CONTROLLER_TOOLS_VERSION" ;;
    helm) echo "helm.sh/helm/v3/cmd/helm $HELM_VERSION" ;;
    versitygw) echo "github.com/versity/versitygw/cmd/versitygw $VERSITYGW_VERSION" ;;
    promtool) echo "github.com/prometheus/prometheus/cmd/promtool $PROMETHEUS_VERSION" ;;
    fake-gcs-server) echo "github.com/fsouza/fake-gcs-server $FAKE_GCS_SERVER_VERSION" ;;
    golangci-lint) echo "github.com/golangci/golangci-lint/v2/cmd/golangci-lint $GOLANGCI_LINT_VERSION" ;;
  esac
}

is_fresh() { # is_fresh TOOL: its binaries are built at the pinned version
  case $1 in
    kube) fresh kube-apiserver "$KUBE_VERSION" && fresh kubectl "$KUBE_VERSION" ;;
    etcd) fresh etcd "$ETCD_VERSION" ;;
    kopia) fresh kopia "$KOPIA_VERSION" ;;
    kubelet) fresh kubelet "$KUBE_VERSION" ;;
    *) local pv; pv=$(tool_pkg "$1"); fresh "$1" "${pv#* }" ;;
  esac
}

prep() {
  case $1 in
    kube|etcd|kopia|kubelet) "prep_$1" ;;
    *) local pv; pv=$(tool_pkg "$1"); prep_install "$1" ${pv} ;;
  esac
}

compile() {
  case $1 in
    kube|etcd|kopia|kubelet) "compile_$1" ;;
    *) local pv; pv=$(tool_pkg "$1"); compile_install "$1" ${pv} ;;
  esac
}

want=("$@")
[[ ${#want[@]} -eq 0 ]] && want=(etcd kube controller-gen helm versitygw promtool fake-gcs-server golangci-lint)
todo=()
for t in "${want[@]}"; do
  case $t in
    kube|etcd|kopia|kubelet|controller-gen|helm|versitygw|promtool|fake-gcs-server|golangci-lint) ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
  is_fresh "$t" || todo+=("$t")
done
[[ ${#todo[@]} -eq 0 ]] && exit 0

# Downloads start at once for every tool (network-bound). Compiles run in
# two lanes: kube-apiserver, the longest, with two small tools in one and
# the rest in the other. A Go build does not keep both cores busy all the
# time (linking is single-threaded), so two at once finish sooner than one
# after another.
rm -f "$WORK"/*.prep.done
declare -A preppid
for t in "${todo[@]}"; do
  # set -e stops a failed prep; the trap still says it ended, and how
  # (written whole, then renamed, so a lane never reads half of it).
  ( trap 'echo $? >"$WORK/$t.prep.tmp"; mv "$WORK/$t.prep.tmp" "$WORK/$t.prep.done"' EXIT
    prep "$t" >"$WORK/$t.prep.log" 2>&1 ) &
  preppid[$t]=$!
done
# The project's own modules too, for the build and tests after the tools.
(cd "$ROOT" && go mod download) >"$WORK/project.prep.log" 2>&1 &

lane() { # lane TOOL...: compile each after its download ended
  local t
  for t in "$@"; do
    # A prep killed outright (out of memory) writes no marker.
    while [[ ! -f "$WORK/$t.prep.done" ]] && kill -0 "${preppid[$t]}" 2>/dev/null; do sleep 1; done
    # A prep that failed leaves its downloads to the compile step, which
    # reports the error if it fails too.
    [[ "$(cat "$WORK/$t.prep.done" 2>/dev/null)" == 0 ]] || log "$t: downloading ahead failed (see $WORK/$t.prep.log); the build fetches what it needs"
    compile "$t"
  done
}
# Balanced by measured cold compiles: kube-apiserver and kubectl (~20
# min) with golangci-lint and fake-gcs-server (~4) against etcd, helm,
# versitygw, promtool and controller-gen (~25).
long=(); rest=()
for t in "${todo[@]}"; do
  case $t in
    kube|golangci-lint|fake-gcs-server) long+=("$t") ;;
    *) rest+=("$t") ;;
  esac
done
# Each lane runs in a subshell of its own, where set -e stops it at the
# first failed build (before that tool is stamped).
# (The ${a[@]+...} form keeps an empty lane working under set -u in old bash.)
lane ${long[@]+"${long[@]}"} &
longlane=$!
# The other lane then compiles the project's own packages, which make
# build, vet and test need next.
( lane ${rest[@]+"${rest[@]}"}
  if [[ ${#long[@]} -gt 0 ]]; then
    (cd "$ROOT" && GOFLAGS= go build ./... >/dev/null 2>&1) || log "compiling the project ahead failed; make build reports why"
  fi ) &
restlane=$!
status=0
wait "$longlane" || status=$?
wait "$restlane" || status=$?
# Every download ends before this script does, so none outlives it.
wait || true
exit "$status"
