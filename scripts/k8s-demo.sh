#!/usr/bin/env bash
# make k8s-demo: the RF-DETR package on a single-node Kubernetes of its own, on this machine: build the
# cluster's binaries once (scripts/kube-apiserver.sh), start the node (tools/kubeserver --node: control
# plane, kubelet, a containerd of its own, a registry), package models/rf-detr, push its image to the
# node's registry, `tt-model k8s apply` it with its cache on a host folder that already holds the pinned
# weights, wait for the pod to be Ready, POST a picture through the Service (kubectl port-forward),
# `tt-model k8s status`, then delete it and stop the node, which undoes every change it made to the host.
# Needs root (the kubelet and containerd), and the packages .ci/run installs. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
tt=$PWD/bin/tt-model
export PATH=$PWD/bin:$PATH
repo=Roboflow/rf-detr-base
rev=7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a
pkg=rf-detr-k8s-demo
instance=$pkg-default
state=$(mktemp -d /tmp/ttkdemo.XXXX)
node_pid= forward_pid=
cleanup() {
  # Whatever failed, the pod goes, then the node (its SIGTERM handler undoes the host changes).
  [ -z "$forward_pid" ] || kill "$forward_pid" 2>/dev/null || true
  if [ -n "$node_pid" ]; then
    [ -z "${KUBECONFIG:-}" ] || $tt k8s delete $instance --volumes >/dev/null 2>&1 || true
    kill -TERM "$node_pid" 2>/dev/null || true
    wait "$node_pid" 2>/dev/null || true
  fi
  # Never remove through a mount the node failed to undo (its folders bind-mount onto themselves).
  if grep -q " $state/" /proc/self/mountinfo; then
    echo "mounts left under $state: not removing it" >&2
  else
    rm -rf "$state"
  fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "the cluster's binaries (built once from the Go module proxy, cached)"
scripts/kube-apiserver.sh build

step "start the node (state in $state)"
go build -o "$state/kubeserver" ./tools/kubeserver
"$state/kubeserver" --node --dir "$state/node" >"$state/node.out" 2>"$state/node.err" &
node_pid=$!
for _ in $(seq 600); do
  grep -q '^export KUBECONFIG=' "$state/node.out" 2>/dev/null && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$state/node.err" >&2; exit 1; }
  sleep 0.5
done
cat "$state/node.out"
export KUBECONFIG
KUBECONFIG=$(sed -n 's/^export KUBECONFIG=//p' "$state/node.out")
registry=$(awk '$1 == "registry:" {print $2; exit}' "$state/node.out")
kubectl get nodes

step "weights: $repo@$rev in the pods' cache folder"
demo_hf=${DEMO_HF_HOME:-$PWD/build/demo-hf}
random_checkpoint() { go run ./tools/demo --checkpoint "$1"; }
. scripts/demo-weights.sh
demo_weights "$tt" models/rf-detr/tt-model.yaml "$repo" "$rev" "$demo_hf" random_checkpoint
[ -z "$demo_test_weights" ] || echo "  RANDOM TEST WEIGHTS: the detections below are meaningless"
hf=${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}
cache=$state/cache
mkdir -p "$cache/hf/hub"
cp -a "$hf/hub/models--Roboflow--rf-detr-base" "$cache/hf/hub/"
# The pods run as uid 1000, group 1000: the weights theirs, and the folder setgid and group-writable,
# so the sub-folders the kubelet creates in it as root stay theirs to write (docs/kubernetes.md).
chown -R 1000:1000 "$cache"
chgrp 1000 "$cache" && chmod 2775 "$cache"

step "package models/rf-detr as $pkg and push its image to the node's registry $registry"
sed "s/^name: rf-detr\$/name: $pkg/" models/rf-detr/tt-model.yaml >"$state/tt-model.yaml"
$tt package --container "$state/tt-model.yaml" --out build
$tt push build/$pkg --registry "$registry/demo" --insecure --no-hub

step "k8s apply"
$tt k8s apply build/$pkg --registry "$registry/demo" --chips none --no-hugepages --cache-host-path "$cache"
kubectl wait --for=condition=Ready pod/$instance-0 --timeout=10m

step "POST a picture through the Service"
kubectl port-forward svc/$instance :8000 >"$state/forward.out" 2>&1 &
forward_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$state/forward.out" | head -1)
  [ -n "$port" ] && break
  sleep 0.2
done
go run ./tools/demo --image "$state/sample.png" --predict "http://127.0.0.1:$port"

step "k8s status"
$tt k8s status $instance

step "k8s delete, stop the node"
$tt k8s delete $instance --volumes
kill "$forward_pid" && forward_pid=
kill -TERM "$node_pid" && wait "$node_pid" || true
node_pid=
echo "the node is stopped and its host changes undone"
