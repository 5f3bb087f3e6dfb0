package streams

import (
	"reflect"
	"testing"
)

// roles builds Roles from "subtopology -> partitions" per role, all active tasks at epoch e.
func roles(e int32, active, standby, warmup map[string][]int32) Roles {
	var r Roles
	for role, m := range []map[string][]int32{active, standby, warmup} {
		for s, ps := range m {
			for _, p := range ps {
				r.add(Role(role), tk(s, p), e)
			}
		}
	}
	return r
}

func member(id, process string, epoch int32, state MemberState, assigned, pending Roles) *Member {
	m := newMember(id)
	m.ProcessID, m.Epoch, m.PreviousEpoch, m.State, m.Assigned, m.Pending = process, epoch, epoch, state, assigned, pending
	return m
}

func ownedRoles(active, standby, warmup map[string][]int32) *Roles {
	r := roles(0, active, standby, warmup)
	return &r
}

func own(members ...*Member) ownership {
	mm := map[string]*Member{}
	for _, m := range members {
		mm[m.ID] = m
	}
	return buildOwnership(mm)
}

type tm = map[string][]int32

func TestSpec12_41_RevokeEverything(t *testing.T) {
	m := member("m", "p", 10, Stable, roles(10, tm{"s1": ps(1, 2)}, nil, nil), Roles{})
	n, err := reconcile(m, 11, Roles{}, nil, own(m))
	if err != nil {
		t.Fatal(err)
	}
	if n.State != UnrevokedTasks || n.Epoch != 10 || n.PreviousEpoch != 10 || !n.Assigned.Empty() || !reflect.DeepEqual(tasksOf(n.Pending[Active]), tm{"s1": ps(1, 2)}) {
		t.Fatalf("%+v", n)
	}
}

func TestSpec12_42_AckMovesOneEpoch(t *testing.T) {
	m := member("m", "p", 10, UnrevokedTasks, roles(10, tm{"s1": ps(2, 3), "s2": ps(5, 6)}, nil, nil), roles(10, tm{"s1": ps(1), "s2": ps(4)}, nil, nil))
	target := roles(0, tm{"s1": ps(3), "s2": ps(6)}, nil, nil)
	n, _ := reconcile(m, 12, target, ownedRoles(tm{"s1": ps(2, 3), "s2": ps(5, 6)}, nil, nil), own(m))
	if n.State != UnrevokedTasks || n.Epoch != 11 || n.PreviousEpoch != 10 || !reflect.DeepEqual(tasksOf(n.Assigned[Active]), tm{"s1": ps(3), "s2": ps(6)}) ||
		!reflect.DeepEqual(tasksOf(n.Pending[Active]), tm{"s1": ps(2), "s2": ps(5)}) {
		t.Fatalf("%+v", n)
	}
	// Without the ack nothing changes.
	if n, _ := reconcile(m, 12, target, nil, own(m)); n != m {
		t.Fatal("unacknowledged revocation changed the member")
	}
}

func TestSpec12_43_44_UnreleasedTasks(t *testing.T) {
	m := member("m", "p", 10, Stable, roles(10, tm{"s1": ps(1, 2), "s2": ps(3, 4)}, nil, nil), Roles{})
	other := member("o", "q", 10, Stable, roles(10, tm{"s2": ps(5)}, nil, nil), Roles{})
	target := roles(0, tm{"s1": ps(1, 2), "s2": ps(3, 5)}, nil, nil)
	n, _ := reconcile(m, 11, target, ownedRoles(nil, nil, nil), own(m, other))
	if n.State != UnreleasedTasks || n.Epoch != 11 || n.PreviousEpoch != 10 || !n.Pending.Empty() || !reflect.DeepEqual(tasksOf(n.Assigned[Active]), tm{"s1": ps(1, 2), "s2": ps(3)}) {
		t.Fatalf("43: %+v", n)
	}
	// §12 44 / 47: once released, the task is granted at the target epoch; kept tasks keep theirs.
	other.Assigned = Roles{}
	n2, _ := reconcile(n, 11, target, ownedRoles(tm{"s1": ps(1, 2), "s2": ps(3)}, nil, nil), own(n, other))
	if n2.State != Stable || n2.Assigned[Active][tk("s2", 5)] != 11 || n2.Assigned[Active][tk("s1", 1)] != 10 {
		t.Fatalf("44: %+v", n2.Assigned)
	}
}

func TestSpec12_45_InPlaceDemotion(t *testing.T) {
	m := member("m", "p", 10, Stable, roles(10, tm{"s1": ps(0)}, nil, nil), Roles{})
	target := roles(0, nil, tm{"s1": ps(0)}, nil)
	n, _ := reconcile(m, 11, target, nil, own(m))
	if n.State != UnrevokedTasks || n.Epoch != 10 || !reflect.DeepEqual(tasksOf(n.Assigned[Standby]), tm{"s1": ps(0)}) || !reflect.DeepEqual(tasksOf(n.Pending[Active]), tm{"s1": ps(0)}) {
		t.Fatalf("demotion %+v", n)
	}
	n2, _ := reconcile(n, 11, target, ownedRoles(nil, tm{"s1": ps(0)}, nil), own(n))
	if n2.State != Stable || n2.Epoch != 11 || len(n2.Assigned[Active]) != 0 || len(n2.Assigned[Standby]) != 1 {
		t.Fatalf("demotion ack %+v", n2)
	}
	// Another member of the same process holds the standby: no in-place demotion.
	sib := member("sib", "p", 10, Stable, roles(10, nil, tm{"s1": ps(0)}, nil), Roles{})
	n3, _ := reconcile(m, 11, target, nil, own(m, sib))
	if n3.State != UnrevokedTasks || len(n3.Assigned[Standby]) != 0 {
		t.Fatalf("blocked demotion %+v", n3)
	}
}

func TestSpec12_46_Promotion(t *testing.T) {
	m := member("m", "p", 10, Stable, roles(10, nil, tm{"s1": ps(0)}, nil), Roles{})
	holder := member("h", "q", 10, UnrevokedTasks, Roles{}, roles(9, tm{"s1": ps(0)}, nil, nil))
	target := roles(0, tm{"s1": ps(0)}, nil, nil)
	n, _ := reconcile(m, 11, target, nil, own(m, holder))
	if n.State != UnreleasedTasks || len(n.Assigned[Active]) != 0 || !reflect.DeepEqual(tasksOf(n.Assigned[Standby]), tm{"s1": ps(0)}) {
		t.Fatalf("while held %+v", n)
	}
	holder.Pending = Roles{}
	n2, _ := reconcile(n, 11, target, nil, own(n, holder))
	if n2.State != Stable || len(n2.Assigned[Standby]) != 0 || n2.Assigned[Active][tk("s1", 0)] != 11 {
		t.Fatalf("after release %+v", n2)
	}
}

func TestSpec12_48_UnknownState(t *testing.T) {
	m := member("m", "p", 10, UnknownState, roles(10, tm{"s": ps(0)}, nil, nil), Roles{})
	if _, err := reconcile(m, 11, Roles{}, nil, own(m)); err == nil {
		t.Fatal("null owned lists accepted")
	}
	if _, err := reconcile(m, 11, Roles{}, ownedRoles(tm{"s": ps(0)}, nil, nil), own(m)); err == nil {
		t.Fatal("non-empty owned lists accepted")
	}
	n, err := reconcile(m, 11, roles(0, tm{"s": ps(1)}, nil, nil), ownedRoles(nil, nil, nil), own(m))
	if err != nil || n.Epoch != 11 {
		t.Fatalf("%v %+v", err, n)
	}
}
