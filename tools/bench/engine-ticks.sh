# engine-ticks.sh: sourced by the benchmarks that charge the Docker engine's CPU time to the
# docker steps they time (builder-peer.sh, kinds-rebuild.sh).

# daemon_ticks: CPU ticks so far of dockerd and containerd with their reaped children
# (utime, stime, cutime and cstime of /proc/PID/stat).
daemon_ticks() {
	local p t=0
	for p in $(pidof dockerd containerd); do
		t=$((t + $(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$p/stat")))
	done
	echo "$t"
}
