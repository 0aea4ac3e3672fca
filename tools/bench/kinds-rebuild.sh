#!/usr/bin/env bash
# kinds-rebuild.sh: the warm rebuild of an http-server package after one file of code/ changed,
# `tt-model package` (daemonless: only the code/ layer is rebuilt, the others come from the
# layer cache; then docker load + verify.sh in a container) against a build of the same
# Dockerfile and context (the one `tt-model package --context` wrote in the same round) on the
# same engine, same run: `docker build` (the CLI; classic builder, the CLI here has no buildx),
# and BuildKit through the engine's API (the strongest peer: metadata steps cost nothing), each
# also with the same verify.sh run in a container of its result.
# docs/PERFORMANCE.md ("Builder: warm rebuild of a Python kind") records the output.
#
# Usage, from the repository root after `make build` (bin/tt-model, statically linked):
#   tools/bench/kinds-rebuild.sh [ROUNDS]     (default 5; medians over the rounds)
# Needs the docker CLI (the peer), root and debootstrap the first time (the Python test base,
# scripts/python-base-rootfs.sh, cached after).
#
# The package is builder/testdata/kinds/echo (a standard-library Python server) on the Python
# test base, imported into the engine once as ttbench/kinds-base:<key>: both builds start from
# that engine image. Each round appends a comment to models/echo/server.py, then runs both.
# CPU: tt-model's own and its children's, plus what dockerd and containerd used meanwhile (the
# engine loads and runs the image for verify); docker's is the client's plus dockerd's and
# containerd's. Other users of the engine during the run count too.
set -euo pipefail

rounds=${1:-5}
repo=$(git rev-parse --show-toplevel)
tt=$repo/bin/tt-model
[[ -x $tt ]] || { echo "kinds-rebuild: $tt missing: run make build" >&2; exit 1; }
file "$tt" | grep -q 'statically linked' || { echo "kinds-rebuild: $tt is not statically linked: run make build" >&2; exit 1; }
command -v docker >/dev/null || { echo "kinds-rebuild: the docker CLI (the peer) is missing" >&2; exit 1; }

work=$(mktemp -d /tmp/kinds-rebuild.XXXXXX)
peer_tag=ttbench/kinds-rebuild-$(basename "$work" | tr 'A-Z.' 'a-z-')
tick=$(getconf CLK_TCK)
log() { echo "kinds-rebuild: $*" >&2; }
cleanup() {
	docker image ls -q "$peer_tag" | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true
	docker image ls -q "tt-model/kinds-echo" | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# The base, in the engine once.
rootfs=$("$repo/scripts/python-base-rootfs.sh" | tail -n1)
base=ttbench/kinds-base:$(basename "$rootfs" .tar | sed 's/^python-base-//')
if ! docker image inspect "$base" >/dev/null 2>&1; then
	log "importing $rootfs into the engine as $base"
	docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' "$rootfs" "$base" >/dev/null
fi

cp -r "$repo/builder/testdata/kinds/echo" "$work/pkg"
cd "$work/pkg"
export SOURCE_DATE_EPOCH=1700000000

# shellcheck source=engine-ticks.sh
source "$repo/tools/bench/engine-ticks.sh" # daemon_ticks

# timed NAME CMD...: runs CMD, appending "wall cpu" (seconds) to $work/NAME.
timed() {
	local name=$1; shift
	local d0 d1 out
	d0=$(daemon_ticks)
	out=$( { TIMEFORMAT='%R %U %S'; time "$@" >"$work/$name.log" 2>&1; } 2>&1 ) || {
		cat "$work/$name.log" >&2
		echo "kinds-rebuild: $name failed" >&2
		exit 1
	}
	d1=$(daemon_ticks)
	awk -v o="$out" -v d=$((d1 - d0)) -v tick="$tick" 'BEGIN { split(o, a, " "); printf "%.2f %.2f\n", a[1], a[2] + a[3] + d / tick }' >>"$work/$name"
}

package() { "$tt" package --container tt-model.yaml --base "$base" --out "$work/build" --context "$work/ctx"; }
peer_classic() { DOCKER_BUILDKIT=0 docker build -t "$peer_tag:classic" "$work/ctx"; }
# BuildKit through the API, as `tt-model package` builds the kinds that install: the context as a
# tar body, no session. The answer is a JSON stream; an "error" in it is a failed build.
peer_buildkit() {
	tar -C "$work/ctx" -c . | curl -sS --unix-socket /var/run/docker.sock -X POST -H 'Content-Type: application/x-tar' \
		--data-binary @- "http://localhost/v1.41/build?version=2&t=$peer_tag:buildkit" >"$work/bk.json"
	! grep -q '"error"' "$work/bk.json"
}
peer_verify() { docker run --rm --network none --entrypoint /bin/bash "$1" /usr/local/share/tt-model/verify.sh; }

log "warm-up: the layer and base caches of tt-model, the build caches of the engine"
package >"$work/warmup.log" 2>&1
peer_classic >>"$work/warmup.log" 2>&1
peer_buildkit >>"$work/warmup.log" 2>&1

for i in $(seq "$rounds"); do
	# Unique per run: the layer cache outlives runs.
	echo "# round $i of $(basename "$work"): one changed line" >>tree/models/echo/server.py
	timed package package
	grep -q 'code/ at /opt/tt-metal, .* files' "$work/package.log" && ! grep -q 'code/ at /opt/tt-metal.*layer cache' "$work/package.log" ||
		{ echo "kinds-rebuild: round $i did not rebuild the code/ layer" >&2; exit 1; }
	[[ $(grep -c 'from the layer cache' "$work/package.log") == 3 ]] ||
		{ echo "kinds-rebuild: round $i rebuilt more than the code/ layer" >&2; exit 1; }
	timed classic peer_classic
	timed classic_verify peer_verify "$peer_tag:classic"
	timed buildkit peer_buildkit
	timed buildkit_verify peer_verify "$peer_tag:buildkit"
done
# A peer with its verify: the two steps of each round added.
paste -d' ' "$work/classic" "$work/classic_verify" | awk '{ printf "%.2f %.2f\n", $1 + $3, $2 + $4 }' >"$work/classic_both"
paste -d' ' "$work/buildkit" "$work/buildkit_verify" | awk '{ printf "%.2f %.2f\n", $1 + $3, $2 + $4 }' >"$work/buildkit_both"

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
row() {
	local name=$1 what=$2 wall cpu
	wall=$(cut -d' ' -f1 "$work/$name" | median)
	cpu=$(cut -d' ' -f2 "$work/$name" | median)
	printf '| %s | %s s | %s s | %s |\n' "$what" "$wall" "$cpu" "$(cut -d' ' -f1 "$work/$name" | tr '\n' ' ')"
	echo "$wall $cpu" >"$work/$name.median"
}
echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "base: $base; rounds: $rounds; $(docker version --format 'engine {{.Server.Version}}')"
echo
echo "| step ($rounds rounds) | wall, median | CPU (user+sys, with the engine's), median | wall per round |"
echo "|---|---|---|---|"
row package "tt-model package (code/ layer rebuilt, docker load, verify.sh in a container)"
row classic "docker build (the CLI: classic builder) of the same context"
row classic_both "the same + verify.sh in a container"
row buildkit "BuildKit through the engine API, same context"
row buildkit_both "the same + verify.sh in a container"
echo
read -r tw tc <"$work/package.median"
for peer in classic_both buildkit_both buildkit; do
	read -r pw pc <"$work/$peer.median"
	awk -v tw="$tw" -v tc="$tc" -v pw="$pw" -v pc="$pc" -v p="$peer" 'BEGIN {
		printf "ratio tt-model / %s: wall %.2f / %.2f s = %.3fx, CPU %.2f / %.2f s = %.3fx\n", p, tw, pw, tw / pw, tc, pc, tc / pc }'
done
