#!/usr/bin/env bash
# Quick-start demo: a 4-broker test instance running real jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/bin:$PATH"

cat > /tmp/fluxgo-demo.$$ <<'SCRIPT'
set -e
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
step flux overlay status
step flux resource list
step flux queue status
step flux run -N4 -n8 --label-io hostname
step flux run -n2 sh -c 'echo task $FLUX_TASK_RANK of $FLUX_JOB_SIZE on rank $(flux getattr rank)'
step flux submit --cc=1-20 --quiet --wait sh -c 'sleep 0.1'
id=$(flux submit --urgency=hold sleep 60)
step flux jobs -a -c 6
step flux cancel "$id"
step flux job eventlog "$id"
step flux kvs put demo.greeting=hello
step flux kvs get demo.greeting
step flux exec -r all flux getattr rank
# seed 002: two child instances pull work from a pool of this one
step flux pool submit -p demo --cc=1-8 --quiet sh -c 'sleep 0.2'
step flux pool close -p demo
a=$(flux batch -N2 --output=/dev/null --wrap flux pool pull -p demo)
b=$(flux batch -N2 --output=/dev/null --wrap flux pool pull -p demo)
step flux job status "$a" "$b"
step flux pool list -p demo
SCRIPT
trap 'rm -rf /tmp/fluxgo-demo.$$ /tmp/fluxgo-demo-state.$$' EXIT
flux start -s 4 bash /tmp/fluxgo-demo.$$

# seed 003: a running job outlives its brokers. An instance with a
# statedir is shut down while a job prints before and after a sleep; the
# job's shells run on; the instance started again takes it back.
state=/tmp/fluxgo-demo-state.$$
cat > /tmp/fluxgo-demo.$$ <<'SCRIPT'
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
id=$(flux submit -N2 -n2 sh -c 'echo before on rank $FLUX_TASK_RANK; sleep 3; echo after on rank $FLUX_TASK_RANK; exit 3')
flux job wait-event "$id" start >/dev/null
echo "$id" > "$STATE_ID"
step flux shutdown
SCRIPT
STATE_ID=$state.id flux start -s 4 -Sstatedir=$state bash /tmp/fluxgo-demo.$$ || true
cat > /tmp/fluxgo-demo.$$ <<'SCRIPT'
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }
id=$(cat "$STATE_ID")
step flux jobs -a
step flux job attach "$id" || echo "(exit code $?)"
step flux job eventlog -p exec "$id"
SCRIPT
printf '\n\033[1m(the instance is down; the job runs on: flux start -s 4 -Sstatedir=...)\033[0m\n'
STATE_ID=$state.id flux start -s 4 -Sstatedir=$state bash /tmp/fluxgo-demo.$$
rm -f $state.id
