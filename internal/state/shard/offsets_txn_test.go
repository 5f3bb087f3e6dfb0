package shard

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memShard runs one group shard over an in-memory log; onLoaded, if set, runs after each load.
func memShard(t *testing.T, b *memlog.Backend, onLoaded func(*runtime.Ctx[*Machine], *Machine)) *runtime.Shard[*Machine] {
	t.Helper()
	s := runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: b, OnLoaded: onLoaded})
	s.Start()
	for s.State() != runtime.StateActive {
		if s.State() == runtime.StateFailed {
			t.Fatal("shard failed to load")
		}
		time.Sleep(time.Millisecond)
	}
	return s
}

func closeShard(s *runtime.Shard[*Machine]) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Close(ctx)
}

func write[T any](t *testing.T, s *runtime.Shard[*Machine], op runtime.WriteOp[*Machine]) T {
	t.Helper()
	v, err := s.Write(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	return v.(T)
}

func parts(tps ...offsets.TopicPartition) []CommitPartition {
	out := make([]CommitPartition, len(tps))
	for i, tp := range tps {
		out[i] = CommitPartition{TopicPartition: tp, Offset: int64(100 + i), LeaderEpoch: -1, RetentionMs: -1}
	}
	return out
}

func txnCommit(group string, generation int32, member string, pid int64, epoch int16, ps []CommitPartition) runtime.WriteOp[*Machine] {
	return TxnCommitOffsets(TxnCommitRequest{
		CommitRequest: CommitRequest{Group: group, Generation: generation, MemberID: member, Version: 3, Partitions: ps, MaxMetadata: 10},
		ProducerID:    pid, ProducerEpoch: epoch,
	})
}

var (
	tp0 = offsets.TopicPartition{Topic: "t", Partition: 0}
	tp1 = offsets.TopicPartition{Topic: "t", Partition: 1}
)

// Spec coordinator-apis §4.2 steps 4-6 for a simple group, as (state, request) -> codes.
func TestSpec4_2_TxnOffsetCommitValidation(t *testing.T) {
	long := "0123456789ABC"
	cases := []struct {
		name  string
		setup func(t *testing.T, s *runtime.Shard[*Machine])
		op    runtime.WriteOp[*Machine]
		want  []int16
		// staged reports whether tp0 must be staged afterwards.
		staged bool
	}{
		{name: "missing group, generation -1 creates a simple group",
			op: txnCommit("g", -1, "", 1, 0, parts(tp0)), want: []int16{0}, staged: true},
		{name: "missing group, generation 3",
			op: txnCommit("g", 3, "m", 1, 0, parts(tp0)), want: []int16{kerr.GroupIDNotFound.Code}},
		{name: "simple group, member id",
			setup: func(t *testing.T, s *runtime.Shard[*Machine]) {
				write[[]int16](t, s, CommitOffsets(CommitRequest{Group: "g", Generation: -1, Version: 8, Partitions: parts(tp1), MaxMetadata: 10}))
			},
			op: txnCommit("g", 1, "m", 1, 0, parts(tp0)), want: []int16{kerr.UnknownMemberID.Code}},
		{name: "metadata too large fails that partition only",
			op: func() runtime.WriteOp[*Machine] {
				ps := parts(tp0, tp1)
				ps[1].Metadata = &long
				return txnCommit("g", -1, "", 1, 0, ps)
			}(), want: []int16{0, kerr.OffsetMetadataTooLarge.Code}, staged: true},
		{name: "older producer epoch",
			setup: func(t *testing.T, s *runtime.Shard[*Machine]) {
				write[[]int16](t, s, txnCommit("other", -1, "", 1, 7, parts(tp1)))
			},
			op: txnCommit("g", -1, "", 1, 6, parts(tp0)), want: []int16{kerr.InvalidProducerEpoch.Code}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := memShard(t, memlog.New(), nil)
			defer closeShard(s)
			if c.setup != nil {
				c.setup(t, s)
			}
			if got := write[[]int16](t, s, c.op); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
			v, _ := s.Read(context.Background(), func(m *Machine) (any, error) { return m.Offsets.HasPending("g", "t", 0), nil })
			if v.(bool) != c.staged {
				t.Fatalf("staged %v, want %v", v, c.staged)
			}
		})
	}
}

// T61, T71: RequireStable reports staged partitions as unstable until the marker, then the
// committed value; a non-stable fetch ignores staged offsets. Staged offsets survive a
// restart.
func TestSpec3_3_RequireStableAndMarkers(t *testing.T) {
	b := memlog.New()
	s := memShard(t, b, nil)
	write[[]int16](t, s, CommitOffsets(CommitRequest{Group: "g", Generation: -1, Version: 8, Partitions: parts(tp0, tp1), MaxMetadata: 10}))
	write[[]int16](t, s, txnCommit("g", -1, "", 9, 0, []CommitPartition{{TopicPartition: tp0, Offset: 500, LeaderEpoch: -1}}))
	stable := func(s *runtime.Shard[*Machine]) []FetchPartition {
		return write[[]FetchPartition](t, s, FetchOffsetsStable("g", []offsets.TopicPartition{tp0, tp1}))
	}
	got := stable(s)
	if !got[0].Unstable || got[1].Unstable || got[1].Committed.Offset != 101 {
		t.Fatalf("stable fetch: %+v", got)
	}
	v, _ := s.Read(context.Background(), FetchOffsets("g", []offsets.TopicPartition{tp0}))
	if fp := v.([]FetchPartition)[0]; fp.Unstable || fp.Committed.Offset != 100 {
		t.Fatalf("plain fetch: %+v", fp)
	}
	closeShard(s)
	s = memShard(t, b, nil)
	defer closeShard(s)
	if got := stable(s); !got[0].Unstable {
		t.Fatalf("staged offset lost on restart: %+v", got)
	}
	if code := write[int16](t, s, CompleteTxn(9, 0, 0, true, 0)); code != 0 {
		t.Fatalf("marker: %d", code)
	}
	if got := stable(s); got[0].Unstable || got[0].Committed.Offset != 500 {
		t.Fatalf("after COMMIT: %+v", got)
	}
}

// §3.4 for simple groups: a missing group is GROUP_ID_NOT_FOUND; otherwise every partition is
// NONE and its committed and staged offsets are gone.
func TestSpec3_4_OffsetDeleteSimpleGroup(t *testing.T) {
	s := memShard(t, memlog.New(), nil)
	defer closeShard(s)
	if res := write[DeleteOffsetsResult](t, s, DeleteOffsets("g", []offsets.TopicPartition{tp0})); res.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("missing group: %+v", res)
	}
	write[[]int16](t, s, CommitOffsets(CommitRequest{Group: "g", Generation: -1, Version: 8, Partitions: parts(tp0, tp1), MaxMetadata: 10}))
	write[[]int16](t, s, txnCommit("g", -1, "", 9, 0, parts(tp0)))
	res := write[DeleteOffsetsResult](t, s, DeleteOffsets("g", []offsets.TopicPartition{tp0, {Topic: "u", Partition: 3}}))
	if res.Code != 0 || !reflect.DeepEqual(res.Codes, []int16{0, 0}) {
		t.Fatalf("delete: %+v", res)
	}
	got := write[[]FetchPartition](t, s, FetchOffsetsStable("g", []offsets.TopicPartition{tp0, tp1}))
	if got[0].Found || got[0].Unstable || !got[1].Found {
		t.Fatalf("after delete: %+v", got)
	}
	// The marker of the producer whose staged offset was deleted brings nothing back (T78).
	write[int16](t, s, CompleteTxn(9, 0, 0, true, 0))
	if got := write[[]FetchPartition](t, s, FetchOffsetsStable("g", []offsets.TopicPartition{tp0})); got[0].Found {
		t.Fatalf("deleted staged offset reappeared: %+v", got)
	}
}

// §3.5 on a running shard with a fake clock: the timer armed on load expires offsets after
// the retention, keeps a partition with a staged offset (and so the group), drops offsets of
// topics gone from the catalog, and is re-armed after a reload.
func TestSpec3_5_RetentionSweepOnShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memlog.New()
		var mu sync.Mutex
		catalog := map[string]bool{"t": true, "gone": true}
		cfg := RetentionConfig{
			Retention: 10 * time.Minute, CheckInterval: time.Minute, ProducerExpiration: time.Hour,
			Topics: func(context.Context) (offsets.TopicLookup, error) {
				mu.Lock()
				defer mu.Unlock()
				snap := map[string]bool{}
				for k, v := range catalog {
					snap[k] = v
				}
				return func(topic string) ([16]byte, bool) { return [16]byte{}, snap[topic] }, nil
			},
		}
		onLoaded := func(c *runtime.Ctx[*Machine], _ *Machine) { ArmRetention(c, cfg) }
		s := runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: b, OnLoaded: onLoaded})
		s.Start()
		defer func() { s.Close(context.Background()) }()
		synctest.Wait()
		ctx := context.Background()
		commit := func(group string, tps ...offsets.TopicPartition) {
			if _, err := s.Write(ctx, CommitOffsets(CommitRequest{Group: group, Generation: -1, Version: 8, Partitions: parts(tps...), MaxMetadata: 10})); err != nil {
				t.Fatal(err)
			}
		}
		groups := func() []string {
			v, _ := s.Read(ctx, func(m *Machine) (any, error) { return m.Offsets.Groups(), nil })
			return v.([]string)
		}
		commit("a", tp0, tp1)
		commit("b", tp0)
		commit("c", offsets.TopicPartition{Topic: "gone", Partition: 0})
		if _, err := s.Write(ctx, txnCommit("b", -1, "", 5, 0, parts(tp0))); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		catalog["gone"] = false
		mu.Unlock()

		time.Sleep(90 * time.Second) // one check: only the deleted topic's offsets go
		synctest.Wait()
		if got := groups(); !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Fatalf("after first check: %v", got)
		}
		time.Sleep(5 * time.Minute)
		commit("a", tp1) // recommitted: its retention restarts
		time.Sleep(5*time.Minute + 30*time.Second)
		synctest.Wait()
		v, _ := s.Read(ctx, FetchOffsets("a", []offsets.TopicPartition{tp0, tp1}))
		if fp := v.([]FetchPartition); fp[0].Found || !fp[1].Found {
			t.Fatalf("a after 11 minutes: %+v", fp)
		}
		// b's only committed offset has a staged offset on the same partition: it stays.
		if got := groups(); !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Fatalf("groups after retention: %v", got)
		}
		// After an abort nothing protects b any more; a reload re-arms the timer.
		s.Write(ctx, CompleteTxn(5, 0, 0, false, 0))
		s.Close(ctx)
		s = runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: b, OnLoaded: onLoaded})
		s.Start()
		synctest.Wait()
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if got := groups(); len(got) != 0 {
			t.Fatalf("groups after the re-armed sweep: %v", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		v, _ = s.Read(ctx, func(m *Machine) (any, error) { _, ok := m.Offsets.Producer(5); return ok, nil })
		if v.(bool) {
			t.Fatal("idle producer not forgotten after producer.id.expiration.ms")
		}
	})
}

// ARCHITECTURE §6.1 with transactions: random commits, staged offsets, markers, OffsetDeletes
// and sweeps over the real segmented log; the offsets state replayed from the log, and from
// the compacted log, deep-equals the durable view (log positions included, which order staged
// against regular commits).
func TestReplayEquivalenceWithTransactions(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	s := startOne(t, st)
	rng := rand.New(rand.NewSource(11))
	ctx := context.Background()
	tp := func() offsets.TopicPartition {
		return offsets.TopicPartition{Topic: fmt.Sprint("t", rng.Intn(2)), Partition: int32(rng.Intn(3))}
	}
	for i := 0; i < 1500; i++ {
		group := fmt.Sprintf("g%d", rng.Intn(6))
		pid := int64(rng.Intn(4))
		var op runtime.WriteOp[*Machine]
		switch r := rng.Intn(10); {
		case r < 4:
			op = CommitOffsets(CommitRequest{Group: group, Generation: -1, Version: 8, Partitions: parts(tp()), MaxMetadata: 10})
		case r < 7:
			op = txnCommit(group, -1, "", pid, 0, parts(tp()))
		case r < 9:
			op = CompleteTxn(pid, 0, 0, rng.Intn(2) == 0, 0)
		default:
			op = DeleteOffsets(group, []offsets.TopicPartition{tp()})
		}
		if _, err := s.Write(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Write(ctx, DropDeletedTopicOffsets(RetentionConfig{}, func(topic string) ([16]byte, bool) { return [16]byte{}, topic == "t0" }, time.Now())); err != nil {
		t.Fatal(err)
	}
	durable := func(s *runtime.Shard[*Machine]) *offsets.State {
		v, err := s.Read(ctx, func(m *Machine) (any, error) { return m.Offsets, nil })
		if err != nil {
			t.Fatal(err)
		}
		return v.(*offsets.State)
	}
	want := durable(s)
	s.Close(ctx)
	st.Close()

	st = openStore(t, dir)
	s = startOne(t, st)
	if got := durable(s); !reflect.DeepEqual(got, want) {
		t.Fatal("offsets replayed from the log differ from the durable view")
	}
	s.Close(ctx)
	st.Close()

	if before, after := compactDir(t, dir, openStore); after >= before {
		t.Fatalf("compaction kept %d of %d records", after, before)
	}
	st = openStore(t, dir)
	defer st.Close()
	s = startOne(t, st)
	defer s.Close(ctx)
	if got := durable(s); !reflect.DeepEqual(got, want) {
		t.Fatal("offsets replayed from the compacted log differ")
	}
}

// Kafka's OffsetDeleteRequestTest.testOffsetDeleteWithOldConsumerGroupProtocol: a Stable consumer
// group whose member joined with empty protocol metadata has subscriptions nobody can read, so
// every topic counts as subscribed (GROUP_SUBSCRIBED_TO_TOPIC) and the offset stays.
func TestOffsetDeleteUnreadableSubscriptionIsSubscribed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newClassicHarness(t, nil)
		defer h.close()
		req := jreq("g", "", 3)
		req.Protocols = []classic.Protocol{{Name: "range", Metadata: []byte{}}}
		r := h.join(req)
		code(t, "join", r.Code, 0)
		code(t, "sync", h.sync(sreq("g", r.MemberID, r.Generation, map[string][]byte{r.MemberID: {}})).Code, 0)
		code(t, "commit", h.commit("g", r.Generation, r.MemberID, nil), 0)
		if d := h.describe("g"); d.State != "Stable" {
			t.Fatalf("state %s", d.State)
		}
		res := write[DeleteOffsetsResult](t, h.s, DeleteOffsets("g", []offsets.TopicPartition{{Topic: "t", Partition: 0}}))
		if res.Code != 0 || !reflect.DeepEqual(res.Codes, []int16{kerr.GroupSubscribedToTopic.Code}) {
			t.Fatalf("delete: %+v", res)
		}
		if got := write[[]FetchPartition](t, h.s, FetchOffsetsStable("g", []offsets.TopicPartition{{Topic: "t", Partition: 0}})); !got[0].Found {
			t.Fatalf("offset deleted: %+v", got)
		}
	})
}

// producer.id.max.per.shard: markers for producer ids the shard does not know and that staged
// nothing record their epochs only while the shard remembers fewer producers than the cap;
// beyond it they are answered NONE and write nothing. A producer that stages offsets, and a
// marker for a known producer, are not limited, so fencing of known producers is unchanged.
func TestMarkersForUnknownProducersBounded(t *testing.T) {
	b := memlog.New()
	s := memShard(t, b, nil)
	defer func() { closeShard(s) }()
	for pid := int64(1); pid <= 10; pid++ {
		if code := write[int16](t, s, CompleteTxn(pid, 1, 0, true, 3)); code != 0 {
			t.Fatalf("marker for producer %d: %d", pid, code)
		}
	}
	count := func() int {
		v, _ := s.Read(context.Background(), func(m *Machine) (any, error) { return m.Offsets.ProducerCount(), nil })
		return v.(int)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d producers remembered after markers for 10 unknown ones, want the cap of 3", n)
	}
	// A remembered producer's epoch still fences, and a marker raising it is still recorded.
	if code := write[int16](t, s, CompleteTxn(1, 0, 0, true, 3)); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older epoch of a remembered producer: %d", code)
	}
	write[int16](t, s, CompleteTxn(1, 2, 0, true, 3))
	if codes := write[[]int16](t, s, txnCommit("g", -1, "", 1, 1, []CommitPartition{{TopicPartition: tp0, Offset: 5, LeaderEpoch: -1}})); codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("TxnOffsetCommit with the epoch before the marker's bump: %v", codes)
	}
	// Staging is not limited by the cap, and its marker completes the transaction.
	write[[]int16](t, s, txnCommit("g", -1, "", 42, 0, []CommitPartition{{TopicPartition: tp0, Offset: 7, LeaderEpoch: -1}}))
	if code := write[int16](t, s, CompleteTxn(42, 0, 0, true, 3)); code != 0 {
		t.Fatalf("marker for a producer with staged offsets: %d", code)
	}
	v, _ := s.Read(context.Background(), FetchOffsets("g", []offsets.TopicPartition{tp0}))
	if fp := v.([]FetchPartition)[0]; fp.Committed.Offset != 7 {
		t.Fatalf("committed offset %+v after the COMMIT marker", fp)
	}
}
