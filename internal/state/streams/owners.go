package streams

import "slices"

// taskOwners indexes, role by role, the members that hold each task (assigned or pending
// revocation), as member ids in ascending order. It is derived state: Replay keeps it in step
// with the members' CurrentMemberAssignment records, so reconciling one member looks up only
// the tasks that member wants instead of scanning the whole group on every heartbeat (issue
// 12). Sorted ids and no empty entries make it a function of the members' assignments alone,
// whatever order the records were replayed in, so the durable and speculative machines and a
// reload from a compacted log all hold the same index.
type taskOwners [3]map[Task][]string

func newTaskOwners() taskOwners {
	var o taskOwners
	for i := range o {
		o[i] = map[Task][]string{}
	}
	return o
}

// rebuildOwners computes the index from scratch; Replay's incremental upkeep must equal it.
func rebuildOwners(members map[string]*Member) taskOwners {
	o := newTaskOwners()
	for _, m := range members {
		o.add(m)
	}
	return o
}

func (o taskOwners) add(m *Member) {
	for role := range m.Assigned {
		for t := range m.Assigned[role] {
			o.insert(role, t, m.ID)
		}
		for t := range m.Pending[role] {
			o.insert(role, t, m.ID)
		}
	}
}

func (o taskOwners) remove(m *Member) {
	for role := range m.Assigned {
		for t := range m.Assigned[role] {
			o.delete(role, t, m.ID)
		}
		for t := range m.Pending[role] {
			o.delete(role, t, m.ID)
		}
	}
}

func (o taskOwners) insert(role int, t Task, id string) {
	ids := o[role][t]
	i, found := slices.BinarySearch(ids, id)
	if !found {
		o[role][t] = slices.Insert(ids, i, id)
	}
}

func (o taskOwners) delete(role int, t Task, id string) {
	ids := o[role][t]
	i, found := slices.BinarySearch(ids, id)
	switch {
	case !found:
	case len(ids) == 1:
		delete(o[role], t)
	default:
		o[role][t] = slices.Delete(ids, i, i+1)
	}
}

// ownership is what reconciliation asks of the index (spec §4.4): who holds a task in a role,
// and on which process. Processes are read from the members, so a member changing process
// needs no index update. A static member replaced in the same heartbeat (alias) still holds
// its tasks in the index under its old id; they count as the replacement's (self's) own.
type ownership struct {
	owners  taskOwners
	members map[string]*Member
	self    string
	alias   string
}

// buildOwnership is the view over a freshly built index of members, every holder by its own id.
func buildOwnership(members map[string]*Member) ownership {
	return ownership{owners: rebuildOwners(members), members: members}
}

// held reports whether some holder of t in role matches: any member (self allowed) or only
// other members, on any process or only on process p.
func (o ownership) held(role Role, t Task, self, process string, allowSelf, sameProcess bool) bool {
	for _, id := range o.owners[role][t] {
		holder := o.members[id]
		if o.alias != "" && id == o.alias {
			id = o.self
		}
		if !allowSelf && id == self {
			continue
		}
		if sameProcess && (holder == nil || holder.ProcessID != process) {
			continue
		}
		return true
	}
	return false
}

func (o ownership) blocked(role Role, t Task, m *Member) bool {
	id, p := m.ID, m.ProcessID
	switch role {
	case Active:
		return o.held(Active, t, id, p, true, false) ||
			o.held(Standby, t, id, p, false, true) || o.held(Warmup, t, id, p, false, true)
	case Standby:
		return o.held(Active, t, id, p, false, true) ||
			o.held(Standby, t, id, p, true, true) || o.held(Warmup, t, id, p, false, true)
	default:
		return o.held(Active, t, id, p, true, true) ||
			o.held(Standby, t, id, p, false, true) || o.held(Warmup, t, id, p, true, true)
	}
}

func hasWarmups(r Roles) bool { return len(r[Warmup]) > 0 }
