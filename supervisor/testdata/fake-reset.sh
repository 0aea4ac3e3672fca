#!/bin/sh
# A stand-in for `tt-smi -r CHIPS`: appends "reset CHIPS" to the record file
# $1, then does what $2 says: ok (exit 0), fail (exit 1) or hang (a process
# group that only a kill ends).
record=$1 mode=$2
shift 2
echo "reset $*" >> "$record"
case $mode in
ok) exit 0 ;;
fail) exit 1 ;;
hang) sleep 600 & sleep 600 ;;
esac
