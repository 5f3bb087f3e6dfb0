package classic

import (
	"reflect"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

func sampleGroup() *Group {
	inst, p := "i", "range"
	return &Group{ID: "g", State: Stable, PreviousState: CompletingRebalance, Generation: 7,
		ProtocolType: "consumer", Protocol: &p, Leader: "m1", StateTimestamp: 123,
		Pending: []PendingMember{{ID: "p", SessionTimeoutMs: 10}},
		Members: []*Member{{ID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 1, RebalanceTimeout: 2,
			Protocols: []Protocol{{Name: "range", Metadata: []byte{1}}}, Assignment: []byte("a"), PendingSync: true}}}
}

// Spec coordinator-apis §2 persistence: a group record replays to the same group, and Clone is a
// deep copy (an operation's working copy never reaches the replayed state).
func TestGroupRecordRoundTripAndClone(t *testing.T) {
	g := sampleGroup()
	s := New()
	if err := s.Replay(0, g.Record()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Group("g"), g) {
		t.Fatalf("replayed %+v, want %+v", s.Group("g"), g)
	}
	c := s.Group("g").Clone()
	c.Members[0].Protocols[0].Name = "x"
	c.Members = append(c.Members, &Member{ID: "m2"})
	*c.Protocol = "sticky"
	if !reflect.DeepEqual(s.Group("g"), g) {
		t.Fatal("changing a clone changed the group")
	}
}

// A corrupt value is an error, never a panic or a huge allocation.
func FuzzGroupRecord(f *testing.F) {
	rec := sampleGroup().Record()
	f.Add(rec.Value)
	f.Add(rec.Value[:len(rec.Value)/2])
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, value []byte) {
		if len(value) == 0 {
			return // a tombstone
		}
		s := New()
		if err := s.Replay(0, log.Record{Key: rec.Key, Value: value}); err == nil {
			// Whatever decoded must encode back to something that decodes the same way.
			g := s.Group("g")
			s2 := New()
			if err := s2.Replay(0, g.Record()); err != nil || !reflect.DeepEqual(s2.Group("g"), g) {
				t.Fatalf("re-encoding a decoded group: %v", err)
			}
		}
	})
}
