// Package throughput benchmarks the job pipeline's throughput: how many
// jobs per second its parts sustain on an instance the size of a large
// machine. It holds only benchmarks, which report their rates as custom
// metrics; run them with
//
//	go test -run='^$' -bench=. ./bench/throughput
package throughput
