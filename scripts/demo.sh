#!/usr/bin/env bash
# make demo: package the RF-DETR model, serve it on this machine's CPU (Docker engine when one answers,
# else the bare host; its ready card names the web console's URL), send it a picture, print the
# detections, stop it (DEMO_KEEP=1: once Enter is pressed, so the console can be tried). Run from the
# repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
tt=$PWD/bin/tt-model
export PATH=$PWD/bin:$PATH
repo=Roboflow/rf-detr-base
rev=7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a
work=$(mktemp -d)
# The demo packages models/rf-detr under a name of its own: its server (tt-model-rf-detr-demo-default,
# on the next free port) is never a rf-detr server the user runs, and the demo never stops one.
pkg=rf-detr-demo
served=
cleanup() {
  # A failed step must not leave the server running.
  [ -z "$served" ] || $tt stop $pkg >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "validate the two model packages"
$tt validate models/pi05/tt-model.yaml
$tt validate models/rf-detr/tt-model.yaml

step "weights: $repo@$rev"
# The random checkpoint goes into a Hugging Face cache of the demo's own (DEMO_HF_HOME), never the
# user's: there it would pass for the real weights at the real pin.
demo_hf=${DEMO_HF_HOME:-$PWD/build/demo-hf}
banner() {
  cat <<'MSG'
  ******************************************************************************************
  * RANDOM WEIGHTS: the real RF-DETR-base weights are not in the local Hugging Face cache
  * (and the Hub cannot be reached from here), so a random full-size checkpoint stands in
  * for them at the pinned revision, in a Hugging Face cache of this demo's own (your cache
  * is not touched). The server runs the real forward on it:
  * ITS DETECTIONS ARE MEANINGLESS.
  ******************************************************************************************
MSG
}
random_checkpoint() { go run ./tools/demo --checkpoint "$1"; }
. scripts/demo-weights.sh
demo_weights "$tt" models/rf-detr/tt-model.yaml "$repo" "$rev" "$demo_hf" random_checkpoint
[ -z "$demo_test_weights" ] || banner

step "package models/rf-detr as $pkg (daemonless OCI image)"
sed "s/^name: rf-detr\$/name: $pkg/" models/rf-detr/tt-model.yaml > "$work/tt-model.yaml"
$tt package --container "$work/tt-model.yaml" --out build

step "serve build/$pkg"
$tt stop $pkg >/dev/null 2>&1 || true # an earlier demo's, never the user's rf-detr
served=1
$tt serve build/$pkg --timeout 5m | tee "$work/serve.txt"
url=$(awk '$1 == "url" {print $2; exit}' "$work/serve.txt")

step "POST a sample picture to $url/predict"
go run ./tools/demo --image "$work/sample.png" --predict "$url"

if [ "${DEMO_KEEP:-}" = 1 ]; then
  printf '\n  The server stays up for the console at %s/ : press Enter to stop it.\n' "$url"
  read -r _
fi

step "stop"
$tt stop $pkg
served=
