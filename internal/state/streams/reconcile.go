package streams

// The reconciliation engine (spec §4.4): moves one member from its current assignment toward
// its slice of the target assignment, revoking before assigning, never granting a task that
// another member still holds in a conflicting role.

// released reports whether owned (when present) no longer contains any task of revoke, role by
// role. Without owned lists nothing counts as released.
func released(revoke Roles, owned *Roles) bool {
	if owned == nil {
		return revoke.Empty()
	}
	for role := range revoke {
		for t := range revoke[role] {
			if _, ok := owned[role][t]; ok {
				return false
			}
		}
	}
	return true
}

// errUnknownState: the member's stored state is UNKNOWN and it did not give everything up.
type errUnknownState struct{}

func (errUnknownState) Error() string {
	return "The streams group member is in a unknown state. The member must abandon all its tasks and rejoin."
}

// reconcile returns the member's next state, or m itself when nothing changes.
func reconcile(m *Member, targetEpoch int32, target Roles, owned *Roles, own ownership) (*Member, error) {
	switch m.State {
	case Stable:
		if m.Epoch == targetEpoch {
			return m, nil
		}
		return next(m, m.Epoch, targetEpoch, target, owned, own), nil
	case UnrevokedTasks:
		if !released(m.Pending, owned) {
			return m, nil
		}
		return next(m, m.Epoch+1, targetEpoch, target, owned, own), nil
	case UnreleasedTasks:
		return next(m, m.Epoch, targetEpoch, target, owned, own), nil
	default:
		if owned == nil || !owned.Empty() {
			return nil, errUnknownState{}
		}
		return next(m, targetEpoch, targetEpoch, target, owned, own), nil
	}
}

func next(m *Member, base, targetEpoch int32, target Roles, owned *Roles, own ownership) *Member {
	var keep, revoke, want Roles
	for role := range m.Assigned {
		for t, e := range m.Assigned[role] {
			if _, ok := target[role][t]; ok {
				keep.add(Role(role), t, e)
			} else {
				revoke.add(Role(role), t, e)
			}
		}
		for t := range target[role] {
			if _, ok := m.Assigned[role][t]; !ok {
				want.add(Role(role), t, targetEpoch)
			}
		}
	}
	blocked := false
	for role := range want {
		for t := range want[role] {
			if own.blocked(Role(role), t, m) {
				delete(want[role], t)
				blocked = true
			}
		}
	}
	// In-place role changes of the member's own tasks.
	for t := range want[Standby] {
		if _, ok := m.Assigned[Active][t]; ok { // demotion: the active copy still needs an ack
			keep.add(Standby, t, 0)
			delete(want[Standby], t)
		} else if _, ok := m.Assigned[Warmup][t]; ok { // warm-up to standby
			keep.add(Standby, t, 0)
			delete(want[Standby], t)
			delete(revoke[Warmup], t)
		}
	}
	for t := range want[Warmup] {
		if _, ok := m.Assigned[Standby][t]; ok { // standby to warm-up
			keep.add(Warmup, t, 0)
			delete(want[Warmup], t)
			delete(revoke[Standby], t)
		}
	}
	// Promotion: a standby or warm-up wanted as active never needs an ack.
	var promoted []struct {
		t    Task
		role Role
	}
	for t := range target[Active] {
		if _, isActive := m.Assigned[Active][t]; isActive {
			continue
		}
		for _, r := range []Role{Standby, Warmup} {
			if _, ok := m.Assigned[r][t]; ok {
				delete(revoke[r], t)
				promoted = append(promoted, struct {
					t    Task
					role Role
				}{t, r})
			}
		}
	}
	revokeDone := released(revoke, owned)
	for _, p := range promoted {
		if _, granted := want[Active][p.t]; granted && revokeDone {
			continue // the standby disappears, the active appears
		}
		keep.add(p.role, p.t, 0)
	}
	n := m.shallow() // its Assigned and Pending are replaced below
	n.PreviousEpoch = m.Epoch
	n.Pending = Roles{}
	switch {
	case !revoke.Empty() && !revokeDone:
		n.State, n.Epoch, n.Assigned, n.Pending = UnrevokedTasks, base, keep, revoke
	case !want.Empty():
		for role := range want {
			for t, e := range want[role] {
				keep.add(Role(role), t, e)
			}
		}
		n.Epoch, n.Assigned, n.State = targetEpoch, keep, Stable
		if blocked {
			n.State = UnreleasedTasks
		}
	case blocked:
		n.State, n.Epoch, n.Assigned = UnreleasedTasks, targetEpoch, keep
	default:
		n.State, n.Epoch, n.Assigned = Stable, targetEpoch, keep
	}
	return n
}

// sameCurrent compares the persisted current-assignment fields.
func sameCurrent(a, b *Member) bool {
	return a.Epoch == b.Epoch && a.PreviousEpoch == b.PreviousEpoch && a.State == b.State &&
		a.Assigned.Equal(b.Assigned) && a.Pending.Equal(b.Pending)
}
