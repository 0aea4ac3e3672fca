#!/usr/bin/env bash
# make demo: validate both model packages and show their profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
tt=./bin/tt-model

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "validate the pi0.5 package"
$tt validate models/pi05/tt-model.yaml
step "its serve profiles"
$tt profiles models/pi05/tt-model.yaml
step "validate the RF-DETR package"
$tt validate models/rf-detr/tt-model.yaml
