// Package taskmap implements the RFC 34 Flux task map: the compact mapping
// between a job's task ranks and the node IDs (zero-origin indices into
// the job's nodes) they run on.
//
// A task map is a list of map blocks [nodeid, nnodes, ppn, repeat]. Task
// ranks are handed out in order: for each block, repeat times over, each
// of the nnodes nodes from nodeid upwards receives the next ppn ranks. So
// a block distribution of 4 nodes × 4 tasks is [[0,4,4,1]] and a cyclic
// one is [[0,4,1,4]].
//
// Besides the JSON form ({"version":1,"map":[...]} or the bare array) the
// package reads and writes the RFC 34 "raw" form (one RFC 22 idset of task
// ranks per node, separated by ";", e.g. "0-3;4-7") and the PMI-1
// PMI_process_mapping form "(vector,(0,4,4))".
//
// Maps built by this package are kept compressed: adjacent blocks that
// continue one another are merged and repeated blocks folded into one
// with a repeat count. The result is the form the RFC 34 test vectors show;
// it is found greedily, so an irregular map may occasionally have a
// shorter equivalent.
package taskmap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MapBlock is one RFC 34 map block.
type MapBlock struct {
	NodeID int // first node of the block
	NNodes int // number of consecutive nodes
	PPN    int // tasks per node per repetition
	Repeat int // times the block is repeated
}

// Limits on a map's size: task ranks and node IDs must fit in a signed
// 32-bit integer, as they do in Flux.
const (
	MaxTasks = 1<<31 - 1
	MaxNodes = 1<<31 - 1
)

// Sentinel error kinds. Errors returned by this package wrap one of them.
var (
	// ErrInvalid: a task map (in any form) is malformed.
	ErrInvalid = errors.New("invalid taskmap")
	// ErrRange: a node ID or task rank is outside the map.
	ErrRange = errors.New("taskmap: out of range")
)

// Map is a task map. The zero Map is empty (no tasks); a Map is not
// modified after it is built, so it is safe for concurrent reads.
type Map struct {
	blocks []MapBlock
	ntasks int
	nnodes int
}

// Blocks returns a copy of the map's blocks.
func (m *Map) Blocks() []MapBlock {
	return append([]MapBlock(nil), m.blocks...)
}

// NTasks returns the number of tasks.
func (m *Map) NTasks() int { return m.ntasks }

// NNodes returns the number of nodes: one more than the highest node ID
// that has tasks.
func (m *Map) NNodes() int { return m.nnodes }

// NodeOfTask returns the node ID that runs task rank.
func (m *Map) NodeOfTask(rank int) (int, error) {
	if rank < 0 || rank >= m.ntasks {
		return 0, fmt.Errorf("%w: task %d (the map has %d tasks)", ErrRange, rank, m.ntasks)
	}
	base := 0
	for _, b := range m.blocks {
		size := b.NNodes * b.PPN * b.Repeat
		if rank < base+size {
			off := (rank - base) % (b.NNodes * b.PPN)
			return b.NodeID + off/b.PPN, nil
		}
		base += size
	}
	panic("taskmap: inconsistent task count") // unreachable: ntasks is the sum of block sizes
}

// NTasksOnNode returns the number of tasks on node.
func (m *Map) NTasksOnNode(node int) (int, error) {
	if node < 0 || node >= m.nnodes {
		return 0, fmt.Errorf("%w: node %d (the map has %d nodes)", ErrRange, node, m.nnodes)
	}
	n := 0
	for _, b := range m.blocks {
		if node >= b.NodeID && node < b.NodeID+b.NNodes {
			n += b.PPN * b.Repeat
		}
	}
	return n, nil
}

// TasksOnNode returns the task ranks on node, in ascending order.
func (m *Map) TasksOnNode(node int) ([]int, error) {
	n, err := m.NTasksOnNode(node)
	if err != nil {
		return nil, err
	}
	tasks := make([]int, 0, n)
	m.rangesOnNode(node, func(lo, hi int) {
		for t := lo; t <= hi; t++ {
			tasks = append(tasks, t)
		}
	})
	return tasks, nil
}

// TasksOnNodeIDSet returns the task ranks on node as an RFC 22 idset
// string such as "0-3,8-11" (what `flux job taskmap --taskids` prints).
func (m *Map) TasksOnNodeIDSet(node int) (string, error) {
	if node < 0 || node >= m.nnodes {
		return "", fmt.Errorf("%w: node %d (the map has %d nodes)", ErrRange, node, m.nnodes)
	}
	var b []byte
	m.rangesOnNode(node, func(lo, hi int) { b = appendRange(b, lo, hi) })
	return string(b), nil
}

// rangesOnNode calls fn for each maximal run lo..hi of task ranks on node,
// in ascending order.
func (m *Map) rangesOnNode(node int, fn func(lo, hi int)) {
	lo, hi, open := 0, 0, false
	base := 0
	for _, b := range m.blocks {
		if node >= b.NodeID && node < b.NodeID+b.NNodes {
			stride := b.NNodes * b.PPN
			first := base + (node-b.NodeID)*b.PPN
			for r := 0; r < b.Repeat; r++ {
				start := first + r*stride
				if open && start == hi+1 {
					hi = start + b.PPN - 1
					continue
				}
				if open {
					fn(lo, hi)
				}
				lo, hi, open = start, start+b.PPN-1, true
			}
		}
		base += b.NNodes * b.PPN * b.Repeat
	}
	if open {
		fn(lo, hi)
	}
}

// String returns the JSON form, as [Map.Encode].
func (m *Map) String() string { return m.Encode() }

// appendRange appends "lo" or "lo-hi" to an idset under construction.
func appendRange(b []byte, lo, hi int) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = strconv.AppendInt(b, int64(lo), 10)
	if hi > lo {
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(hi), 10)
	}
	return b
}

// formatBlocks writes blocks as the bare JSON array.
func formatBlocks(sb *strings.Builder, blocks []MapBlock) {
	sb.WriteByte('[')
	for i, b := range blocks {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(sb, "[%d,%d,%d,%d]", b.NodeID, b.NNodes, b.PPN, b.Repeat)
	}
	sb.WriteByte(']')
}
