#!/usr/bin/env bash
# Install the tools the tests need when they are missing. Debian packages
# are installed with apt-get when running as root; otherwise we report what
# is missing and the tests that need it skip with a message saying so.
set -euo pipefail

need=()
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v mpicc >/dev/null 2>&1 || need+=(mpich libmpich-dev)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v hwloc-ls >/dev/null 2>&1 || need+=(hwloc)
# the accounting store's PostgreSQL backend is tested against a real server
# the test starts (internal/accounting); the web dashboard in headless
# Chromium (internal/web)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# the .deb installed and started under systemd in a systemd-nspawn container (packaging)
command -v systemd-nspawn >/dev/null 2>&1 || need+=(systemd-container)

if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "== installing test tools: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || true
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
	echo "== missing test tools (not root, not installing): ${need[*]}" >&2
fi
