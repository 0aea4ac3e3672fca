#!/usr/bin/env bash
# Builds the root file system of the "Python test base": a minimal Debian bookworm with python3,
# FastAPI and uvicorn (and pip), the base image the tests of the Python package kinds
# (http-server, tt-dit-server, vllm-*) build on. No registry is involved: debootstrap fetches the
# packages from this machine's Debian mirror; the tests turn the tarball into an image with go-containerregistry
# and load it into the Docker engine themselves (builder/pybase_test.go).
#
# Usage: scripts/python-base-rootfs.sh [CACHE_DIR]     (needs root and debootstrap)
# Prints the path of the rootfs tarball as the last line of stdout.
#
# Cache: the tarball is CACHE_DIR/python-base-<12 hex of this file's sha256>.tar (CACHE_DIR defaults
# to ${XDG_CACHE_HOME:-~/.cache}/tt-model-test). Every input of the image (suite, package list,
# the tidying below) is written in this file, so an edit makes a new name and an unchanged file
# finds its tarball and exits at once. Mtimes are kept: Python's byte code checks them.
set -euo pipefail

suite=bookworm
# python3 + the HTTP stack of kind tt-dit-server from Debian (not PyPI); python-is-python3 gives
# the `python` the kinds' launchers call; python3-pip lets install_engine.sh install a local wheel;
# git is what the vLLM kinds' install steps clone with.
packages=python3,python-is-python3,python3-fastapi,python3-uvicorn,python3-pip,git

self=$(readlink -f "$0")
key=$(sha256sum "$self" | cut -c1-12)
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/tt-model-test}
out=$cache/python-base-$key.tar

if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache"
# Two test runs that both miss the cache build it once.
exec 9>"$cache/python-base.lock"
flock 9
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "python-base-rootfs: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "python-base-rootfs: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/tmp}/python-base-root.XXXXXX")
trap 'rm -rf "$root" "$root.log"' EXIT

# The mirror is where the packages come from, not what they are: this machine's apt source
# (scripts/debian-mirror.sh; TT_DEBIAN_MIRROR overrides it), and not part of the cache key.
mirror=$("$(dirname "$self")/debian-mirror.sh" "$suite")
echo "python-base-rootfs: debootstrap $suite ($packages) from $mirror (a few minutes, once)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2
  exit 1
}

# What an image does not need: package caches and lists, documentation, the machine id (a
# container is a new machine each time).
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*
: >"$root/etc/machine-id"
# Byte code is written at first import otherwise: compile it now, as root, once.
chroot "$root" python3 -m compileall -q /usr/lib/python3 >/dev/null 2>&1 || true

tar -C "$root" --numeric-owner --sort=name -cf "$out.partial" .
mv "$out.partial" "$out"
echo "python-base-rootfs: wrote $out ($(du -h "$out" | cut -f1))" >&2
echo "$out"
