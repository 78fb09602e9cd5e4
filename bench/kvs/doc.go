// Package kvs benchmarks the KVS and the content store under it: store
// throughput through the content modules next to the raw SQLite insert
// rate, on one machine, in one run. It holds only benchmarks and
// measurements that print figures (never timed asserts): run them with
//
//	go test -run='^$' -bench=. ./bench/kvs
package kvs
