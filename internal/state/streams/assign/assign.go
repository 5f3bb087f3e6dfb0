// Package assign computes Streams groups' target task assignments (spec streams-groups §6).
// An assignor is a pure function of its input: no clock, no randomness that changes the result
// for the same input, no I/O, so the shard can run it on its goroutine and replay stays
// deterministic.
package assign

// TaskSet maps a subtopology id to its task (partition) numbers, sorted ascending.
type TaskSet map[string][]int32

// Subtopology is one subtopology of the configured topology.
type Subtopology struct {
	ID       string
	Tasks    int32 // task count = max partition count of its source topics
	Stateful bool  // has state stores (changelog topics); only stateful tasks get standbys and warm-ups
}

// Member is one group member as the assignor sees it.
type Member struct {
	ID         string
	ProcessID  string
	InstanceID *string
	RackID     *string
	ClientTags map[string]string
	// Currently assigned tasks (excluding tasks pending revocation).
	Active  TaskSet
	Standby TaskSet
	Warmup  TaskSet
	// TaskOffsets and TaskEndOffsets are the member's last reported changelog progress per task
	// (soft state, possibly empty). Keys are Task values.
	TaskOffsets    map[Task]int64
	TaskEndOffsets map[Task]int64
}

// Task identifies one task.
type Task struct {
	Subtopology string
	Partition   int32
}

// Configs are the group's assignment configs.
type Configs struct {
	NumStandbyReplicas int32
	// AcceptableRecoveryLag and MaxWarmupReplicas are used by the highavailability assignor only.
	AcceptableRecoveryLag int64
	MaxWarmupReplicas     int32
	RackAwareTags         []string
}

// Input is everything an assignor may look at.
type Input struct {
	Subtopologies []Subtopology // sorted by ID
	Members       []Member      // sorted by ID (the built-in assignors do not depend on it)
	Configs       Configs
}

// MemberAssignment is one member's target.
type MemberAssignment struct {
	Active  TaskSet
	Standby TaskSet
	Warmup  TaskSet
}

// Output is the target per member id; members absent from it get an empty target. The built-in
// assignors (Lookup) return an entry for every input member, with non-nil task sets whose
// partition lists are ascending and never empty.
type Output map[string]MemberAssignment

// Assignor computes a target assignment.
type Assignor interface {
	// Name is the name groups select it by (streams.assignor.name, KIP-1357).
	Name() string
	Assign(in Input) (Output, error)
}
