// Package conformance checks fluxgo's wire protocol against flux-core's.
//
// Its tests replay the client side of the transcripts in testdata/wire
// (flux-core's own commands talking to a flux-core broker) against a real
// fluxgo instance, byte for byte through the local connector socket, and
// compare every response with the recorded one: same topic, flags and
// errnum, and payloads of the same shape (key sets, key order inside
// stored documents such as event contexts and R, and value types).
// Values that legitimately differ — timestamps, job ids, hostnames,
// userids — are not compared.
package conformance
