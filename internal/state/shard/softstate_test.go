package shard

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Soft state (issue 12): a steady heartbeat moves only its member's session deadline, a timer
// and never a record, so it must not wait behind an fsync pending for another group of its
// shard; an answer that depends on its own group's pending record must still wait for it.

// async runs a shard write on its own goroutine and returns where its answer arrives.
func async(s *runtime.Shard[*Machine], op runtime.WriteOp[*Machine]) <-chan any {
	ch := make(chan any, 1)
	go func() {
		v, err := s.Write(context.Background(), op)
		if err != nil {
			v = err
		}
		ch <- v
	}()
	synctest.Wait()
	return ch
}

// answered reports whether ch has its answer once everything in the bubble is idle.
func answered(ch <-chan any) (any, bool) {
	synctest.Wait()
	select {
	case v := <-ch:
		return v, true
	default:
		return nil, false
	}
}

// commitOther is a simple group's offset commit: a record of another group than the heartbeats'.
func commitOther() runtime.WriteOp[*Machine] {
	return CommitOffsets(CommitRequest{Group: "other", Generation: -1, Version: 9, MaxMetadata: 100,
		Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "foo", Partition: 0}, Offset: 7}}})
}

// setGroupConfig writes a group's config overrides: a record of the group's own scope that its
// heartbeat's answer (the interval it tells members) depends on.
func setGroupConfig(group, name, value string) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], _ *Machine) runtime.Result {
		return runtime.Result{Records: []log.Record{GroupConfigRecord(group, map[string]string{name: value})}}
	}
}

// steadyStreams heartbeats a member, reporting what it owns, until a heartbeat appends nothing.
func (h *streamsHarness) steady(group, member string) {
	h.t.Helper()
	for range 10 {
		before := len(h.b.Records(0))
		if r := h.hb(h.owning(group, member)); r.ErrorCode != 0 {
			h.t.Fatalf("heartbeat %+v", r)
		}
		if len(h.b.Records(0)) == before {
			return
		}
	}
	h.t.Fatal("the member's heartbeats kept appending records")
}

func (h *streamsHarness) beat(group, member string) runtime.WriteOp[*Machine] {
	return StreamsHeartbeat(streamsInput(h, h.owning(group, member)))
}

// steady heartbeats a consumer member, reporting what it owns, until a heartbeat appends
// nothing; it returns the member's epoch and assignment.
func (h *consumerHarness) steady(group, member string) (int32, *kmsg.ConsumerGroupHeartbeatResponseAssignment) {
	h.t.Helper()
	r := h.hb(consumerJoin(group, member))
	epoch, owned := r.MemberEpoch, r.Assignment
	for range 10 {
		before := len(h.b.Records(0))
		r = h.hb(consumerBeat(group, member, epoch, owned))
		if r.ErrorCode != 0 {
			h.t.Fatalf("heartbeat %+v", r)
		}
		epoch = r.MemberEpoch
		if r.Assignment != nil {
			owned = r.Assignment
		}
		if len(h.b.Records(0)) == before {
			return epoch, owned
		}
	}
	h.t.Fatal("the member's heartbeats kept appending records")
	return 0, nil
}

func (h *consumerHarness) beat(group, member string, epoch int32, owned *kmsg.ConsumerGroupHeartbeatResponseAssignment) runtime.WriteOp[*Machine] {
	return ConsumerHeartbeat(consumerInput(h, consumerBeat(group, member, epoch, owned)))
}

// softStateProtocol is one heartbeat protocol under the soft-state tests.
type softStateProtocol struct {
	name string
	// intervalConfig is the group config key of the interval its heartbeats answer.
	intervalConfig string
	// steadyMember starts a shard whose group g has one steady member a, and returns a's next
	// steady heartbeat, built before the test holds fsyncs (building it may read the member's
	// state, and a read waits for pending records).
	steadyMember func(t *testing.T) (b *memlog.Backend, s *runtime.Shard[*Machine], beat runtime.WriteOp[*Machine], close func())
	// answer is a heartbeat answer's error code and interval, and the response to show.
	answer func(t *testing.T, v any) (code int16, intervalMs int32, resp any)
}

var softStateProtocols = []softStateProtocol{
	{
		name:           "streams",
		intervalConfig: "streams.heartbeat.interval.ms",
		steadyMember: func(t *testing.T) (*memlog.Backend, *runtime.Shard[*Machine], runtime.WriteOp[*Machine], func()) {
			h := newStreamsHarness(t)
			h.hb(streamsJoin("g", "a"))
			h.steady("g", "a")
			return h.b, h.s, h.beat("g", "a"), h.close
		},
		answer: func(t *testing.T, v any) (int16, int32, any) {
			r := streamsResponse(t, v)
			return r.ErrorCode, r.HeartbeatIntervalMillis, r
		},
	},
	{
		name:           "consumer",
		intervalConfig: "consumer.heartbeat.interval.ms",
		steadyMember: func(t *testing.T) (*memlog.Backend, *runtime.Shard[*Machine], runtime.WriteOp[*Machine], func()) {
			h := newConsumerHarness(t)
			epoch, owned := h.steady("g", "a")
			return h.b, h.s, h.beat("g", "a", epoch, owned), h.close
		},
		answer: func(t *testing.T, v any) (int16, int32, any) {
			r := consumerResponse(t, v)
			return r.ErrorCode, r.HeartbeatIntervalMillis, r
		},
	},
}

// forEachProtocolHeld runs test for each protocol in a synctest bubble of its own, on a shard
// with one steady member whose log holds every fsync until the test releases it.
func forEachProtocolHeld(t *testing.T, test func(t *testing.T, p softStateProtocol, b *memlog.Backend, s *runtime.Shard[*Machine], steadyBeat runtime.WriteOp[*Machine])) {
	for _, p := range softStateProtocols {
		t.Run(p.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, s, steadyBeat, closeShard := p.steadyMember(t)
				defer closeShard()
				b.Hold(true)
				defer b.Hold(false)
				defer b.Release(0) // a failed check leaves records pending
				test(t, p, b, s, steadyBeat)
			})
		})
	}
}

func TestSteadyHeartbeatDoesNotWaitForAnotherGroupsFsync(t *testing.T) {
	forEachProtocolHeld(t, func(t *testing.T, p softStateProtocol, b *memlog.Backend, s *runtime.Shard[*Machine], steadyBeat runtime.WriteOp[*Machine]) {
		commit := async(s, commitOther())
		if _, ok := answered(commit); ok {
			t.Fatal("commit answered before its record was durable")
		}
		v, ok := answered(async(s, steadyBeat))
		if !ok {
			t.Fatal("steady heartbeat waited for another group's pending fsync")
		}
		if code, _, r := p.answer(t, v); code != 0 {
			t.Fatalf("heartbeat %+v", r)
		}
		if n := b.Pending(0); n != 1 {
			t.Fatalf("%d batches pending, want the commit's only: the steady heartbeat appended", n)
		}
		b.Release(0)
		if _, ok := answered(commit); !ok {
			t.Fatal("commit not answered once durable")
		}
	})
}

func TestHeartbeatWaitsForItsOwnGroupsPendingRecord(t *testing.T) {
	forEachProtocolHeld(t, func(t *testing.T, p softStateProtocol, b *memlog.Backend, s *runtime.Shard[*Machine], steadyBeat runtime.WriteOp[*Machine]) {
		cfg := async(s, setGroupConfig("g", p.intervalConfig, "1234"))
		beat := async(s, steadyBeat)
		if _, ok := answered(beat); ok {
			t.Fatal("heartbeat answered from its group's config before that config was durable")
		}
		b.Release(0)
		if _, ok := answered(cfg); !ok {
			t.Fatal("config write not answered once durable")
		}
		v, ok := answered(beat)
		if !ok {
			t.Fatal("heartbeat not answered once its group's config was durable")
		}
		if code, interval, r := p.answer(t, v); code != 0 || interval != 1234 {
			t.Fatalf("heartbeat %+v, want interval 1234 from the group's config", r)
		}
	})
}

func streamsInput(h *streamsHarness, req *kmsg.StreamsGroupHeartbeatRequest) streams.HeartbeatInput {
	if code, msg := streams.ValidateRequest(req); code != 0 {
		h.t.Fatalf("invalid request %d %s", code, msg)
	}
	return streams.HeartbeatInput{Req: req, Version: 1, Catalog: h.cat, Config: h.cfg}
}

func streamsResponse(t *testing.T, v any) *kmsg.StreamsGroupHeartbeatResponse {
	t.Helper()
	return heartbeatOutput[streams.HeartbeatOutput](t, v).Response
}

func consumerInput(h *consumerHarness, req *kmsg.ConsumerGroupHeartbeatRequest) consumer.HeartbeatInput {
	if code, msg := consumer.ValidateRequest(req, h.cfg); code != 0 {
		h.t.Fatalf("invalid request %d %s", code, msg)
	}
	return consumer.HeartbeatInput{Req: req, Catalog: h.cat, Config: h.cfg}
}

func consumerResponse(t *testing.T, v any) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	return heartbeatOutput[consumer.HeartbeatOutput](t, v).Response
}

// heartbeatOutput is a heartbeat write's answer v as its protocol's output type; anything else
// (an error) fails the test.
func heartbeatOutput[T any](t *testing.T, v any) T {
	t.Helper()
	out, ok := v.(T)
	if !ok {
		t.Fatalf("heartbeat answered %v", v)
	}
	return out
}
