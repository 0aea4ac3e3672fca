#!/usr/bin/env bash
# Prints the Debian mirror this machine's apt fetches SUITE's main component from, for the
# debootstrap scripts (python-base-rootfs.sh, systemd-testhost-image.sh): a host behind an internal
# mirror or a caching proxy builds from its own, and no mirror host is written in this tree.
#
# Usage: scripts/debian-mirror.sh SUITE       (or source it and call debian_mirror SUITE)
# TT_DEBIAN_MIRROR, when set, is the answer. Otherwise the apt sources are read (APT_SOURCES_DIR,
# default /etc/apt): deb822 files (sources.list.d/*.sources: the first stanza of Types deb whose
# Suites name SUITE and whose Components include main, not disabled with Enabled: no) and one-line
# files (sources.list, sources.list.d/*.list: "deb [options] URI SUITE main ..."), in that order.
# Exit 1, naming TT_DEBIAN_MIRROR, when no source serves SUITE.

debian_mirror() {
  local suite=$1 dir=${APT_SOURCES_DIR:-/etc/apt} uri
  if [ -n "${TT_DEBIAN_MIRROR:-}" ]; then
    echo "$TT_DEBIAN_MIRROR"
    return 0
  fi
  shopt -s nullglob
  local deb822=("$dir"/sources.list.d/*.sources) oneline=("$dir"/sources.list "$dir"/sources.list.d/*.list)
  shopt -u nullglob
  uri=$(
    for f in "${deb822[@]}"; do cat "$f"; echo; done | awk -v suite="$suite" '
      function has(list, word,   n, i, w) { n = split(list, w, /[ \t]+/); for (i = 1; i <= n; i++) if (w[i] == word) return 1; return 0 }
      function flush() {
        if (!found && has(types, "deb") && has(suites, suite) && has(comps, "main") && tolower(enabled) != "no" && uris != "") { split(uris, u, /[ \t]+/); print u[1]; found = 1; exit }
        types = suites = comps = uris = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { line = $0; key = line; sub(/:.*/, "", key); val = line; sub(/^[^:]*:[ \t]*/, "", val)
        k = tolower(key)
        if (k == "types") types = val; else if (k == "suites") suites = val; else if (k == "components") comps = val
        else if (k == "uris") uris = val; else if (k == "enabled") enabled = val }
      END { flush() }'
  )
  if [ -z "$uri" ]; then
    uri=$(
      for f in "${oneline[@]}"; do if [ -f "$f" ]; then cat "$f"; fi; done | awk -v suite="$suite" '
        $1 != "deb" { next }
        { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } }
        $(i + 1) == suite { for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i; exit } }'
    )
  fi
  if [ -z "$uri" ]; then
    echo "debian-mirror: no apt source of $dir serves $suite main; set TT_DEBIAN_MIRROR=<mirror URL>" >&2
    return 1
  fi
  echo "${uri%/}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# = 1 ] || { echo "usage: $0 SUITE" >&2; exit 2; }
  debian_mirror "$1"
fi
