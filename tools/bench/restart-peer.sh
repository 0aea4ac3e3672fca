#!/usr/bin/env bash
# restart-peer.sh: exit-to-next-start latency of `tt-model supervise` against
# Docker's own restart policy (--restart on-failure:N), same program, same
# run, same measuring method: tools/bench/restartstamp stamps the wall clock
# first thing in main and just before exit(75); a latency is a start stamp
# minus the previous exit stamp. docs/PERFORMANCE.md ("Supervisor") records
# the output.
#
# Usage, from the repository root after `make build` (bin/tt-model):
#   tools/bench/restart-peer.sh [RESTARTS]      (default 20)
#
# Docker doubles its restart delay from 100 ms (capped at 1 min, reset after a
# run of 10 s or more), so 20 restarts of a program that exits at once take
# about 12 minutes of mostly idle waiting; the table also gives each latency
# minus that documented delay (Docker's own overhead).
set -euo pipefail

restarts=${1:-20}
repo=$(git rev-parse --show-toplevel)
ttmodel=$repo/bin/tt-model
[[ -x $ttmodel ]] || { echo "restart-peer: $ttmodel missing: run make build" >&2; exit 1; }
work=$(mktemp -d /tmp/restart-peer.XXXXXX)
tag=ttbench/restart-peer:$(basename "$work" | tr 'A-Z.' 'a-z-')
name=$(basename "$work" | tr '.' '-')
log() { echo "restart-peer: $*" >&2; }
cleanup() {
	docker rm -f "$name" >/dev/null 2>&1 || true
	docker rmi -f "$tag" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

log "building tools/bench/restartstamp (CGO_ENABLED=0) into $work"
mkdir -p "$work/ctx" "$work/stamps"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$work/ctx/restartstamp" ./tools/bench/restartstamp)
printf 'FROM scratch\nCOPY restartstamp /restartstamp\nENTRYPOINT ["/restartstamp"]\n' >"$work/ctx/Dockerfile"
docker build -q -t "$tag" "$work/ctx" >/dev/null 2>"$work/build.log" || { cat "$work/build.log" >&2; exit 1; }

# latencies FILE: one exit-to-next-start latency a line, in ms, in order.
latencies() {
	awk '$1 == "exit" { e = $2 } $1 == "start" && e { printf "%.3f\n", ($2 - e) / 1e6 }' "$1"
}

# quantiles: count, p50, p90 and max of the numbers on stdin (the Go bench's
# quantiles: the sorted value at index int(p*(n-1))).
quantiles() {
	sort -g | awk '{ v[n++] = $1 } END { if (n) printf "%d | %.1f ms | %.1f ms | %.1f ms", n, v[int(0.5 * (n - 1))], v[int(0.9 * (n - 1))], v[n - 1] }'
}

# beyond_backoff: each latency on stdin minus Docker's documented delay before
# that restart (100 ms, doubling, capped at 1 min).
beyond_backoff() {
	awk '{ d = 100 * 2 ^ n++; if (d > 60000) d = 60000; printf "%.3f\n", $1 - d }'
}

log "tt-model supervise --max-restarts $restarts on the host"
sup=$work/stamps/supervise.txt
set +e
"$ttmodel" supervise --max-restarts "$restarts" --hang-marker "$work/hang_marker" --reset-on-start never \
	-- "$work/ctx/restartstamp" "$sup" >"$work/supervise.log" 2>&1
code=$?
set -e
[[ $code == 75 ]] || { cat "$work/supervise.log" >&2; log "supervise exited $code, want 75"; exit 1; }

log "docker run --restart on-failure:$restarts (about 12 minutes for 20: Docker's backoff)"
dock=$work/stamps/docker.txt
docker run -d --name "$name" --restart "on-failure:$restarts" -v "$work/stamps:/stamps" "$tag" /stamps/docker.txt >/dev/null
while :; do
	read -r status count < <(docker inspect -f '{{.State.Status}} {{.RestartCount}}' "$name")
	[[ $status == exited && $count -ge $restarts ]] && break
	sleep 2
done

echo "| restarter | restarts | p50 | p90 | max |"
echo "|---|---|---|---|---|"
echo "| tt-model supervise | $(latencies "$sup" | quantiles) |"
echo "| docker --restart on-failure:$restarts | $(latencies "$dock" | quantiles) |"
echo "| docker, each latency minus its documented delay | $(latencies "$dock" | beyond_backoff | quantiles) |"
log "raw latencies (ms), supervise: $(latencies "$sup" | paste -sd' ')"
log "raw latencies (ms), docker: $(latencies "$dock" | paste -sd' ')"
