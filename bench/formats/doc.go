// Package formats benchmarks the Flux format libraries (idset, hostlist,
// R and the other RFC formats) on inputs the size of a large machine.
// It holds only benchmarks: run them with
//
//	go test -run='^$' -bench=. ./bench/formats
package formats
