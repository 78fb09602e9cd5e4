// Package rset reads, writes and combines R, the Flux resource set
// (RFC 20, "Resource Set Specification Version 1").
//
// An R names concrete resources: which broker ranks, which cores and GPUs
// on each rank, the hostname of each rank, the properties attached to
// ranks, and the time window in which the set is valid. The scheduler
// hands one to every job, the execution system launches job shells from
// it, and a child instance takes its parent's R as its whole inventory.
//
// An *R is kept in the compact form R_lite uses on the wire: groups of
// ranks that share identical children. A 16,384-node machine where every
// node has cores 0-63 is one group, so decoding, counting and encoding it
// do not touch each rank. Per-rank views ([R.Node], [R.All], [R.Expand])
// are built on demand.
//
// Values of *R are not modified by the set operations ([R.Union],
// [R.Difference], [R.Intersect], [R.CopyRanks] ...), which return new
// values; only the Set* methods change their receiver. Concurrent readers
// of one *R are safe as long as no goroutine calls a Set* method.
//
// Keys this package does not interpret, such as "scheduling" or an
// unknown key of "execution", are kept and written back unchanged.
package rset
