package shard

import (
	"context"
	"errors"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (h *streamsHarness) setGroupConfigs(group string, vals map[string]string) {
	h.t.Helper()
	v, err := h.s.Write(context.Background(), AlterGroupConfigs(group, false, 0, func(cur map[string]string) (map[string]string, error) {
		if cur == nil {
			cur = map[string]string{}
		}
		maps.Copy(cur, vals)
		return cur, nil
	}))
	if err != nil || v != nil {
		h.t.Fatalf("alter: %v %v", v, err)
	}
}

func (h *streamsHarness) groupConfigs(group string) map[string]string {
	v, err := h.s.Read(context.Background(), ReadGroupConfigs(group))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(map[string]string)
}

func statefulJoin(group, member string) *kmsg.StreamsGroupHeartbeatRequest {
	r := streamsJoin(group, member)
	cl := kmsg.NewTopicInfo()
	cl.Topic = "app-store-changelog"
	r.Topology.Subtopologies[0].StateChangelogTopics = append(r.Topology.Subtopologies[0].StateChangelogTopics, cl)
	return r
}

// A streams group's streams.num.standby.replicas override reaches the group at its next
// heartbeat: the group epoch is bumped and standbys are assigned (Kafka 4.4 behaviour).
func TestGroupConfigStandbysAtNextHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		defer h.close()
		// Immediate target computation (streams.assignment.interval.ms is an override too).
		h.setGroupConfigs("g", map[string]string{"streams.assignment.interval.ms": "0"})
		h.cat["app-store-changelog"] = h.cat["foo"]
		h.hb(statefulJoin("g", "a"))
		h.hb(statefulJoin("g", "b"))
		for range 3 {
			h.hb(h.owning("g", "a"))
			h.hb(h.owning("g", "b"))
		}
		before := h.epoch("g", "a")
		h.setGroupConfigs("g", map[string]string{"streams.num.standby.replicas": "1"})
		r := h.hb(h.owning("g", "a"))
		if r.MemberEpoch <= before {
			t.Fatalf("epoch %d after the override, was %d", r.MemberEpoch, before)
		}
		standbys := 0
		for range 4 {
			for _, m := range []string{"a", "b"} {
				r := h.hb(h.owning("g", m))
				for _, s := range r.StandbyTasks {
					standbys += len(s.Partitions)
				}
			}
		}
		if standbys == 0 {
			t.Fatal("no standby tasks assigned after streams.num.standby.replicas=1")
		}
	})
}

// The session timeout override is what a member's session timer runs on.
func TestGroupConfigSessionTimeoutOverride(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		defer h.close()
		h.setGroupConfigs("g", map[string]string{"streams.session.timeout.ms": "60000", "streams.heartbeat.interval.ms": "7000"})
		r := h.hb(streamsJoin("g", "a"))
		if r.HeartbeatIntervalMillis != 7000 {
			t.Fatalf("heartbeat interval %d, want the group's 7000", r.HeartbeatIntervalMillis)
		}
		time.Sleep(50 * time.Second) // beyond the broker's 45 s, within the group's 60 s
		synctest.Wait()
		if n := h.members("g"); n != 1 {
			t.Fatalf("members %d after 50 s, want 1", n)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if n := h.members("g"); n != 0 {
			t.Fatalf("members %d after 61 s, want 0", n)
		}
	})
}

// Overrides are durable: a restart replays them; a failed change writes nothing; an empty set
// is a tombstone.
func TestGroupConfigReplayAndRejectedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newStreamsHarness(t)
		defer func() { h.close() }()
		h.setGroupConfigs("nogroup", map[string]string{"streams.num.standby.replicas": "2", "streams.rack.aware.assignment.tags": "zone,rack"})
		v, err := h.s.Write(context.Background(), AlterGroupConfigs("nogroup", false, 0, func(map[string]string) (map[string]string, error) {
			return nil, &streams.GroupConfigError{Msg: "no"}
		}))
		var gce *streams.GroupConfigError
		if err != nil || !errors.As(v.(error), &gce) {
			t.Fatalf("rejected change answered %v %v", v, err)
		}
		h.restart()
		want := map[string]string{"streams.num.standby.replicas": "2", "streams.rack.aware.assignment.tags": "zone,rack"}
		if got := h.groupConfigs("nogroup"); !maps.Equal(got, want) {
			t.Fatalf("after restart %v, want %v", got, want)
		}
		if _, err := h.s.Write(context.Background(), AlterGroupConfigs("nogroup", false, 0, func(map[string]string) (map[string]string, error) {
			return map[string]string{}, nil
		})); err != nil {
			t.Fatal(err)
		}
		h.restart()
		if got := h.groupConfigs("nogroup"); got != nil {
			t.Fatalf("after clearing and restart %v", got)
		}
	})
}

// group.config.max.groups.per.shard: configs for one more id than the bound are refused (also
// when only validated) and nothing is written; ids that have configs can still change or drop
// them, which makes room again.
func TestGroupConfigCountBounded(t *testing.T) {
	s := memShard(t, memlog.New(), nil)
	defer closeShard(s)
	alter := func(group string, validateOnly bool, vals map[string]string) error {
		t.Helper()
		v, err := s.Write(context.Background(), AlterGroupConfigs(group, validateOnly, 2, func(map[string]string) (map[string]string, error) { return vals, nil }))
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return nil
		}
		return v.(error)
	}
	one := map[string]string{"streams.num.standby.replicas": "1"}
	for _, g := range []string{"a", "b"} {
		if err := alter(g, false, one); err != nil {
			t.Fatalf("configs of %s: %v", g, err)
		}
	}
	var gce *streams.GroupConfigError
	for _, validate := range []bool{true, false} {
		if err := alter("c", validate, one); !errors.As(err, &gce) {
			t.Fatalf("configs of a third id with a bound of 2 (validateOnly %v): %v", validate, err)
		}
	}
	if err := alter("a", false, map[string]string{"streams.num.standby.replicas": "2"}); err != nil {
		t.Fatalf("changing the configs of an id that has some: %v", err)
	}
	if err := alter("b", false, map[string]string{}); err != nil {
		t.Fatalf("deleting configs: %v", err)
	}
	if err := alter("c", false, one); err != nil {
		t.Fatalf("configs of c once b's are gone: %v", err)
	}
	v, _ := s.Read(context.Background(), GroupsWithConfigs())
	if got := v.([]string); len(got) != 2 {
		t.Fatalf("ids with configs %v", got)
	}
}
