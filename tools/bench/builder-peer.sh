#!/usr/bin/env bash
# builder-peer.sh: `tt-model package` (the two binaries given, installed side
# by side, so no go build; verify in the unpacked rootfs) against `docker
# build` of the same content on the local Docker engine, then `docker save`,
# same run. The Docker context is taken from the layers of the image tt-model
# just built, so both images hold the same bytes, owners and modes, and the
# Dockerfile carries the same env, user, workdir, port, labels, entrypoint and
# cmd. docs/PERFORMANCE.md ("Builder") records the output.
#
# Usage, from the repository root after `make build` (bin/tt-model and
# bin/tt-model-server):
#   tools/bench/builder-peer.sh [RUNS]     (default 5; medians over the runs)
#
# CPU time: tt-model's is its own and its children's (bash's time). Docker's
# is the client's plus what dockerd and containerd (and the children they
# reaped) used during the step, plus the fuse-overlayfs helpers of the storage
# driver, which detach from dockerd and are sampled every 0.1 s (a lower
# bound: up to 0.1 s of each helper's last work goes unseen). Other users of
# the engine during the run would count too.
set -euo pipefail

runs=${1:-5}
repo=$(git rev-parse --show-toplevel)
manifest=models/rf-detr/tt-model.yaml
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct)}
for b in tt-model tt-model-server; do
	[[ -x $repo/bin/$b ]] || { echo "builder-peer: $repo/bin/$b missing: run make build" >&2; exit 1; }
done
work=$(mktemp -d /tmp/builder-peer.XXXXXX)
repo_tag=ttbench/builder-peer-$(basename "$work" | tr 'A-Z.' 'a-z-')
tick=$(getconf CLK_TCK)
log() { echo "builder-peer: $*" >&2; }
cleanup() {
	[[ -z ${sampler:-} ]] || kill "$sampler" 2>/dev/null || true
	docker image ls -q "$repo_tag" | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

# A snapshot, so that edits to the checkout during the run change nothing.
log "snapshot of HEAD and bin/ in $work (SOURCE_DATE_EPOCH=$epoch)"
mkdir -p "$work/bin" "$work/src" "$work/t"
cp "$repo/bin/tt-model" "$repo/bin/tt-model-server" "$work/bin/"
git -C "$repo" archive HEAD | tar -x -C "$work/src"

# ---- measuring -------------------------------------------------------------

# shellcheck source=engine-ticks.sh
source "$repo/tools/bench/engine-ticks.sh" # daemon_ticks

# The fuse-overlayfs sampler: "pid ticks" lines, every 0.1 s, for the whole run.
# A helper may exit between pgrep and cat: the sampler must not stop on that.
( set +e +o pipefail; while :; do
	pids=$(pgrep -x fuse-overlayfs)
	[[ -z $pids ]] || (cd /proc && cat $(printf '%s/stat ' $pids) 2>/dev/null) | awk '{ print $1, $14 + $15 }'
	sleep 0.1
done ) >"$work/fuse.samples" &
sampler=$!

# fuse_ticks FROM TO: ticks the fuse-overlayfs helpers used between two
# line counts of the sample file (a helper alive at FROM counts from there).
fuse_ticks() {
	awk -v from="$1" -v to="$2" '
		NR <= from { base[$1] = $2; next }
		NR <= to { last[$1] = $2 }
		END { for (p in last) t += last[p] - base[p]; print t + 0 }' "$work/fuse.samples"
}

# timed NAME WHO CMD...: runs CMD (a function), appending "wall cpu" (seconds)
# to $work/t/NAME; cpu is CMD's and its children's, and with WHO=engine also
# what the engine used meanwhile.
timed() {
	local name=$1 who=$2; shift 2
	local d0 f0 d1 f1 fuse engine=0
	sleep 0.2
	d0=$(daemon_ticks); f0=$(wc -l <"$work/fuse.samples")
	local TIMEFORMAT='%R %U %S'
	{ time "$@" 2>&3; } 3>&2 2>"$work/time"
	sleep 0.2 # let the sampler see the last helpers
	d1=$(daemon_ticks); f1=$(wc -l <"$work/fuse.samples")
	if [[ $who == engine ]]; then
		kill -0 "$sampler" || { log "the fuse-overlayfs sampler died"; exit 1; }
		fuse=$(fuse_ticks "$f0" "$f1")
		engine=$((d1 - d0 + fuse))
		echo "$(((d1 - d0) * 100 / tick)) $((fuse * 100 / tick))" >>"$work/t/$name.engine" # centiseconds
	fi
	awk -v e="$engine" -v hz="$tick" '{ printf "%.2f %.2f\n", $1, $2 + $3 + e / hz }' "$work/time" >>"$work/t/$name"
}

median() { sort -g | awk '{ v[n++] = $1 } END { print v[int((n - 1) / 2)] }'; }

# row NAME LABEL [NAME2]: median wall and CPU of NAME (plus NAME2, run by run).
row() {
	local a=$work/t/$1 b=${3:+$work/t/$3}
	local sums
	sums=$(if [[ -n $b ]]; then paste -d' ' "$a" "$b" | awk '{ printf "%.2f %.2f\n", $1 + $3, $2 + $4 }'; else cat "$a"; fi)
	printf '| %s | %s s | %s s | %s |\n' "$2" "$(cut -d' ' -f1 <<<"$sums" | median)" "$(cut -d' ' -f2 <<<"$sums" | median)" \
		"$(cut -d' ' -f1 <<<"$sums" | paste -sd' ')"
}

# ---- tt-model package ------------------------------------------------------

ours() { # ours N: one package into $work/out-N
	(cd "$work/src" && SOURCE_DATE_EPOCH=$epoch "$work/bin/tt-model" package --container "$manifest" \
		--out "$work/out-$1" --verify-in rootfs --json >"$work/ours-$1.json" 2>"$work/ours-$1.log")
}
package_run() { # package_run N
	log "tt-model package, run $1/$runs"
	timed ours self ours "$1"
	jq -r .digest "$work/ours-$1.json" >>"$work/ours.digests"
	[[ $1 == 1 ]] || rm -rf "$work/out-$1"
}
package_run 1
image=$work/out-1/rf-detr/image
mf=$image/blobs/sha256/$(jq -r '.manifests[0].digest' "$image/index.json" | cut -d: -f2)
cfg=$image/blobs/sha256/$(jq -r .config.digest "$mf" | cut -d: -f2)

# ---- the Docker context, from our image's layers ----------------------------

log "docker context from the layers of $(head -1 "$work/ours.digests")"
layers=$work/layers ctx=$work/ctx
n=0
for l in $(jq -r '.layers[].digest' "$mf" | cut -d: -f2); do
	n=$((n + 1)); mkdir -p "$layers/$n"
	tar -xzpf "$image/blobs/sha256/$l" -C "$layers/$n" --numeric-owner
done
[[ $n == 4 ]] || { log "expected 4 layers (accounts, libraries, tt-model, tt-model-server), got $n"; exit 1; }
# Layer 1 splits in two: tt's directories (COPY --chown, which also chowns
# their parent /home), then root's files and /home back to root.
mkdir -p "$ctx/accounts/home" "$ctx/userdirs/home" "$ctx/libs" "$ctx/tool" "$ctx/server"
cp -a "$layers/1/etc" "$layers/1/tmp" "$ctx/accounts/"
cp -a "$layers/1/cache" "$layers/1/hf" "$ctx/userdirs/"
cp -a "$layers/1/home/tt" "$ctx/userdirs/home/"
cp -a "$layers/2/." "$ctx/libs/"
cp -a "$layers/3/." "$ctx/tool/"
cp -a "$layers/4/." "$ctx/server/"
# The Dockerfile a user would write: one ENV and one LABEL instruction.
jq -r '.config |
	"FROM scratch",
	"COPY --chown=1000:1000 userdirs/ /",
	"COPY accounts/ /",
	"COPY libs/ /",
	"COPY tool/ /",
	"COPY server/ /",
	"ENV " + ([.Env[] | (split("=")[0]) + "=" + (split("=")[1:] | join("=") | @json | gsub("\\$"; "\\$"))] | join(" \\\n    ")),
	"LABEL " + ([.Labels | to_entries[] | (.key | @json) + "=" + (.value | @json | gsub("\\$"; "\\$"))] | join(" \\\n    ")),
	"USER " + .User,
	"WORKDIR " + .WorkingDir,
	"EXPOSE " + (.ExposedPorts | keys | join(" ")),
	"ENTRYPOINT " + (.Entrypoint | @json),
	"CMD " + (.Cmd | @json)' "$cfg" >"$ctx/Dockerfile"

# ---- docker build + docker save ---------------------------------------------

build() { docker build "$@" -q "$ctx" >>"$work/docker-build.log" 2>&1; }
save() { docker save -o "$work/save.tar" "$1"; }
gz() { gzip -6 -c "$work/save.tar" >"$work/save.tar.gz"; }
# The runs alternate, so that both sides see the same load on a shared machine.
for i in $(seq "$runs"); do
	[[ $i == 1 ]] || package_run "$i"
	log "docker build --no-cache + docker save, run $i/$runs"
	timed nocache engine build --no-cache -t "$repo_tag:nocache-$i"
	timed nocache-save engine save "$repo_tag:nocache-$i"
	timed gzip self gz
	sha256sum <"$work/save.tar" | cut -c1-64 >>"$work/save.digests"
	docker image inspect -f '{{.Id}}' "$repo_tag:nocache-$i" >>"$work/docker.ids"
	docker image inspect -f '{{json .RootFS.Layers}}' "$repo_tag:nocache-$i" >>"$work/docker.diffids"
	log "docker build (cached) + docker save, run $i/$runs"
	timed cached engine build -t "$repo_tag:cached-$i"
	timed cached-save engine save "$repo_tag:cached-$i"
done

# ---- same content? ------------------------------------------------------------

# listing DIR...: "path type mode uid:gid size" of every entry in the layer
# tars, later layers overriding, mtimes left out.
listing() {
	for t in "$@"; do tar -tvf "$t" --numeric-owner; done |
		awk '{ p = $6; sub(/\/$/, "", p); sub(/^\.\//, "", p); if (p == "" || p == ".") next; e[p] = substr($1, 1, 1) " " $1 " " $2 " " $3 }
			END { for (p in e) print p, e[p] }' | sort
}
mkdir -p "$work/saved"
tar -xf "$work/save.tar" -C "$work/saved"
listing $(jq -r '.[0].Layers[]' "$work/saved/manifest.json" | sed "s|^|$work/saved/|") >"$work/docker.list"
listing $(jq -r '.layers[].digest' "$mf" | cut -d: -f2 | sed "s|^|$image/blobs/sha256/|") >"$work/ours.list"
cmp_cfg() { jq -S '{Env: (.Env | sort), Labels, User, WorkingDir, ExposedPorts, Entrypoint, Cmd}'; }
docker image inspect "$repo_tag:nocache-1" | jq '.[0].Config' | cmp_cfg >"$work/docker.cfg"
jq .config "$cfg" | cmp_cfg >"$work/ours.cfg"

# ---- report ---------------------------------------------------------------------

distinct() { sort -u "$1" | wc -l; }
ours_c=$(jq .compressed_bytes "$work/ours-1.json") ours_u=$(jq .uncompressed_bytes "$work/ours-1.json")
echo "| step ($runs runs) | wall, median | CPU (user+sys), median | wall per run |"
echo "|---|---|---|---|"
row ours "tt-model package --verify-in rootfs (binaries given)"
row nocache "docker build --no-cache"
row nocache "docker build --no-cache + docker save" nocache-save
row cached "docker build (cached) + docker save" cached-save
row gzip "gzip -6 of the saved tar (for a compressed artifact)"
echo
printf 'engine CPU of docker build --no-cache, median: dockerd + containerd %.2f s, fuse-overlayfs helpers %.2f s\n' \
	"$(cut -d' ' -f1 "$work/t/nocache.engine" | median | awk '{ print $1 / 100 }')" \
	"$(cut -d' ' -f2 "$work/t/nocache.engine" | median | awk '{ print $1 / 100 }')"
echo
echo "| image | layers | compressed | uncompressed | reproducible ($runs builds) |"
echo "|---|---|---|---|---|"
echo "| tt-model package | $(jq '.layers | length' "$work/ours-1.json") | $ours_c B (layers, gzip) | $ours_u B (layers) | $(distinct "$work/ours.digests") distinct digest(s): $(sort -u "$work/ours.digests" | paste -sd' ') |"
echo "| docker build + save | $(jq '.[0].Layers | length' "$work/saved/manifest.json") | $(stat -c %s "$work/save.tar.gz") B (save tar, gzip -6) | $(stat -c %s "$work/save.tar") B (save tar); engine Size $(docker image inspect -f '{{.Size}}' "$repo_tag:nocache-1") B | $(distinct "$work/docker.ids") distinct image ID(s), $(distinct "$work/docker.diffids") distinct layer DiffID list(s), $(distinct "$work/save.digests") distinct save tar(s) |"
echo
if diff "$work/ours.list" "$work/docker.list" >"$work/list.diff"; then
	echo "files (path, type, mode, owner, size): identical ($(wc -l <"$work/ours.list") entries)"
else
	echo "files (path, type, mode, owner, size) differ (< ours, > docker):"; cat "$work/list.diff"
fi
if diff "$work/ours.cfg" "$work/docker.cfg" >"$work/cfg.diff"; then
	echo "config (env, labels, user, workdir, ports, entrypoint, cmd): identical"
else
	echo "config differs (< ours, > docker):"; cat "$work/cfg.diff"
fi
echo "machine: $(nproc) CPUs, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); docker engine $(docker version -f '{{.Server.Version}}'), storage driver $(docker info -f '{{.Driver}}')"
