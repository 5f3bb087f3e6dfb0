package shard

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type consumerCatalog map[string]*meta.Topic

func (c consumerCatalog) Topic(name string) (*meta.Topic, bool) { t, ok := c[name]; return t, ok }
func (c consumerCatalog) TopicByID(id [16]byte) (*meta.Topic, bool) {
	for _, t := range c {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}
func (c consumerCatalog) Topics() []*meta.Topic {
	var out []*meta.Topic
	for _, t := range c {
		out = append(out, t)
	}
	return out
}

// consumerHarness runs one group shard on memlog inside a synctest bubble, so the session and
// rebalance timers run on fake time.
type consumerHarness struct {
	t   *testing.T
	b   *memlog.Backend
	s   *runtime.Shard[*Machine]
	cfg consumer.Config
	// classicCfg is the shard's group.* configuration (zero: Kafka's defaults).
	classicCfg classic.Config
	cat        consumerCatalog
}

func newConsumerHarness(t *testing.T) *consumerHarness {
	h := &consumerHarness{t: t, b: memlog.New(), cfg: consumer.DefaultConfig(),
		cat: consumerCatalog{"foo": {Name: "foo", ID: [16]byte{1}, Partitions: 4}}}
	h.start()
	return h
}

func (h *consumerHarness) start() {
	cfg, ccfg := h.cfg, h.classicCfg // copied here: the shard goroutine must not read the harness's fields
	h.s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: func() *Machine {
		m := NewMachine()
		m.ConsumerConfig, m.ClassicConfig = cfg, ccfg
		return m
	}, Backend: h.b, Scope: RecordScope,
		OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) { ConsumerOnLoaded(c, m, cfg) }})
	h.s.Start()
	for h.s.State() != runtime.StateActive {
		if h.s.State() == runtime.StateFailed {
			h.t.Fatal("shard failed")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *consumerHarness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.s.Close(ctx)
}

func (h *consumerHarness) restart() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.s.Close(ctx)
	h.start()
}

func (h *consumerHarness) hb(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if code, msg := consumer.ValidateRequest(req, h.cfg); code != 0 {
		h.t.Fatalf("invalid request %d %s", code, msg)
	}
	v, err := h.s.Write(context.Background(), ConsumerHeartbeat(consumer.HeartbeatInput{Req: req, Catalog: h.cat, Config: h.cfg}))
	if err != nil {
		h.t.Fatal(err)
	}
	return v.(consumer.HeartbeatOutput).Response
}

func (h *consumerHarness) members(group string) int {
	v, _ := h.s.Read(context.Background(), func(m *Machine) (any, error) {
		if g := m.Consumer.Groups[group]; g != nil {
			return len(g.Members), nil
		}
		return -1, nil
	})
	return v.(int)
}

func consumerJoin(group, member string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.RebalanceTimeoutMillis = group, member, 1000
	r.SubscribedTopicNames, r.Topics = []string{"foo"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func consumerBeat(group, member string, epoch int32, owned *kmsg.ConsumerGroupHeartbeatResponseAssignment) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = group, member, epoch
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range owned.Topics {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return r
}

// The session timer fences a silent member and its partitions go to the one still there; a
// restart re-arms it.
func TestConsumerSessionTimeoutOnShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		a := h.hb(consumerJoin("g", "a"))
		h.hb(consumerJoin("g", "b"))
		h.restart()
		owned := a.Assignment
		for i := 0; i < 3; i++ { // a keeps heartbeating (and revokes what it is asked to), b goes silent
			time.Sleep(20 * time.Second)
			for range 2 {
				a = h.hb(consumerBeat("g", "a", a.MemberEpoch, owned))
				if a.ErrorCode != 0 {
					t.Fatalf("heartbeat %+v %s", a, *a.ErrorMessage)
				}
				if a.Assignment != nil {
					owned = a.Assignment
				}
			}
		}
		synctest.Wait()
		if n := h.members("g"); n != 1 {
			t.Fatalf("members %d, want 1 after b's session expired", n)
		}
		if a = h.hb(consumerBeat("g", "a", a.MemberEpoch, owned)); a.Assignment != nil {
			owned = a.Assignment
		}
		if len(owned.Topics) != 1 || len(owned.Topics[0].Partitions) != 4 {
			t.Fatalf("a must get every partition back: %+v", owned)
		}
	})
}

// A member that does not revoke within its rebalance timeout is removed.
func TestConsumerRebalanceTimeoutOnShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		a := h.hb(consumerJoin("g", "a"))
		h.hb(consumerJoin("g", "b"))
		time.Sleep(1100 * time.Millisecond) // past the assignment interval: a's heartbeat computes the new target
		owned := a.Assignment
		if a = h.hb(consumerBeat("g", "a", a.MemberEpoch, owned)); a.Assignment == nil || len(a.Assignment.Topics[0].Partitions) != 2 {
			t.Fatalf("a must be asked to revoke half: %+v", a.Assignment) // and never does
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := h.members("g"); n != 1 {
			t.Fatalf("members %d, want 1 after a's rebalance timeout", n)
		}
	})
}

// Group types never share an id: a classic join whose metadata is not the consumer protocol's
// or a streams heartbeat on a live consumer group is refused, an empty consumer group gives way to a classic one with its offsets kept,
// and a consumer heartbeat on a streams group is refused.
func TestConsumerGroupTypeCollisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		ctx := context.Background()
		a := h.hb(consumerJoin("g", "a"))
		v, _ := h.s.Write(ctx, JoinGroup(classic.DefaultConfig(), jreq("g", "", 9)))
		if r := v.(*classic.JoinResult); r.Code != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("classic join on a live consumer group: %d", r.Code)
		}
		sv, _ := h.s.Write(ctx, StreamsHeartbeat(streams.HeartbeatInput{Req: streamsJoin("g", "s"), Config: streams.DefaultConfig(), Catalog: streamsCatalog{}}))
		if r := sv.(streams.HeartbeatOutput).Response; r.ErrorCode != kerr.GroupIDNotFound.Code || *r.ErrorMessage != "Group g is not a streams group." {
			t.Fatalf("streams join on a consumer group: %+v", r)
		}
		codes, _ := h.s.Write(ctx, CommitOffsets(CommitRequest{Group: "g", Generation: a.MemberEpoch, MemberID: "a", Version: 9, MaxMetadata: 4096,
			Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "foo", Partition: 0}, Offset: 7, RetentionMs: -1}}}))
		if c := codes.([]int16)[0]; c != 0 {
			t.Fatalf("member commit: %d", c)
		}
		codes, _ = h.s.Write(ctx, CommitOffsets(CommitRequest{Group: "g", Generation: a.MemberEpoch + 1, MemberID: "a", Version: 9, MaxMetadata: 4096,
			Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "foo", Partition: 0}, Offset: 8, RetentionMs: -1}}}))
		if c := codes.([]int16)[0]; c != kerr.StaleMemberEpoch.Code {
			t.Fatalf("commit with a future epoch: %d", c)
		}
		if v, _ := h.s.Write(ctx, DeleteConsumerGroup("g")); v.(int16) != kerr.NonEmptyGroup.Code {
			t.Fatalf("delete of a live group: %v", v)
		}
		h.hb(consumerBeat("g", "a", -1, nil))
		v, _ = h.s.Write(ctx, JoinGroup(classic.DefaultConfig(), jreq("g", "", 9)))
		if r := v.(*classic.JoinResult); r.Code != kerr.MemberIDRequired.Code {
			t.Fatalf("classic join on an empty consumer group: %d", r.Code)
		}
		owned, _ := h.s.Read(ctx, IsConsumerGroup("g"))
		got, _ := h.s.Read(ctx, FetchOffsets("g", []offsets.TopicPartition{{Topic: "foo", Partition: 0}}))
		if owned.(bool) || !got.([]FetchPartition)[0].Found {
			t.Fatalf("conversion: still consumer %v, offsets %+v", owned, got)
		}
		// And the other way: a consumer heartbeat on a streams group.
		h.s.Write(ctx, StreamsHeartbeat(streams.HeartbeatInput{Req: streamsJoin("s", "x"), Config: streams.DefaultConfig(), Catalog: streamsCatalog{}}))
		v2, _ := h.s.Write(ctx, ConsumerHeartbeat(consumer.HeartbeatInput{Req: consumerJoin("s", "y"), Catalog: h.cat, Config: h.cfg}))
		if r := v2.(consumer.HeartbeatOutput).Response; r.ErrorCode != kerr.GroupIDNotFound.Code || *r.ErrorMessage != "Group s is not a consumer group." {
			t.Fatalf("consumer join on a streams group: %+v", r)
		}
	})
}

func TestConsumerDeleteAndList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newConsumerHarness(t)
		defer h.close()
		ctx := context.Background()
		h.hb(consumerJoin("g", "a"))
		v, _ := h.s.Read(ctx, ListConsumerGroups([]string{"stable"}, []string{"Consumer"}))
		if l := v.([]GroupListing); len(l) != 1 || l[0].State != "Stable" || l[0].Type != "consumer" || l[0].ProtocolType != "consumer" {
			t.Fatalf("list: %+v", l)
		}
		v, _ = h.s.Read(ctx, ListClassicGroups(nil, nil))
		if l := v.([]GroupListing); len(l) != 0 {
			t.Fatalf("a consumer group listed as classic: %+v", l)
		}
		h.hb(consumerBeat("g", "a", -1, nil))
		if v, _ := h.s.Write(ctx, DeleteConsumerGroup("g")); v.(int16) != 0 {
			t.Fatalf("delete: %v", v)
		}
		h.restart()
		if h.members("g") != -1 {
			t.Fatal("deleted group came back after a restart")
		}
	})
}
