#!/usr/bin/env bash
# make demo-pi05 (or make demo PI05=1): package the pi0.5 model, serve it on this machine's CPU
# (Docker engine when one answers, else the bare host), send it one robot observation, print the
# action chunk's shape and first rows, stop it. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
tt=$PWD/bin/tt-model
export PATH=$PWD/bin:$PATH
repo=lerobot/pi05_base
rev=b211f3d44c36b6acfcf7ae94a64e8e96f75a64ba
profile=multi-robot
work=$(mktemp -d)
# The demo packages models/pi05 under a name of its own, so it never is, nor stops, a pi05 server the
# user runs.
pkg=pi05-demo
served=
cleanup() {
  # A failed step must not leave the server running.
  [ -z "$served" ] || $tt stop $pkg --profile $profile >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "validate models/pi05/tt-model.yaml"
$tt validate models/pi05/tt-model.yaml

step "weights: $repo@$rev"
demo_hf=${DEMO_HF_HOME:-$PWD/build/demo-hf}
banner() {
  cat <<'MSG'
  ******************************************************************************************
  * RANDOM WEIGHTS: lerobot/pi05_base is not in the local Hugging Face cache (and the Hub
  * cannot be reached from here), so the TINY RANDOM pi0.5 checkpoint of the parity tests
  * (kernels/pi05/testdata/tiny: 56-pixel images, 64-wide layers, a test tokenizer) stands
  * in for it at the pinned revision, in a Hugging Face cache of this demo's own (your cache
  * is not touched). The server runs the real pi0.5 pipeline on it:
  * ITS ACTIONS ARE MEANINGLESS.
  ******************************************************************************************
MSG
}
tiny_checkpoint() {
  cp kernels/pi05/testdata/tiny/model.safetensors kernels/pi05/testdata/tiny/config.json "$1/"
  cp models/pi05/spm/testdata/bpe_tiny.model "$1/tokenizer.model"
  # The marker (hub.TestWeightsFile): the server, serve and the weights commands say these are test weights.
  echo "the tiny random pi0.5 checkpoint of the parity tests (kernels/pi05/testdata/tiny)" > "$1/.tt-model-test-weights"
}
. scripts/demo-weights.sh
demo_weights "$tt" models/pi05/tt-model.yaml "$repo" "$rev" "$demo_hf" tiny_checkpoint
[ -z "$demo_test_weights" ] || banner

step "package models/pi05 as $pkg (daemonless OCI image)"
sed "s/^name: pi05\$/name: $pkg/" models/pi05/tt-model.yaml > "$work/tt-model.yaml"
$tt package --container "$work/tt-model.yaml" --out build

step "serve build/$pkg --profile $profile"
$tt stop $pkg --profile $profile >/dev/null 2>&1 || true # an earlier demo's, never the user's pi05
served=1
$tt serve build/$pkg --profile $profile --timeout 10m | tee "$work/serve.txt"
url=$(awk '$1 == "url" {print $2; exit}' "$work/serve.txt")

step "POST one observation to $url/v1/actions/generations"
go run ./tools/demo --image "$work/frame.png" --actions "$url"

step "stop"
$tt stop $pkg --profile $profile
served=
