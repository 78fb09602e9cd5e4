// Package sched is the allocation logic of fluxgo's schedulers, kept free
// of goroutines, I/O and message handling so that it can be tested by
// tables and traces and reused by other queue policies (backfill) later.
//
// The pieces:
//
//   - [Pool] holds the instance's resources as the scheduler sees them:
//     every node (broker rank) with its cores and GPUs, which of them are
//     free, and whether the node may be used (up and not drained). It
//     builds from the RFC 20 R that resource.acquire hands out.
//   - [Request] is what a job asks for, reduced from its jobspec (RFC 25):
//     a number of task slots of so many cores and GPUs, optionally spread
//     over a number of (exclusive) nodes, with RFC 31 constraints and a
//     duration.
//   - [Pool.Allocate] is the first-fit matcher: it takes the lowest-ranked
//     nodes that can hold the request and returns an [Alloc], which
//     [Pool.AppendR] encodes as a complete R (with nodelist, properties,
//     starttime and expiration) and [Pool.Free] gives back.
//   - [Pool.Feasible] says whether a request could ever be satisfied by the
//     whole inventory (ignoring what is down, drained or allocated), with a
//     message saying why not.
//   - [Queue] orders pending jobs by priority, then submit time, then id;
//     a [Policy] decides, pass by pass, which of them to start. [FCFS] is
//     the policy of sched-simple.
//
// Cost: free cores and GPUs are counted per node and indexed by max
// segment trees over the nodes (one for free cores, one for free GPUs, one
// for whole idle nodes), so finding the first node with at least k free
// cores takes O(log N) and so does updating a node after an allocation or
// a free. Allocating one core on 16,384 nodes is a few dozen memory
// accesses; freeing costs O(nodes in the allocation × log N). No operation
// on the hot path scans all nodes.
package sched
