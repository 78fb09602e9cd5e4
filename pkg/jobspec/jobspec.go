// Package jobspec reads, checks, builds and writes Flux job specifications:
// the canonical jobspec of RFC 14 and the version 1 subset of RFC 25, with
// the dependency (RFC 26) and constraint (RFC 31, RFC 35) extensions that
// live in its attributes.
//
// Parse accepts YAML or JSON and checks the document against RFC 14;
// ValidateV1 adds the restrictions of RFC 25, which is what a Flux
// instance accepts for execution. FromCommand builds the jobspec that
// flux submit and flux run send. Errors are *Error values that name the
// key path and the rule, e.g. "resources[0].count: must be >= 1".
package jobspec

// Jobspec is a job specification. The zero value is not valid; use Parse
// or one of the builders, or fill in every required field.
type Jobspec struct {
	// Version is the jobspec version: any integer >= 1 for a canonical
	// jobspec, exactly 1 for version 1.
	Version int
	// Resources is the resource request, a list of resource vertices.
	Resources []Resource
	// Tasks says what to run in the task slots.
	Tasks []Task
	// Attributes holds the system and user attributes.
	Attributes Attributes
}

// Resource is a resource vertex: a request for Count resources of Type,
// each holding the resources in With.
type Resource struct {
	Type  string
	Count Count
	// Unit, if not empty, is the unit of Count (e.g. "GB" for memory).
	Unit string
	// Exclusive, if not nil, says whether the resource is allocated to
	// the job exclusively. Unset means false outside task slots and true
	// within them.
	Exclusive *bool
	// With lists the resources each one of these holds (the "out" edges
	// of the vertex).
	With []Resource
	// Label names the vertex; task slots (Type "slot") must have one, and
	// tasks refer to their slot by it.
	Label string
	// ID, if not empty, is a set of matching resource identifiers.
	ID string
}

// SlotType is the reserved resource type of a task slot.
const SlotType = "slot"

// Count is a resource count in one of the three forms RFC 14 allows: a
// fixed number (Fixed, used when Range is nil and Set is empty), a range
// dictionary (Range), or a string (Set): an RFC 22 idset of acceptable
// counts ("4,9,16,25") or an RFC 45 range ("2+", "2-32:2:*").
type Count struct {
	Fixed int
	Range *CountRange
	Set   string
}

// CountRange is the dictionary form of a count: at least Min, at most Max
// (0 for no upper bound), stepping from Min by applying Operator ("+",
// "*" or "^"; "" for none) with Operand (0 for none).
type CountRange struct {
	Min      int
	Max      int
	Operator string
	Operand  int
}

// FixedCount returns a fixed count of n.
func FixedCount(n int) Count { return Count{Fixed: n} }

// Task is a task descriptor: Command runs in each slot labelled Slot, as
// many times as Count says.
type Task struct {
	Command []string
	Slot    string
	Count   TaskCount
	// Distribution, if not empty, is a hint for task placement.
	Distribution string
	// Attributes holds per-task attributes, e.g. an "environment"
	// mapping overriding attributes.system.environment.
	Attributes map[string]any
}

// TaskCount says how many tasks to run: exactly one of PerSlot (tasks per
// slot), Total (tasks across all slots) or PerResource is set.
type TaskCount struct {
	PerSlot     int
	Total       int
	PerResource *PerResource
}

// PerResource asks for Count tasks per resource of Type in the slot.
type PerResource struct {
	Type  string
	Count int
}

// Attributes holds the system attributes, which Flux interprets (see the
// accessors on Jobspec), and the user attributes, which it does not. Values
// are generic JSON values: nil, bool, string, int64, float64, []any and
// map[string]any. A nil map is left out of the document.
type Attributes struct {
	System map[string]any
	User   map[string]any
}
