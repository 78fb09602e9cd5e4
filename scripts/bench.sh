#!/usr/bin/env bash
# Run every benchmark and print its figures (see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run='^$' -bench=. -benchtime=1x ./bench/formats ./bench/kvs ./bench/throughput
go run ./bench/broker -flux bin/flux
for d in bench/*/; do
	if [ -f "$d/main.go" ] && [ "$d" != "bench/broker/" ]; then
		go run "./$d" -flux bin/flux
	fi
done
