package consumer

// Reconciliation (Kafka's CurrentAssignmentBuilder): moves one member from its current
// assignment toward its target. Partitions to revoke are asked back first, at the member's
// current epoch; only once the member no longer reports them does it move to the target epoch
// and get new partitions, and a partition another member still holds (assigned or pending
// revocation) is held back until that member lets it go.

// ownership answers whether a partition is held by another member, as of before this
// heartbeat. alias is a static member this heartbeat replaces: its partitions are the
// heartbeating member's own.
type ownership struct {
	g     *Group
	self  string
	alias string
}

func (o ownership) blocked(tp TP) bool {
	id, ok := o.g.owners[tp]
	return ok && id != o.self && (o.alias == "" || id != o.alias)
}

type errUnknownState struct{}

func (errUnknownState) Error() string {
	return "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin."
}

// reconcile returns the member's next state, or m itself when nothing changes. owned are the
// partitions the member reports (meaningful only when ownedKnown).
func reconcile(m *Member, targetEpoch int32, target, owned Parts, ownedKnown bool, own ownership) (*Member, error) {
	switch m.State {
	case Stable:
		if m.Epoch == targetEpoch {
			return m, nil
		}
		return next(m, m.Epoch, targetEpoch, target, owned, ownedKnown, own), nil
	case UnrevokedPartitions:
		if stillOwns(m.Pending, owned, ownedKnown) {
			return m, nil
		}
		return next(m, min(m.Epoch+1, targetEpoch), targetEpoch, target, owned, ownedKnown, own), nil
	case UnreleasedPartitions:
		return next(m, m.Epoch, targetEpoch, target, owned, ownedKnown, own), nil
	}
	return nil, errUnknownState{}
}

// stillOwns: without a report the member is assumed to still hold what it was asked to revoke.
func stillOwns(revoke, owned Parts, ownedKnown bool) bool {
	if len(revoke) == 0 {
		return false
	}
	if !ownedKnown {
		return true
	}
	for tp := range revoke {
		if owned.has(tp) {
			return true
		}
	}
	return false
}

func next(m *Member, memberEpoch, targetEpoch int32, target, owned Parts, ownedKnown bool, own ownership) *Member {
	keep, revoke := Parts{}, Parts{}
	for tp := range m.Assigned {
		if target.has(tp) {
			keep[tp] = struct{}{}
		} else {
			revoke[tp] = struct{}{}
		}
	}
	n := m.shallow()
	n.PreviousEpoch = m.Epoch
	n.Pending = Parts{}
	if stillOwns(revoke, owned, ownedKnown) {
		n.State, n.Epoch, n.Assigned, n.Pending = UnrevokedPartitions, memberEpoch, keep, revoke
		return n
	}
	unreleased := false
	for tp := range target {
		if keep.has(tp) {
			continue
		}
		if own.blocked(tp) {
			unreleased = true
			continue
		}
		keep[tp] = struct{}{}
	}
	n.Epoch, n.Assigned, n.State = targetEpoch, keep, Stable
	if unreleased {
		n.State = UnreleasedPartitions
	}
	return n
}

func sameCurrent(a, b *Member) bool {
	return a.Epoch == b.Epoch && a.PreviousEpoch == b.PreviousEpoch && a.State == b.State &&
		a.Assigned.Equal(b.Assigned) && a.Pending.Equal(b.Pending)
}
