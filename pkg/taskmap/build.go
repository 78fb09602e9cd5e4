package taskmap

import (
	"fmt"
	"slices"
)

// builder accumulates blocks in task order and keeps them compressed:
//
//   - consecutive tasks on one node form one run, one single-node block:
//     [3,1,2,1]+[3,1,1,1] = [3,1,3,1];
//   - a block that continues the last one (same ppn, next node, neither
//     repeated) extends it: [0,2,1,1]+[2,1,1,1] = [0,3,1,1];
//   - once the last block can grow no more, it folds into the one before
//     it if both cover the same nodes with the same ppn:
//     [0,4,1,1]+[0,4,1,1] = [0,4,1,2].
//
// A single-node block never carries a repeat: [x,1,p,r] is [x,1,p*r,1].
//
// Consecutive tasks on one node are gathered into a single run before they
// reach push (see addRun), so that the run's full length is known when it
// is compared with the block before it.
type builder struct {
	blocks  []MapBlock
	ntasks  int
	nnodes  int
	pending MapBlock // run being gathered; PPN 0 when none
}

// addRun adds count consecutive tasks on node.
func (bl *builder) addRun(node, count int) error {
	if bl.pending.PPN > 0 && bl.pending.NodeID == node {
		if count > MaxTasks-bl.pending.PPN {
			return fmt.Errorf("%w: more than %d tasks", ErrInvalid, MaxTasks)
		}
		bl.pending.PPN += count
		return nil
	}
	if err := bl.flush(); err != nil {
		return err
	}
	bl.pending = MapBlock{NodeID: node, NNodes: 1, PPN: count, Repeat: 1}
	return nil
}

// flush pushes the pending run, if any.
func (bl *builder) flush() error {
	if bl.pending.PPN == 0 {
		return nil
	}
	b := bl.pending
	bl.pending = MapBlock{}
	return bl.push(b)
}

// add adds a whole block: a single-node one is a run of tasks.
func (bl *builder) add(b MapBlock) error {
	if b.NNodes == 1 {
		return bl.addRun(b.NodeID, b.PPN*b.Repeat)
	}
	if err := bl.flush(); err != nil {
		return err
	}
	return bl.push(b)
}

// push appends b (already validated: every field positive, nodeid >= 0)
// after any pending run.
func (bl *builder) push(b MapBlock) error {
	if b.NNodes == 1 && b.Repeat > 1 {
		b.PPN, b.Repeat = b.PPN*b.Repeat, 1
	}
	size := int64(b.NNodes) * int64(b.PPN) * int64(b.Repeat)
	if size > MaxTasks-int64(bl.ntasks) {
		return fmt.Errorf("%w: more than %d tasks", ErrInvalid, MaxTasks)
	}
	if int64(b.NodeID)+int64(b.NNodes) > MaxNodes {
		return fmt.Errorf("%w: node IDs beyond %d", ErrInvalid, MaxNodes-1)
	}
	bl.ntasks += int(size)
	bl.nnodes = max(bl.nnodes, b.NodeID+b.NNodes)

	if n := len(bl.blocks); n > 0 {
		last := &bl.blocks[n-1]
		// Next nodes with the same ppn: extend.
		if last.Repeat == 1 && b.Repeat == 1 && b.PPN == last.PPN && b.NodeID == last.NodeID+last.NNodes {
			last.NNodes += b.NNodes
			return nil
		}
		bl.fold()
		last = &bl.blocks[len(bl.blocks)-1]
		if sameShape(*last, b) {
			last.Repeat += b.Repeat
			return nil
		}
	}
	bl.blocks = append(bl.blocks, b)
	return nil
}

// fold merges the last block into the one before it if they have the
// same shape.
func (bl *builder) fold() {
	n := len(bl.blocks)
	if n >= 2 && sameShape(bl.blocks[n-2], bl.blocks[n-1]) {
		bl.blocks[n-2].Repeat += bl.blocks[n-1].Repeat
		bl.blocks = bl.blocks[:n-1]
	}
}

func sameShape(a, b MapBlock) bool {
	return a.NodeID == b.NodeID && a.NNodes == b.NNodes && a.PPN == b.PPN
}

// finish returns the built map; it is an error for it to have no tasks.
func (bl *builder) finish() (*Map, error) {
	if err := bl.flush(); err != nil {
		return nil, err
	}
	bl.fold()
	if bl.ntasks == 0 {
		return nil, fmt.Errorf("%w: no tasks", ErrInvalid)
	}
	return &Map{blocks: bl.blocks, ntasks: bl.ntasks, nnodes: bl.nnodes}, nil
}

func checkBlock(b MapBlock) error {
	switch {
	case b.NodeID < 0:
		return fmt.Errorf("%w: block %v: nodeid must be >= 0", ErrInvalid, b)
	case b.NNodes < 1:
		return fmt.Errorf("%w: block %v: nnodes must be >= 1", ErrInvalid, b)
	case b.PPN < 1:
		return fmt.Errorf("%w: block %v: ppn must be >= 1", ErrInvalid, b)
	case b.Repeat < 1:
		return fmt.Errorf("%w: block %v: repeat must be >= 1", ErrInvalid, b)
	case b.NodeID > MaxNodes || b.NNodes > MaxNodes || b.PPN > MaxTasks || b.Repeat > MaxTasks:
		return fmt.Errorf("%w: block %v: value too large", ErrInvalid, b)
	}
	return nil
}

// FromBlocks builds a map from RFC 34 map blocks, compressing adjacent
// blocks where they continue one another.
func FromBlocks(blocks []MapBlock) (*Map, error) {
	var bl builder
	for _, b := range blocks {
		if err := checkBlock(b); err != nil {
			return nil, err
		}
		if err := bl.add(b); err != nil {
			return nil, err
		}
	}
	return bl.finish()
}

// Block returns the block distribution of ppn tasks on each of nnodes
// nodes: node 0 gets tasks 0..ppn-1, node 1 the next ppn, and so on.
func Block(nnodes, ppn int) (*Map, error) {
	return FromBlocks([]MapBlock{{NodeID: 0, NNodes: nnodes, PPN: ppn, Repeat: 1}})
}

// BlockCounts returns the block distribution with counts[i] tasks on node
// i. Nodes with a count of zero get no tasks.
func BlockCounts(counts []int) (*Map, error) {
	var bl builder
	for node, c := range counts {
		if c < 0 {
			return nil, fmt.Errorf("%w: node %d has a negative task count", ErrInvalid, node)
		}
		if c == 0 {
			continue
		}
		if err := bl.addRun(node, c); err != nil {
			return nil, err
		}
	}
	return bl.finish()
}

// Cyclic returns the cyclic:stride distribution of ppn tasks on each of
// nnodes nodes (see [CyclicCounts]).
func Cyclic(nnodes, ppn, stride int) (*Map, error) {
	if nnodes < 1 || ppn < 1 {
		return nil, fmt.Errorf("%w: cyclic distribution needs nnodes and ppn >= 1", ErrInvalid)
	}
	if int64(nnodes)*int64(ppn) > MaxTasks {
		return nil, fmt.Errorf("%w: more than %d tasks", ErrInvalid, MaxTasks)
	}
	counts := make([]int, nnodes)
	for i := range counts {
		counts[i] = ppn
	}
	return CyclicCounts(counts, stride)
}

// CyclicCounts returns the cyclic:stride distribution with counts[i] tasks
// on node i: task ranks are dealt stride at a time to each node in turn
// that still has room, round after round (stride 1 is the usual "cyclic";
// a larger stride is Slurm's "plane" distribution). A node with fewer than
// stride places left takes what it has room for.
func CyclicCounts(counts []int, stride int) (*Map, error) {
	if stride < 1 {
		return nil, fmt.Errorf("%w: cyclic stride must be >= 1", ErrInvalid)
	}
	left := slices.Clone(counts)
	var total int64
	for node, c := range left {
		if c < 0 {
			return nil, fmt.Errorf("%w: node %d has a negative task count", ErrInvalid, node)
		}
		total += int64(c)
	}
	if total > MaxTasks {
		return nil, fmt.Errorf("%w: more than %d tasks", ErrInvalid, MaxTasks)
	}
	var bl builder
	for total > 0 {
		// Rounds in which every node that has room takes a full stride,
		// and those nodes are contiguous, repeat as one block.
		first, last, fullRounds := activeRange(left, stride)
		if fullRounds > 0 {
			b := MapBlock{NodeID: first, NNodes: last - first + 1, PPN: stride, Repeat: fullRounds}
			if err := bl.add(b); err != nil {
				return nil, err
			}
			for i := first; i <= last; i++ {
				left[i] -= stride * fullRounds
			}
			total -= int64(b.NNodes) * int64(stride) * int64(fullRounds)
			continue
		}
		// Otherwise deal one round node by node.
		for node := range left {
			if left[node] == 0 {
				continue
			}
			k := min(stride, left[node])
			if err := bl.addRun(node, k); err != nil {
				return nil, err
			}
			left[node] -= k
			total -= int64(k)
		}
	}
	return bl.finish()
}

// activeRange finds the nodes that still have tasks to place. If they are
// contiguous and all have at least one full stride left, it returns their
// range and how many full rounds they can all take; otherwise fullRounds
// is 0.
func activeRange(left []int, stride int) (first, last, fullRounds int) {
	first, last = -1, -1
	fullRounds = -1
	for node, c := range left {
		if c == 0 {
			continue
		}
		if first < 0 {
			first = node
		} else if node != last+1 {
			return first, last, 0
		}
		last = node
		r := c / stride
		if fullRounds < 0 || r < fullRounds {
			fullRounds = r
		}
	}
	if fullRounds < 0 {
		fullRounds = 0
	}
	return first, last, fullRounds
}

// FromNodeTasks builds a map from the task ranks of each node: tasks[i]
// lists the ranks on node i, in any order. Together the lists must hold
// each rank from 0 to N-1 exactly once.
func FromNodeTasks(tasks [][]int) (*Map, error) {
	var runs []taskRun
	for node, list := range tasks {
		sorted := slices.Clone(list)
		slices.Sort(sorted)
		for i := 0; i < len(sorted); {
			lo := sorted[i]
			j := i + 1
			for j < len(sorted) && sorted[j] == sorted[j-1]+1 {
				j++
			}
			runs = append(runs, taskRun{node: node, lo: lo, hi: sorted[j-1]})
			i = j
		}
	}
	return fromRuns(runs)
}

// taskRun is a run of consecutive task ranks lo..hi on one node.
type taskRun struct{ node, lo, hi int }

// fromRuns checks that runs tile 0..N-1 and builds the map in rank order.
func fromRuns(runs []taskRun) (*Map, error) {
	slices.SortFunc(runs, func(a, b taskRun) int { return a.lo - b.lo })
	var bl builder
	next := 0
	for _, r := range runs {
		switch {
		case r.lo < 0:
			return nil, fmt.Errorf("%w: negative task rank %d", ErrInvalid, r.lo)
		case r.lo < next:
			return nil, fmt.Errorf("%w: task %d appears more than once", ErrInvalid, r.lo)
		case r.lo > next:
			return nil, fmt.Errorf("%w: task %d is missing", ErrInvalid, next)
		case r.node > MaxNodes-1:
			return nil, fmt.Errorf("%w: node ID %d too large", ErrInvalid, r.node)
		case r.hi-r.lo+1 > MaxTasks-next:
			return nil, fmt.Errorf("%w: more than %d tasks", ErrInvalid, MaxTasks)
		}
		if err := bl.addRun(r.node, r.hi-r.lo+1); err != nil {
			return nil, err
		}
		next = r.hi + 1
	}
	return bl.finish()
}
