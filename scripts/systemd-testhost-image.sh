#!/usr/bin/env bash
# Builds the "systemd test host": a minimal Debian bookworm image whose init is systemd, for the
# tests that run `tt-model service` and `tt-model supervise` under a real systemd as PID 1
# (internal/testing/systemdtest boots it on the Docker engine). No registry is involved: debootstrap
# fetches the packages from this machine's Debian mirror and `docker import` turns the tree into an image.
#
# Usage: scripts/systemd-testhost-image.sh        (needs root, debootstrap and a Docker engine)
# Prints the image tag as the last line of stdout. Exit 3: the image is not built and cannot be
# built here (not root, or no debootstrap); any other failure exits 1.
#
# Cache: the tag is systemd-testhost:<12 hex of the sha256 of this file's lines that are not
# comments>. Every input of the image (the suite, the package list, the setup below) is
# written in this file, so a change to any makes a new tag, and an unchanged file finds its image in
# the engine and exits at once. Old tags are left for their owner to remove (`docker image rm
# systemd-testhost:<old>`). The Debian packages are those of the day the tag was first built.
set -euo pipefail

suite=bookworm
# systemd + systemd-sysv: the init. dbus: systemd-logind needs the system bus. libpam-systemd:
# registers user@<uid>.service's session, so a user manager (`--user` units) can run.
packages=systemd,systemd-sysv,dbus,libpam-systemd
# The user whose manager runs the `--user` units (lingering: started at boot, no login needed).
test_user=tester
test_uid=1000

self=$(readlink -f "$0")
tag=systemd-testhost:$(grep -v '^[[:space:]]*#' "$self" | sha256sum | cut -c1-12)

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

# Two test runs that both miss the cache build it once.
lock=${TMPDIR:-/tmp}/systemd-testhost-image.lock
exec 9>"$lock"
flock 9
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

[ "$(id -u)" = 0 ] || { echo "systemd-testhost-image: $tag is not built, and debootstrap needs root" >&2; exit 3; }
command -v debootstrap >/dev/null || PATH=$PATH:/usr/sbin:/sbin
command -v debootstrap >/dev/null || { echo "systemd-testhost-image: $tag is not built, and debootstrap is not installed (apt-get install debootstrap)" >&2; exit 3; }

root=$(mktemp -d "${TMPDIR:-/tmp}/systemd-testhost-root.XXXXXX")
trap 'rm -rf "$root"' EXIT

# The mirror is where the packages come from, not what they are: this machine's apt source
# (scripts/debian-mirror.sh; TT_DEBIAN_MIRROR overrides it), and not part of the tag.
mirror=$("$(dirname "$self")/debian-mirror.sh" "$suite") || exit 1
echo "systemd-testhost-image: debootstrap $suite ($packages) from $mirror (a few minutes)" >&2
# Progress: debootstrap's stage lines, not one line per package.
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" 2>&1 | tee "$root.log" |
  { grep --line-buffered -vE '^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) [a-z0-9]' || true; } >&2; then
  echo "systemd-testhost-image: debootstrap failed; the end of its log:" >&2
  tail -n 30 "$root.log" >&2
  rm -f "$root.log"
  exit 1
fi
rm -f "$root.log"

# Units that have nothing to do in a container without a console or devices to manage. They
# would fail and leave the system "degraded", which the tests read as "booted with errors".
for unit in getty@tty1.service console-getty.service systemd-remount-fs.service \
  systemd-firstboot.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount \
  sys-kernel-tracing.mount dev-hugepages.mount dev-mqueue.mount; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done

# An empty machine-id: systemd makes a fresh one at each boot (a container is a new machine).
: >"$root/etc/machine-id"

# logind mounts a tmpfs on /run/user/<uid> for a user manager; mounting needs CAP_SYS_ADMIN, which
# an unprivileged container lacks. The container's /run is already a tmpfs, so a directory there,
# owned by the user, is what the mount would have given (the user's group id is its uid).
mkdir -p "$root/etc/systemd/system/user-runtime-dir@.service.d"
cat >"$root/etc/systemd/system/user-runtime-dir@.service.d/no-mount.conf" <<'UNIT'
[Service]
ExecStart=
ExecStart=/usr/bin/install -d -m 0700 -o %i -g %i /run/user/%i
UNIT

chroot "$root" useradd --create-home --uid "$test_uid" --shell /bin/bash "$test_user"
mkdir -p "$root/var/lib/systemd/linger"
touch "$root/var/lib/systemd/linger/$test_user"

rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

# container=docker tells systemd it runs in a container (it then skips what only a machine does).
# (`docker import` cannot set a stop signal: internal/testing/systemdtest gives the container SIGRTMIN+3.)
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --change "LABEL org.opencontainers.image.description=\"systemd test host for tt-model ($suite)\"" \
  - "$tag" >/dev/null
echo "systemd-testhost-image: built $tag" >&2
echo "$tag"
