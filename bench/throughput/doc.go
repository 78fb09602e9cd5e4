// Command throughput measures the job pipeline end to end, as flux-core's
// throughput test does: it starts a one-broker instance with a fake
// inventory of 16,384 nodes × 64 cores, submits N one-core jobs that the
// test executor "runs" for 1 ms, and prints the submit rate, the
// throughput from the first submit to the last clean event, the total
// wall time and the broker's RSS, for N = 1k, 16k and 64k (a fresh
// instance each), then the ratio of the 64k to the 1k throughput (the
// pipeline must not slow down as jobs accumulate) and how long
// `flux jobs -a -c 0` takes over the largest run.
//
//	go run ./bench/throughput -flux bin/flux [-n 1000,16000,64000]
//
// Jobs are submitted through one connection with a window of requests in
// flight (what flux submit --cc does) and a jobspec made by flux submit
// --dry-run; completion is followed on the job manager's journal, not by
// polling. Each run also prints the CPU time the broker and the client
// used per job, a figure that holds up better than rates when other work
// shares the machine (the load average before the run is printed too).
//
// Diagnostics: -stages prints the median time between a job's
// consecutive events (where jobs wait); -modstats the messages each
// module received and sent per job; -profile DIR writes broker CPU and
// heap profiles (broker.profile; a second heap profile, N.broker.midheap,
// when 90% of the jobs are clean, where the live heap is largest) and a
// client CPU profile of each run;
// -S NAME=VALUE passes a broker attribute (e.g. broker.memory-limit=off);
// -setup CMD runs a shell command in each instance before the first
// submit (FLUX_URI set, the flux binary's directory first in PATH), e.g.
// flux account commands giving the submitting user an association
// (bench/accounting -throughput does);
// -hold keeps the last instance up for inspection until stdin closes.
//
// The package's benchmarks (go test -run='^$' -bench=. ./bench/throughput)
// measure the scheduler's share of the work alone and, with
// BenchmarkPipeline, the whole pipeline in-process, reporting
// allocations per job (which do not depend on the machine's load).
package main
