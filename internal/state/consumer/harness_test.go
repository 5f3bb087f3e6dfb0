package consumer

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// catalog is an in-memory topic catalog.
type catalog map[string]*meta.Topic

func (c catalog) Topic(name string) (*meta.Topic, bool) { t, ok := c[name]; return t, ok }
func (c catalog) TopicByID(id [16]byte) (*meta.Topic, bool) {
	for _, t := range c {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}
func (c catalog) Topics() []*meta.Topic {
	out := make([]*meta.Topic, 0, len(c))
	for _, t := range c {
		out = append(out, t)
	}
	return out
}

func tid(name string) [16]byte {
	var id [16]byte
	copy(id[:], "id-"+name)
	return id
}

func topics(kv ...any) catalog {
	c := catalog{}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		c[name] = &meta.Topic{Name: name, ID: tid(name), Partitions: int32(kv[i+1].(int))}
	}
	return c
}

// snapshotOf is c as the metadata shard publishes it.
func snapshotOf(t testing.TB, c catalog) *meta.Snapshot {
	cat := meta.NewCatalog()
	for _, topic := range c.Topics() {
		if err := cat.Replay(0, meta.TopicRecord(topic)); err != nil {
			t.Fatal(err)
		}
	}
	return cat.Snapshot()
}

// world is one shard's consumer groups with a log of everything written.
type world struct {
	t   testing.TB
	s   *State
	cat catalog
	// snap, when set, is what heartbeats read instead of cat: an immutable snapshot, as the
	// server hands the catalog to a heartbeat (some caches key on it).
	snap *meta.Snapshot
	cfg  Config
	log  []log.Record
	now  time.Time
}

func newWorld(t testing.TB, cat catalog) *world {
	cfg := DefaultConfig()
	cfg.AssignmentInterval = 0 // tests that want it set it
	return &world{t: t, s: New(), cat: cat, cfg: cfg, now: time.UnixMilli(1_000_000)}
}

func (w *world) apply(recs []log.Record) {
	w.t.Helper()
	for _, r := range recs {
		if err := w.s.Replay(r); err != nil {
			w.t.Fatalf("replay %x: %v", r.Key, err)
		}
	}
	w.log = append(w.log, recs...)
	w.checkOwnership()
}

// checkOwnership: no partition is held (assigned or pending revocation) by two members.
func (w *world) checkOwnership() {
	w.t.Helper()
	for _, g := range w.s.Groups {
		seen := map[TP]string{}
		for _, m := range g.Members {
			for _, set := range []Parts{m.Assigned, m.Pending} {
				for tp := range set {
					if o, ok := seen[tp]; ok && o != m.ID {
						w.t.Fatalf("group %s: partition %v held by %s and %s", g.ID, tp, o, m.ID)
					}
					seen[tp] = m.ID
				}
			}
		}
	}
}

func (w *world) hb(req *kmsg.ConsumerGroupHeartbeatRequest) HeartbeatOutput {
	w.t.Helper()
	if code, msg := ValidateRequest(req, w.cfg); code != 0 {
		return HeartbeatOutput{Response: ErrorResponse(code, msg)}
	}
	var cat Catalog = w.cat
	if w.snap != nil {
		cat = w.snap
	}
	out := w.s.Heartbeat(HeartbeatInput{Req: req, ClientID: "c", ClientHost: "/127.0.0.1", Catalog: cat, Config: w.cfg, Now: w.now, NewMemberID: "generated"})
	if out.Response.ErrorCode == 0 {
		w.apply(out.Records)
	} else if len(out.Records) > 0 {
		w.t.Fatalf("error answer with records")
	}
	return out
}

func join(group, member string, names ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, member, 0, 60000
	r.SubscribedTopicNames = append([]string{}, names...)
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

// beat is a steady heartbeat reporting owned partitions (nil: not reported).
func beat(group, member string, epoch int32, owned Parts) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = group, member, epoch
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range owned.Sorted() {
			wt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			wt.TopicID, wt.Partitions = t.Topic, t.Partitions
			r.Topics = append(r.Topics, wt)
		}
	}
	return r
}

func fromWire(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) Parts {
	if a == nil {
		return nil
	}
	out := Parts{}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out[TP{Topic: t.TopicID, Partition: p}] = struct{}{}
		}
	}
	return out
}

func parts(topic string, ps ...int32) Parts {
	out := Parts{}
	for _, p := range ps {
		out[TP{Topic: tid(topic), Partition: p}] = struct{}{}
	}
	return out
}

func errOf(out HeartbeatOutput) string {
	r := out.Response
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return fmt.Sprintf("%d %s", r.ErrorCode, msg)
}
