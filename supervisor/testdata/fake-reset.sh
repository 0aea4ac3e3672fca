#!/bin/sh
# A stand-in for `tt-smi -r CHIPS`: appends "reset CHIPS" to the record file
# $1, says what it does (as tt-smi would), then does what $2 says: ok (exit 0), fail (exit 1) or hang (a process
# group that only a kill ends).
record=$1 mode=$2
shift 2
echo "reset $*" >> "$record"
echo "fake-reset: resetting chips $*"
case $mode in
ok) echo "fake-reset: done"; exit 0 ;;
fail) echo "fake-reset: chips $* did not come back" >&2; exit 1 ;;
hang) sleep 600 & sleep 600 ;;
esac
