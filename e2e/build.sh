#!/usr/bin/env bash
# Builds the binaries of the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, the Tekton Pipelines controller, helm, cert-manager, Karpenter's kwok
# provider) from their Go modules into a per-user cache outside the repository, and what a real
# node needs (containerd, the CNI plugins, kubelet and kube-proxy, the pause image, Tekton's step
# images, Debian's runc and image tools, the base images the Dockerfile names, the registry the
# nodes pull from). Versions come from e2e/versions.env.
#
#   e2e/build.sh [--force] [etcd|kubernetes|kwok|tekton|helm|certmanager|karpenter|
#                containerd|cni|kubelet|tektonimages|pause|debian|baseimage|registry|realnode ...]
#   (default: all; realnode: the last eight)
#   e2e/build.sh --background   all of them, detached at the lowest CPU and I/O priority, logged
#                               to $CACHE/logs/background.log; returns at once
#   e2e/build.sh --wait         waits for that build; fails as it failed (with its log's tail)
#   e2e/build.sh --stop         stops it
#
# Any number of these may run at once: each component is built under its own lock, and each
# build.sh lists what it has still to build in $CACHE/building/<pid>, so a scenario that needs a
# part not built yet waits for it (e2e/harness/cluster/building.py) rather than skip.
#
# Environment:
#   TEKTON_COSCHEDULER_CACHE    cache root (default ~/.cache/tekton-coscheduler)
#   TEKTON_COSCHEDULER_BIN_DIR  directory of ready-made binaries, used as they are
# A binary already on PATH at the pinned version is also used as it is.
#
# Measured cold on 2 cores / 24 GiB, empty Go caches, in the background of `make test` (wall incl.
# module download; peak RSS of the largest single process), 2026-11-27: etcd 45 s / 0.4 GiB,
# kubernetes (3 binaries) 204 s / 1.9 GiB, kwok 54 s / 0.9 GiB, helm 51 s / 0.8 GiB, certmanager
# (2 binaries) 140 s / 0.9 GiB, tekton 98 s / 1.2 GiB, karpenter 84 s / 1.0 GiB, the real node's
# parts 171 s, the older tekton 104 s; 17 min in all.
# The Go caches grow by several GiB (4.1 GiB of modules and 6.1 GiB of build cache here, shared
# with other work). A warm run does nothing and takes well under a second.
set -euo pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$E2E_DIR/versions.env"
# E2E_<KEY> in the environment overrides a pin for this run (make e2e-matrix builds each release).
for key in $(sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' "$E2E_DIR/versions.env"); do
  override=E2E_$key
  if [ -n "${!override:-}" ]; then printf -v "$key" '%s' "${!override}"; fi
done

CACHE=${TEKTON_COSCHEDULER_CACHE:-$HOME/.cache/tekton-coscheduler}
BIN_ROOT=$CACHE/bin
LOG_DIR=$CACHE/logs
SRC_ROOT=$CACHE/src
# GOTOOLCHAIN=local: a "go 1.2x" line newer than ours must fail, not download a toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
mkdir -p "$BIN_ROOT" "$LOG_DIR" "$SRC_ROOT"

FORCE=0
MODE=build
COMPONENTS=()
REALNODE=(debian containerd cni kubelet tektonimages pause baseimage registry)
for arg in "$@"; do
  case $arg in
    --force) FORCE=1 ;;
    --background) MODE=background ;;
    --wait) MODE=wait ;;
    --stop) MODE=stop ;;
    etcd | kubernetes | kwok | tekton | helm | certmanager | karpenter) COMPONENTS+=("$arg") ;;
    containerd | cni | kubelet | tektonimages | pause | debian | baseimage | registry) COMPONENTS+=("$arg") ;;
    realnode) COMPONENTS+=("${REALNODE[@]}") ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
ALL=0
[ ${#COMPONENTS[@]} -gt 0 ] || {
  ALL=1
  # In the order the scenarios first need them (e2e/tests/conftest.py orders them so), for a
  # build in the background while they run. helm before kwok: the chart's rendering scenarios
  # need helm alone, and run while kwok is built.
  COMPONENTS=(etcd kubernetes helm kwok certmanager tekton karpenter)
  # The real node's parts need root (apt-get; the scenarios: links, mounts, cgroups). Without
  # it they are left out, and the realnode scenarios skip saying why.
  if [ "$(id -u)" = 0 ]; then COMPONENTS+=("${REALNODE[@]}")
  else echo "not root: the real node's parts are left out (e2e/build.sh realnode as root)" >&2; fi
}

START_ALL=$(date +%s)
log() { printf '[%s +%4ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - START_ALL))" "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }

# --background, --wait, --stop: the build of everything, detached, and what follows it.
BACKGROUND_PID=$CACHE/background.pid
BACKGROUND_STATUS=$CACHE/background.status
BACKGROUND_LOG=$LOG_DIR/background.log
background_alive() {
  local pid
  pid=$(cat "$BACKGROUND_PID" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
case $MODE in
  background)
    [ $ALL = 1 ] || die "--background builds everything; it takes no component"
    if background_alive; then log "a background build runs already (pid $(cat "$BACKGROUND_PID"))"; exit 0; fi
    rm -f "$BACKGROUND_STATUS"
    # Its own session, so it outlives no pipe of the caller's; with the scheduler's autogroups
    # (one per session) a nice value alone would not yield the CPU to the caller's session, so
    # the session's own priority is lowered too (/proc/self/autogroup).
    setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true
      rc=0; nice -n 19 ionice -c 3 bash "$1" || rc=$?
      echo "$rc" >"$2"' background "$0" "$BACKGROUND_STATUS" >"$BACKGROUND_LOG" 2>&1 </dev/null &
    echo $! >"$BACKGROUND_PID"
    log "building everything in the background (pid $!, log $BACKGROUND_LOG)"
    exit 0 ;;
  wait)
    while background_alive; do sleep 2; done
    status=$(cat "$BACKGROUND_STATUS" 2>/dev/null || echo "unknown (no $BACKGROUND_STATUS)")
    if [ "$status" != 0 ]; then
      tail -n 30 "$BACKGROUND_LOG" >&2 || true
      die "the background build failed (exit $status); its log: $BACKGROUND_LOG"
    fi
    log "the background build succeeded: $(grep -c ': built in ' "$BACKGROUND_LOG" || true) components built, log $BACKGROUND_LOG"
    exit 0 ;;
  stop)
    if background_alive; then kill -- -"$(cat "$BACKGROUND_PID")" 2>/dev/null || true; log "stopped the background build"; fi
    exit 0 ;;
esac

command -v go >/dev/null || die "go is not on PATH"
log "go: $(go version); cache: $CACHE"

version_of() { # component -> pinned version
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    kubernetes) echo "$KUBERNETES_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    tekton) echo "$TEKTON_PIPELINE_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    certmanager) echo "$CERT_MANAGER_VERSION" ;;
    karpenter) echo "$KARPENTER_VERSION" ;;
    containerd) echo "$CONTAINERD_VERSION" ;;
    cni) echo "$CNI_PLUGINS_VERSION" ;;
    kubelet) echo "$KUBERNETES_VERSION" ;;
    tektonimages) echo "$TEKTON_PIPELINE_VERSION" ;;
    pause) echo "$PAUSE_VERSION-$KUBERNETES_VERSION" ;;
    debian) echo "$HOST_SUITE" ;;
    baseimage) echo "$BASE_SUITE-$(echo "$BASE_IMAGE $RUNTIME_BASE_IMAGE" | tr '/: ' '___')" ;;
    registry) echo "$REGISTRY_VERSION" ;;
  esac
}
binaries_of() {
  case $1 in
    etcd) echo etcd ;;
    kubernetes) echo kube-apiserver kube-controller-manager kube-scheduler ;;
    kwok) echo kwok ;;
    tekton) echo tekton-controller ;;
    helm) echo helm ;;
    certmanager) echo cert-manager-controller cert-manager-cainjector ;;
    karpenter) echo karpenter-kwok ;;
    containerd) echo containerd ctr containerd-shim-runc-v2 ;;
    cni) echo bridge loopback host-local portmap ;;
    kubelet) echo kubelet kube-proxy ;;
    tektonimages) echo entrypoint.tar nop.tar workingdirinit.tar sidecarlogresults.tar shell.tar busybox.tar ;;
    pause) echo pause pause.tar ;;
    debian) echo debian-packages ;;
    baseimage) echo base.tar runtime.tar ;;
    registry) echo registry ;;
  esac
}
dir_of() { echo "$BIN_ROOT/$1-$(version_of "$1")"; }

# Does binary $2 report the pinned version of component $1?
at_version() {
  local comp=$1 bin=$2 v
  v=$(version_of "$comp")
  case $comp in
    etcd) "$bin" --version 2>/dev/null | grep -q "etcd Version: ${v#v}$" ;;
    kubernetes) "$bin" --version 2>/dev/null | grep -q "Kubernetes ${v}$" ;;
    kwok) "$bin" --version 2>/dev/null | grep -q "${v}" ;;
    # The controller has no --version flag; the build info names the module and its version.
    tekton) go version -m "$bin" 2>/dev/null | grep -qE "github.com/tektoncd/pipeline[[:space:]]+${v}([[:space:]]|$)" ;;
    helm) "$bin" version --short 2>/dev/null | grep -q "^${v}" ;;
    certmanager) go version -m "$bin" 2>/dev/null | grep -qE "github.com/cert-manager/cert-manager[[:space:]]+${v}([[:space:]]|$)" ;;
    karpenter) go version -m "$bin" 2>/dev/null | grep -qE "sigs.k8s.io/karpenter[[:space:]]+${v}([[:space:]]|$)" ;;
    containerd) "$bin" --version 2>/dev/null | grep -q " ${v} " ;;
    kubelet) "$bin" --version 2>/dev/null | grep -q "Kubernetes ${v}$" ;;
    registry) go version -m "$bin" 2>/dev/null | grep -qE "github.com/distribution/distribution/v3[[:space:]]+${v}([[:space:]]|$)" ;;
    *) return 1 ;;  # images and packages: the cache's stamp only
  esac
}

# Ready-made binaries (TEKTON_COSCHEDULER_BIN_DIR, the cache's stamp, PATH) mean no work.
already_there() {
  local comp=$1 b found dir
  dir=$(dir_of "$comp")
  if [ "$comp" = debian ]; then  # what Debian's packages put on PATH, whatever the cache says
    # One tool at a time: `command -v a b` succeeds when any of them is found.
    for b in runc buildah mmdebstrap iptables skopeo tcpdump conntrack; do command -v "$b" >/dev/null || return 1; done
    [ -x /bin/busybox ] || return 1
    log "debian: runc, buildah, mmdebstrap, iptables, skopeo, tcpdump, conntrack and busybox-static installed"; return 0
  fi
  if [ -n "${TEKTON_COSCHEDULER_BIN_DIR:-}" ]; then
    found=1
    for b in $(binaries_of "$comp"); do [ -s "$TEKTON_COSCHEDULER_BIN_DIR/$b" ] || found=0; done
    if [ $found = 1 ]; then log "$comp: using binaries in TEKTON_COSCHEDULER_BIN_DIR=$TEKTON_COSCHEDULER_BIN_DIR"; return 0; fi
  fi
  if [ $FORCE = 0 ] && [ -f "$dir/.stamp" ]; then
    found=1
    for b in $(binaries_of "$comp"); do [ -s "$dir/$b" ] || found=0; done
    if [ $found = 1 ]; then log "$comp $(version_of "$comp"): up to date in $dir, nothing to do ($(tr '\n' ' ' <"$dir/.stamp"))"; return 0; fi
  fi
  found=1
  for b in $(binaries_of "$comp"); do
    if ! command -v "$b" >/dev/null || ! at_version "$comp" "$(command -v "$b")"; then found=0; fi
  done
  if [ $found = 1 ]; then log "$comp: using $(binaries_of "$comp") from PATH (already $(version_of "$comp"))"; return 0; fi
  return 1
}

write_etcd_wrapper() { # dir
  cat >"$1/go.mod" <<EOF
module tekton-coscheduler.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$1/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
}

# k8s.io/kubernetes cannot be `go install`ed (relative replaces of its staging modules); a wrapper
# module requires it and maps each staging module to its published v0.X.Y twin. The list of
# staging modules comes from the proxy's copy of the kubernetes go.mod: it changes between minors.
write_kubernetes_wrapper() { # dir [command ...] (default: the control plane's three)
  local dir=$1 gomod staging cmd
  shift
  [ $# -gt 0 ] || set -- kube-apiserver kube-controller-manager kube-scheduler
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || die "could not download the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"
  staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")
  [ -n "$staging" ] || die "no staging replaces found in $gomod"
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  {
    echo "module tekton-coscheduler.local/kubernetes"
    echo
    grep -E '^go [0-9]' "$gomod"
    grep -E '^godebug ' "$gomod" || true
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $staging_version"; done
    echo ")"
  } >"$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } >"$dir/tools.go"
  log "kubernetes: wrapper module with $(echo "$staging" | wc -w) staging replaces at $staging_version"
}

# Not `go install ...@version`: that looks up the module's version list for deprecation notices,
# and proxy.golang.org answers 403 for github.com/tektoncd/pipeline/@v/list. A wrapper module
# resolves to the same versions (its only requirement is Tekton's own, tidy, go.mod).
write_tekton_wrapper() { # dir
  cat >"$1/go.mod" <<EOF
module tekton-coscheduler.local/tekton

go 1.26.4

require github.com/tektoncd/pipeline $TEKTON_PIPELINE_VERSION
EOF
  local replaces_var pair
  replaces_var=TEKTON_REPLACES_$(echo "$TEKTON_PIPELINE_VERSION" | tr . _)
  for pair in ${!replaces_var:-}; do
    printf '\nreplace %s => %s %s\n' "${pair%%=*}" "${pair%%=*}" "${pair#*=}" >>"$1/go.mod"
  done
  cat >"$1/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/tektoncd/pipeline/cmd/controller"
EOF
}

# A wrapper module that requires $2 at $3 and imports the packages $4... (their commands).
write_wrapper() { # dir module version package...
  local dir=$1 module=$2 version=$3 pkg
  shift 3
  printf 'module tekton-coscheduler.local/%s\n\ngo 1.26.0\n\nrequire %s %s\n' \
    "$(basename "$dir")" "$module" "$version" >"$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for pkg in "$@"; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } >"$dir/tools.go"
}

write_certmanager_wrapper() { # dir
  cat >"$1/go.mod" <<EOF
module tekton-coscheduler.local/certmanager

go 1.26.0

require github.com/cert-manager/cert-manager $CERT_MANAGER_VERSION
EOF
  cat >"$1/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
	_ "github.com/cert-manager/cert-manager/cmd/controller"
)
EOF
}

write_karpenter_wrapper() { # dir
  cat >"$1/go.mod" <<EOF
module tekton-coscheduler.local/karpenter

go 1.26.0

require sigs.k8s.io/karpenter $KARPENTER_VERSION

replace sigs.k8s.io/karpenter => ./karpenter
EOF
  cat >"$1/tools.go" <<'EOF'
//go:build tools

package tools

import _ "sigs.k8s.io/karpenter/kwok"
EOF
}

# The name a real node's image of ours goes by (e2e/harness/cluster/realnode.py names them alike).
image_name() { # what version
  echo "e2e.tekton-coscheduler.dev/$1:$2"
}

kubernetes_ldflags() {
  local v=$KUBERNETES_VERSION major minor date flags="-s -w" pkg
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # Unstamped binaries report v0.0.0-master+$Format:%H$, which Tekton's version check rejects.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=0000000000000000000000000000000000000000"
  done
  echo "$flags"
}

# Runs "$@" in its own process group, logs to $LOGFILE, prints a heartbeat and measures wall time,
# peak RSS of the biggest single process (GNU time) and sampled peak RSS of the whole tree.
run_measured() { # comp cmd...
  local comp=$1; shift
  local timefile=$LOG_DIR/$comp.time peak=0 rss started pid last=0 now
  started=$(date +%s)
  if [ -x /usr/bin/time ]; then
    setsid -w /usr/bin/time -v -o "$timefile" "$@" >>"$LOGFILE" 2>&1 &
  else
    setsid -w "$@" >>"$LOGFILE" 2>&1 &
  fi
  pid=$!
  CHILD=$pid
  while kill -0 "$pid" 2>/dev/null; do
    # A build of ours at a lower priority (--background) keeps it in the session setsid made for
    # the command: the scheduler weighs each session's autogroup alike, whatever its nice value.
    [ "$(nice)" = 0 ] || echo "$(nice)" >"/proc/$pid/autogroup" 2>/dev/null || true
    rss=$(ps -o rss= -g "$pid" 2>/dev/null | awk '{s += $1} END {print s + 0}')
    [ "$rss" -gt "$peak" ] && peak=$rss
    now=$(date +%s)
    if [ $((now - last)) -ge 30 ]; then
      last=$now
      log "$comp: building... $((now - started))s, $(grep -c . "$LOGFILE" || true) log lines, tree RSS now $((rss / 1024)) MiB (peak $((peak / 1024)) MiB)"
    fi
    sleep 2
  done
  local rc=0
  wait "$pid" || rc=$?
  CHILD=""
  BUILD_SECONDS=$(($(date +%s) - started))
  BUILD_PEAK_TREE_MIB=$((peak / 1024))
  BUILD_MAXRSS_MIB=unknown
  if [ -f "$timefile" ]; then
    BUILD_MAXRSS_MIB=$(awk -F': ' '/Maximum resident set size/ {print int($2 / 1024)}' "$timefile")
  fi
  return $rc
}

build() { # comp
  local comp=$1 version dir src tmpbin module local_go
  version=$(version_of "$comp")
  dir=$(dir_of "$comp")
  src=$SRC_ROOT/$comp-$version
  LOGFILE=$LOG_DIR/build-$comp-$version-$(date +%Y%m%dT%H%M%S).log
  mkdir -p "$src" "$dir"
  rm -f "$dir/.stamp"
  log "$comp $version: building (full go output in $LOGFILE)"
  case $comp in
    etcd)
      write_etcd_wrapper "$src"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "etcd: go mod tidy failed, see $LOGFILE"
      run_measured etcd sh -c "cd '$src' && go build -v -trimpath -ldflags '-s -w' -o '$dir/etcd' ." ||
        die "etcd: build failed, see $LOGFILE"
      ;;
    kubernetes)
      write_kubernetes_wrapper "$src"
      log "kubernetes: resolving modules (go mod tidy)"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "kubernetes: go mod tidy failed, see $LOGFILE"
      run_measured kubernetes sh -c "cd '$src' && go build -v -trimpath -ldflags '$(kubernetes_ldflags)' -o '$dir/' \
          k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler" ||
        die "kubernetes: build failed, see $LOGFILE"
      ;;
    kwok)
      run_measured kwok env GOBIN="$dir" go install -v -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$version" ||
        die "kwok: build failed, see $LOGFILE"
      ;;
    tekton)
      write_tekton_wrapper "$src"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "tekton: go mod tidy failed, see $LOGFILE"
      run_measured tekton sh -c "cd '$src' && go build -v -trimpath -ldflags '-s -w' -o '$dir/tekton-controller' \
          github.com/tektoncd/pipeline/cmd/controller" || die "tekton: build failed, see $LOGFILE"
      ;;
    helm)
      # Unstamped, helm says v3.x-dev; the chart tests check the version they run with.
      run_measured helm env GOBIN="$dir" go install -v -trimpath \
          -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" "helm.sh/helm/v3/cmd/helm@$version" ||
        die "helm: build failed, see $LOGFILE"
      ;;
    certmanager)
      write_certmanager_wrapper "$src"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "certmanager: go mod tidy failed, see $LOGFILE"
      run_measured certmanager sh -c "cd '$src' && \
          go build -v -trimpath -ldflags '-s -w' -o '$dir/cert-manager-controller' github.com/cert-manager/cert-manager/cmd/controller && \
          go build -v -trimpath -ldflags '-s -w' -o '$dir/cert-manager-cainjector' github.com/cert-manager/cert-manager/cmd/cainjector" ||
        die "certmanager: build failed, see $LOGFILE"
      ;;
    karpenter)
      # Its go.mod asks for go 1.26.9, newer than may be installed. Built from a copy of the
      # module whose go line names the installed Go (the same language, a patch apart): a
      # toolchain fetched for it compiled every shared dependency again, none of it from the
      # build cache the other components filled (512 s on 11-26; built so on 11-27, 248 s from
      # an empty build cache, 185 s after the others).
      local_go=$(go env GOVERSION); local_go=${local_go#go}
      # Downloaded and unpacked, then refused for its go line: the copy is what is built.
      (cd "$src" && go mod download "sigs.k8s.io/karpenter@$version") >>"$LOGFILE" 2>&1 || true
      module="$(go env GOMODCACHE)/sigs.k8s.io/karpenter@$version"
      [ -f "$module/go.mod" ] || die "karpenter: go mod download failed, see $LOGFILE"
      rm -rf "$src/karpenter" && cp -r "$module" "$src/karpenter" && chmod -R u+w "$src/karpenter"
      sed -i -E "s/^go [0-9.]+\$/go $local_go/; /^toolchain /d" "$src/karpenter/go.mod"
      write_karpenter_wrapper "$src"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "karpenter: go mod tidy failed, see $LOGFILE"
      run_measured karpenter sh -c "cd '$src' && \
          go build -v -trimpath -ldflags '-s -w' -o '$dir/karpenter-kwok' sigs.k8s.io/karpenter/kwok" ||
        die "karpenter: build failed, see $LOGFILE"
      ;;
    debian)
      # From Debian's packages (apt-get, as root): runc (crun cannot run on this host's hybrid
      # cgroups), buildah and mmdebstrap (the images), busybox-static (the steps' shell image),
      # iptables (kube-proxy), skopeo (pushes the images into the lab's registry), tcpdump and
      # conntrack (a webhook rollout's timeline: e2e/harness/rollout_trace.py).
      run_measured debian sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
          runc buildah mmdebstrap busybox-static iptables skopeo tcpdump conntrack" ||
        die "debian: apt-get failed, see $LOGFILE"
      echo "$HOST_SUITE" >"$dir/debian-packages"
      ;;
    containerd)
      write_wrapper "$src" github.com/containerd/containerd/v2 "$version" \
        github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "containerd: go mod tidy failed, see $LOGFILE"
      run_measured containerd sh -c "cd '$src' && go build -v -trimpath \
          -ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=$version' -o '$dir/' \
          github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
          github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2" || die "containerd: build failed, see $LOGFILE"
      ;;
    cni)
      write_wrapper "$src" github.com/containernetworking/plugins "$version" \
        github.com/containernetworking/plugins/plugins/main/bridge \
        github.com/containernetworking/plugins/plugins/main/loopback \
        github.com/containernetworking/plugins/plugins/ipam/host-local \
        github.com/containernetworking/plugins/plugins/meta/portmap
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "cni: go mod tidy failed, see $LOGFILE"
      run_measured cni sh -c "cd '$src' && go build -v -trimpath -ldflags '-s -w' -o '$dir/' \
          github.com/containernetworking/plugins/plugins/main/bridge \
          github.com/containernetworking/plugins/plugins/main/loopback \
          github.com/containernetworking/plugins/plugins/ipam/host-local \
          github.com/containernetworking/plugins/plugins/meta/portmap" || die "cni: build failed, see $LOGFILE"
      ;;
    kubelet)
      write_kubernetes_wrapper "$src" kubelet kube-proxy
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "kubelet: go mod tidy failed, see $LOGFILE"
      run_measured kubelet sh -c "cd '$src' && go build -v -trimpath -ldflags '$(kubernetes_ldflags)' -o '$dir/' \
          k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy" || die "kubelet: build failed, see $LOGFILE"
      ;;
    tektonimages)
      # Tekton's images (ko puts each command at /ko-app/<name>), and busybox as the shell image
      # and the steps' image (Debian's busybox-static: e2e/build.sh debian).
      write_tekton_wrapper "$src"
      local cmds="entrypoint nop workingdirinit sidecarlogresults" cmd pkgs=""
      for cmd in $cmds; do pkgs+=" github.com/tektoncd/pipeline/cmd/$cmd"; done
      printf '//go:build tools\n\npackage tools\n\nimport (\n%s)\n' \
        "$(for cmd in $cmds; do printf '\t_ "github.com/tektoncd/pipeline/cmd/%s"\n' "$cmd"; done)" >"$src/tools.go"
      (cd "$src" && go mod tidy) >>"$LOGFILE" 2>&1 || die "tektonimages: go mod tidy failed, see $LOGFILE"
      run_measured tektonimages sh -c "cd '$src' && mkdir -p bin && go build -v -trimpath -ldflags '-s -w' -o bin/ $pkgs" ||
        die "tektonimages: build failed, see $LOGFILE"
      for cmd in $cmds; do
        python3 "$E2E_DIR/harness/cluster/images.py" "$(image_name "$cmd" "$version")" "$dir/$cmd.tar" \
          "$src/bin/$cmd=/ko-app/$cmd" --entrypoint "/ko-app/$cmd" >>"$LOGFILE" || die "tektonimages: $cmd image"
      done
      for cmd in shell busybox; do
        python3 "$E2E_DIR/harness/cluster/images.py" "$(image_name "$cmd" "$version")" "$dir/$cmd.tar" \
          --busybox /bin/busybox >>"$LOGFILE" || die "tektonimages: $cmd image"
      done
      ;;
    pause)
      # Kubernetes' own pause, from the source in its module, at the chart's balloon image name.
      local kdir
      kdir=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      [ -f "$kdir/build/pause/linux/pause.c" ] || die "pause: no build/pause/linux/pause.c in $kdir"
      run_measured pause gcc -Os -static -Wall -Werror -DVERSION="v$PAUSE_VERSION-tekton-coscheduler-e2e" \
        -o "$dir/pause" "$kdir/build/pause/linux/pause.c" || die "pause: gcc failed, see $LOGFILE"
      python3 "$E2E_DIR/harness/cluster/images.py" "registry.k8s.io/pause:$PAUSE_VERSION" "$dir/pause.tar" \
        "$dir/pause=/pause" --entrypoint /pause --user 65535:65535 >>"$LOGFILE" || die "pause: image"
      ;;
    baseimage)
      # The two bases the Dockerfile's FROM lines name, from Debian's packages (BASE_SUITE).
      # base.tar, the build stage's (BASE_IMAGE, the official Python image): python3 with venv
      # (Debian's python3 and pip stand in for the official image's own build of the same
      # minor), no docs, man pages or locales.
      run_measured baseimage mmdebstrap --variant=minbase --mode=root --format=tar \
        --include=python3,python3-venv,python-is-python3 \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$BASE_SUITE" "$dir/base.tar" http://deb.debian.org/debian || die "baseimage: mmdebstrap failed, see $LOGFILE"
      local seconds=$BUILD_SECONDS
      # runtime.tar, the image's own (RUNTIME_BASE_IMAGE, distroless's python3): the packages
      # distroless assembles for it (its static, base, cc and python3 config.bzl), unpacked
      # without maintainer scripts as distroless does (no shell, no dpkg: apt's resolution adds
      # a few small ones, debconf, mawk and openssl, so the lab's base weighs a little more than
      # the real one), its users (root, nobody, nonroot 65532, as common/BUILD.bazel), /tmp,
      # the python and python3 links, and the CA bundle update-ca-certificates would have made.
      # Its standard library is not byte-compiled (Debian compiles it in a maintainer script).
      run_measured baseimage mmdebstrap --variant=extract --mode=root --format=tar \
        --include="$(echo "$DISTROLESS_PYTHON_PACKAGES" | tr ' ' ',')" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --extract-hook='printf "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" >"$1/etc/passwd"' \
        --extract-hook='printf "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n" >"$1/etc/group"' \
        --extract-hook='printf "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\nethers: files\nrpc: files\n" >"$1/etc/nsswitch.conf"' \
        --extract-hook='mkdir -p "$1/home/nonroot" && chown 65532:65532 "$1/home/nonroot" && chmod 0700 "$1/home/nonroot" && chmod 1777 "$1/tmp"' \
        --extract-hook='ln -sf python3.13 "$1/usr/bin/python3" && ln -sf python3.13 "$1/usr/bin/python"' \
        --extract-hook='mkdir -p "$1/etc/ssl/certs" && cat "$1"/usr/share/ca-certificates/mozilla/*.crt >"$1/etc/ssl/certs/ca-certificates.crt"' \
        "$BASE_SUITE" "$dir/runtime.tar" http://deb.debian.org/debian || die "baseimage: mmdebstrap (runtime) failed, see $LOGFILE"
      BUILD_SECONDS=$((seconds + BUILD_SECONDS))
      ;;
    registry)
      # The registry the real nodes pull from (distribution, the reference implementation),
      # stamped with its version as its release builds are.
      run_measured registry env GOBIN="$dir" go install -v -trimpath \
          -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$version" \
          "github.com/distribution/distribution/v3/cmd/registry@$version" || die "registry: build failed, see $LOGFILE"
      ;;
  esac
  {
    echo "version=$version"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "seconds=$BUILD_SECONDS"
    echo "max_process_rss_mib=$BUILD_MAXRSS_MIB"
    echo "peak_tree_rss_mib=$BUILD_PEAK_TREE_MIB"
  } >"$dir/.stamp"
  printf '%s\t%s\t%s\t%ss\tmax-process-rss=%sMiB\tpeak-tree-rss=%sMiB\n' "$(date -u +%FT%TZ)" "$comp" "$version" \
    "$BUILD_SECONDS" "$BUILD_MAXRSS_MIB" "$BUILD_PEAK_TREE_MIB" >>"$LOG_DIR/build-times.tsv"
  log "$comp $version: built in ${BUILD_SECONDS}s (largest process ${BUILD_MAXRSS_MIB} MiB, whole build peak ~${BUILD_PEAK_TREE_MIB} MiB): $(cd "$dir" && ls | tr '\n' ' ')"
}

# What this build has still to do, "component version" a line, for the scenarios to wait on.
PLAN=$CACHE/building/$$
mkdir -p "$CACHE/building"
# A build's command runs in a session of its own (run_measured): stopped with the build.
CHILD=""
trap 'rm -f "$PLAN"; [ -z "$CHILD" ] || kill -- -"$CHILD" 2>/dev/null || true' EXIT
trap 'exit 143' TERM INT
{
  for comp in "${COMPONENTS[@]}"; do echo "$comp $(version_of "$comp")"; done
  [ $ALL = 0 ] || [ "$TEKTON_UPGRADE_FROM" = "$TEKTON_PIPELINE_VERSION" ] || echo "tekton $TEKTON_UPGRADE_FROM"
} >"$PLAN"

one() { # comp: built unless it is there, by one build.sh at a time; then off the plan
  local fd line
  exec {fd}>"$BIN_ROOT/.$(basename "$(dir_of "$1")").lock"
  flock "$fd"
  already_there "$1" || build "$1"
  exec {fd}>&-
  line="$1 $(version_of "$1")"
  grep -vxF "$line" "$PLAN" >"$PLAN.new" || true
  mv "$PLAN.new" "$PLAN"
}

for comp in "${COMPONENTS[@]}"; do
  one "$comp"
done
# The upgrade scenarios (pytest -m upgrade) start from an older Tekton: part of "all".
if [ $ALL = 1 ] && [ "$TEKTON_UPGRADE_FROM" != "$TEKTON_PIPELINE_VERSION" ]; then
  TEKTON_PIPELINE_VERSION=$TEKTON_UPGRADE_FROM
  one tekton
fi
log "done in $(($(date +%s) - START_ALL))s; binaries under $BIN_ROOT"
