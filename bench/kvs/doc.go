// Package kvs benchmarks the KVS and the content store under it: store
// throughput through the content modules next to the raw SQLite insert
// rate, on one machine, in one run; commit, eventlog append and lookup
// rates (BenchmarkKVS); and the memory the KVS and content store keep,
// and the SQLite space they write, per job (BenchmarkKVSMemory). It holds
// only benchmarks and measurements that print figures (never timed
// asserts): run them with
//
//	go test -run='^$' -bench=. ./bench/kvs
//
// For the resident memory of a whole broker running real jobs, see
// bench/memory.
package kvs
