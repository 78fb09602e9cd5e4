#!/bin/sh
# A malleable work farm (RFC 51): run inside a nested instance (flux alloc,
# flux batch). It grows by a node of its parent while its own queue is
# long and it has fewer than MAX nodes, and gives nodes back when its queue
# is short or the parent has pending jobs of its own.
#
#   id=$(flux alloc --bg -N1)
#   FLUX_URI=$(flux uri --local $id) scripts/malleable-farm.sh 40
set -e
NJOBS=${1:-40}
MAX=${MAX:-4}
parent=$(flux getattr parent-uri)
flux submit --quiet --cc=1-"$NJOBS" sleep 0.5
while :; do
	pending=$(flux jobs -n -f pending | wc -l)
	active=$(flux jobs -n | wc -l)
	size=$(flux getattr size)
	theirs=$(FLUX_URI=$parent flux jobs -A -n -f pending | wc -l)
	echo "farm: $size node(s), $active job(s) left ($pending pending); parent: $theirs pending"
	[ "$active" -eq 0 ] && break
	if [ "$pending" -gt $((2 * size)) ] && [ "$size" -lt "$MAX" ] && [ "$theirs" -eq 0 ]; then
		flux resource grow --nodes=1 --no-wait || true
	elif [ "$size" -gt 1 ] && { [ "$theirs" -gt 0 ] || [ "$pending" -eq 0 ]; }; then
		flux resource shrink --nodes=1
	fi
	sleep 1
done
size=$(flux getattr size)
[ "$size" -gt 1 ] && flux resource shrink --nodes=$((size - 1))
echo "farm: done on $(flux getattr size) node(s)"
