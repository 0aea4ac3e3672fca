#!/usr/bin/env bash
# Real Kubernetes for testing `tt-model k8s`: the binaries of a single-node cluster, built from the Go
# module proxy, and a way to run them by hand.
#
#   scripts/kube-apiserver.sh build   build kube-apiserver, kube-scheduler, kube-controller-manager, kubelet
#                                     and etcd once (cached), print their folder
#   scripts/kube-apiserver.sh serve [--node] [--dir D]  build if needed, start etcd + kube-apiserver on free
#                                     loopback ports (with --node also the controllers, a containerd of its
#                                     own, a kubelet and a registry: pods run; needs root), print the
#                                     KUBECONFIG to use, run until Ctrl-C (then stop everything and undo its
#                                     host changes; the state is removed unless --dir keeps it in D)
#
# The binaries depend only on the two versions below, so they are cached outside the repository under
# ${TT_KUBE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/tt-model/k8s}/kube-<K>-etcd-<E>/ and a second run reuses them.
# A cold build takes ~8 min (kube-apiserver) + ~1-2 min for each other command (they share most of its
# packages) + ~2.5 min (etcd) on 2 idle cores. The Go tests find the binaries in the same folder
# (internal/testing/kubebin); they skip (or fail under TT_REQUIRE=kube-apiserver, kube-scheduler, kube-node)
# when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Keep in step with internal/testing/kubebin (KubeVersion, EtcdVersion).
kube_version=v1.37.2
etcd_version=v3.6.16
# k8s.io/kubernetes replaces its staging modules by ./staging/src/...; outside its repository they are the
# published modules at v0.<minor>.<patch>.
staging_version=v0${kube_version#v1}
# The control plane (API server, scheduler, controller manager) and the node agent: enough for a
# single-node cluster that starts real pods (internal/testing/kubenode). kube-proxy is not built:
# the tests reach a Service through `kubectl port-forward`, which needs no proxy.
kube_commands="kube-apiserver kube-scheduler kube-controller-manager kubelet"

cache_root=${TT_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tt-model/k8s}
bin_dir=$cache_root/kube-$kube_version-etcd-$etcd_version

# build_tool NAME MODULE VERSION PACKAGE LDFLAGS [REPLACES...]: build PACKAGE from a throw-away module
# that requires MODULE at VERSION (with the given replace lines) into $bin_dir/NAME.
build_tool() {
  local name=$1 module=$2 version=$3 pkg=$4 ldflags=$5
  shift 5
  if [ -x "$bin_dir/$name" ]; then
    return
  fi
  echo "== building $name ($module $version): a few minutes on 2 cores, once per machine" >&2
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/tt-model-kube-build.XXXXXX")
  # shellcheck disable=SC2064 # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  {
    echo "module tt-model-kube-build"
    echo "go 1.26"
    echo "require $module $version"
    for r in "$@"; do echo "replace $r"; done
  } >"$work/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$work/tools.go"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$work/$name" "$pkg")
  mkdir -p "$bin_dir"
  # Rename into place so a killed build never leaves a half-written binary that looks cached.
  mv "$work/$name" "$bin_dir/$name.tmp" && mv "$bin_dir/$name.tmp" "$bin_dir/$name"
  echo "== $bin_dir/$name" >&2
}

build() {
  local c missing=0
  for c in $kube_commands; do [ -x "$bin_dir/$c" ] || missing=1; done
  if [ $missing = 1 ]; then
    # The staging modules are the lines `k8s.io/X => ./staging/src/k8s.io/X` of its go.mod, read
    # through go itself (GOPROXY, GOFLAGS and GONOSUMDB apply as for any module).
    local replaces=() staging gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$kube_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")
    if [ -z "$staging" ]; then
      echo "no staging modules in k8s.io/kubernetes@$kube_version's go.mod ($gomod)" >&2
      exit 1
    fi
    for m in $staging; do replaces+=("$m => $m $staging_version"); done
    # Stamp the version /version reports, as Kubernetes' own build does (hack/lib/version.sh).
    local minor=${kube_version#v1.}
    minor=${minor%%.*}
    local v=k8s.io/component-base/version
    local stamp="-X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
    # The API server comes first: the other commands share most of its packages, so they compile in
    # a fraction of its time from the same build cache.
    for c in $kube_commands; do
      build_tool "$c" k8s.io/kubernetes "$kube_version" "k8s.io/kubernetes/cmd/$c" "$stamp" "${replaces[@]}"
    done
  fi
  # etcd's server module root is the etcd main package.
  build_tool etcd go.etcd.io/etcd/server/v3 "$etcd_version" go.etcd.io/etcd/server/v3 ""
  echo "$bin_dir"
}

case "${1:-}" in
build)
  build
  ;;
serve)
  build >/dev/null
  shift
  TT_KUBE_BIN="$bin_dir" exec go run ./tools/kubeserver "$@"
  ;;
*)
  sed -n '2,17s/^# \{0,1\}//p' "$0" >&2
  exit 2
  ;;
esac
