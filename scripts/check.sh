#!/usr/bin/env bash
# The whole test suite: install missing test tools, then gofmt, go vet,
# the build, the unit and integration tests, and the race detector on the
# concurrent core packages. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

# flux writes job ids as "ƒ..." in a UTF-8 locale and "f..." otherwise
# (flux-core's rule); the tests expect the former whatever the machine's
# locale is
export LC_ALL=C.UTF-8

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then
	echo "gofmt would change:" $bad >&2
	exit 1
fi

echo "== go vet"
go vet ./...
# the example module (its own go.mod, using only pkg/)
(cd examples && go vet ./...)

echo "== build"
make --no-print-directory build

echo "== go test"
FLUX_TEST_BINARY="$PWD/bin/flux" go test -count=1 -timeout 20m ./...

echo "== go test -race (core packages)"
race_pkgs=$(go list ./internal/broker/... ./pkg/flux/... \
	./internal/modules/jobmanager/... ./internal/modules/kvs/... ./internal/modules/content/... \
	./internal/modules/schedsimple/... ./internal/sched/... ./internal/kvsbatch/... ./internal/modules/jobpool/... ./pkg/rset/... 2>/dev/null || true)
if [ -n "$race_pkgs" ]; then
	CGO_ENABLED=1 FLUX_TEST_BINARY="$PWD/bin/flux" go test -race -count=1 -timeout 20m $race_pkgs
fi
echo "== all tests passed"
