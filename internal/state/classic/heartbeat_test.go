package classic

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// replayedGroup is a Stable group of n members, every third one static, as a shard holds it
// after replaying its record.
func replayedGroup(t testing.TB, n int) (*State, *Group) {
	t.Helper()
	p := "range"
	g := &Group{ID: "g", State: Stable, PreviousState: CompletingRebalance, Generation: 3, ProtocolType: "consumer", Protocol: &p}
	for i := 0; i < n; i++ {
		m := &Member{ID: fmt.Sprintf("m%d", i), ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 10000, RebalanceTimeout: 20000,
			Protocols: []Protocol{{Name: "range", Metadata: make([]byte, 64)}}, Assignment: make([]byte, 32)}
		if i%3 == 0 {
			inst := fmt.Sprintf("i%d", i)
			m.InstanceID = &inst
		}
		g.Members = append(g.Members, m)
	}
	g.Leader = g.Members[0].ID
	s := New()
	if err := s.Replay(0, g.Record()); err != nil {
		t.Fatal(err)
	}
	return s, s.Group("g")
}

// Heartbeats find members, static or not, in groups above and below the size at which a
// replayed group indexes its members, with Kafka's codes for the wrong ones (spec §2.6).
func TestHeartbeatFindsMembersInSmallAndLargeGroups(t *testing.T) {
	for _, n := range []int{3, indexFrom, 50} {
		s, g := replayedGroup(t, n)
		cfg, now := DefaultConfig(), time.Unix(1000, 0)
		for _, m := range g.Members {
			if tx := s.Heartbeat(cfg, now, "g", m.ID, m.InstanceID, 3); tx.Code != 0 || len(tx.Timers) != 1 || tx.Timers[0].Member != m.ID {
				t.Fatalf("n=%d member %s: code %d, timers %+v", n, m.ID, tx.Code, tx.Timers)
			}
		}
		cases := []struct {
			member   string
			instance *string
			want     int16
		}{
			{"nobody", nil, kerr.UnknownMemberID.Code},
			{"m1", ptr("i0"), kerr.FencedInstanceID.Code},
			{"m0", ptr("unknown-instance"), kerr.UnknownMemberID.Code},
		}
		for _, c := range cases {
			if tx := s.Heartbeat(cfg, now, "g", c.member, c.instance, 3); tx.Code != c.want {
				t.Fatalf("n=%d %s/%v: code %d, want %d", n, c.member, c.instance, tx.Code, c.want)
			}
		}
		// A working copy is looked up as it is changed, not through the replayed group's index.
		c := g.Clone()
		c.Members = append(c.Members, &Member{ID: "added"})
		c.removeMember("m1")
		if c.Member("added") == nil || c.Member("m1") != nil || g.Member("m1") == nil || g.Member("added") != nil {
			t.Fatalf("n=%d: a clone's lookups follow the replayed group's index", n)
		}
	}
}

func ptr(s string) *string { return &s }

// A heartbeat reads the group in place: what it allocates does not depend on the group's size
// (it used to copy every member on every heartbeat).
func TestHeartbeatCostDoesNotGrowWithGroup(t *testing.T) {
	allocs := func(n int) float64 {
		s, g := replayedGroup(t, n)
		cfg, now, id := DefaultConfig(), time.Unix(1000, 0), g.Members[n-1].ID
		return testing.AllocsPerRun(100, func() {
			if tx := s.Heartbeat(cfg, now, "g", id, nil, 3); tx.Code != 0 {
				t.Fatalf("code %d", tx.Code)
			}
		})
	}
	if small, large := allocs(10), allocs(1000); large != small {
		t.Fatalf("a heartbeat allocates %v times in a 1000-member group, %v in a 10-member one", large, small)
	}
}
