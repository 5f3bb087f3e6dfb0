package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/segment"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsView is a streams group without its soft state (spec streams §10.4: not persisted by
// Kafka either); members are compared whole.
type streamsView struct {
	ID                                             string
	Epoch, ValidatedTopologyEpoch, AssignmentEpoch int32
	StoredDescriptionEpoch, FailedDescriptionEpoch int32
	MetadataHash, AssignmentTimestamp              int64
	AssignmentConfigs                              map[string]string
	Topology                                       *streams.Topology
	Members                                        map[string]*streams.Member
	Targets                                        map[string]streams.Roles
}

// machineView is everything a group shard holds that its log must rebuild.
type machineView struct {
	Offsets      *offsets.State
	Classic      map[string]*classic.Group
	Streams      map[string]streamsView
	GroupConfigs map[string]map[string]string
	UnknownKinds int
}

func viewOf(m *Machine) machineView {
	v := machineView{Offsets: m.Offsets, Classic: map[string]*classic.Group{}, Streams: map[string]streamsView{}, UnknownKinds: m.UnknownKinds,
		GroupConfigs: map[string]map[string]string{}}
	for id := range m.GroupConfigs {
		v.GroupConfigs[id] = m.GroupConfigsOf(id)
	}
	for _, id := range m.Classic.Groups() {
		v.Classic[id] = m.Classic.Group(id).Clone()
	}
	for id, g := range m.Streams.Groups {
		v.Streams[id] = streamsView{ID: g.ID, Epoch: g.Epoch, ValidatedTopologyEpoch: g.ValidatedTopologyEpoch, AssignmentEpoch: g.AssignmentEpoch,
			StoredDescriptionEpoch: g.StoredDescriptionEpoch, FailedDescriptionEpoch: g.FailedDescriptionEpoch,
			MetadataHash: g.MetadataHash, AssignmentTimestamp: g.AssignmentTimestamp, AssignmentConfigs: g.AssignmentConfigs,
			Topology: g.Topology, Members: g.Members, Targets: g.Targets}
	}
	return v
}

func durableView(t *testing.T, s *runtime.Shard[*Machine]) machineView {
	t.Helper()
	v, err := s.Read(context.Background(), func(m *Machine) (any, error) { return viewOf(m), nil })
	if err != nil {
		t.Fatal(err)
	}
	return v.(machineView)
}

func catalogView(t *testing.T, s *runtime.Shard[*meta.Catalog]) []*meta.Topic {
	t.Helper()
	v, err := s.Read(context.Background(), meta.Read)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*meta.Snapshot).Topics()
}

// openSmallStore is openStore with the smallest segments, for the catalog's short history.
func openSmallStore(t testing.TB, dir string) *segment.Store {
	t.Helper()
	st, err := segment.Open(segment.Options{Dir: dir, Shards: 1, SegmentBytes: 4096, DeleteRetention: 0})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startAny[M runtime.Machine](t *testing.T, st *segment.Store, newM func() M) *runtime.Shard[M] {
	t.Helper()
	s := runtime.New(runtime.Options[M]{Shard: 0, New: newM, Backend: st})
	s.Start()
	for s.State() != runtime.StateActive {
		if s.State() == runtime.StateFailed {
			t.Fatal("shard failed to load")
		}
		time.Sleep(time.Millisecond)
	}
	return s
}

// compactDir compacts shard 0 of the log in dir through the log API (not a timer, so the test
// knows it ran to the end) and returns the record counts before and after.
func compactDir(t *testing.T, dir string, open func(testing.TB, string) *segment.Store) (before, after int64) {
	t.Helper()
	count := func() int64 {
		rep, err := segment.Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		return rep.ShardReports[0].Records
	}
	before = count()
	st := open(t, dir)
	l, err := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Load(func(int64, log.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return before, count()
}

// Issue 10, defect 10: ARCHITECTURE §6.1 over the real segmented log for every record kind. Random
// offset commits and deletes, transactional offsets and markers, classic groups (join, sync,
// rejoin, leave, delete), streams groups (join, reconcile, leave, delete), topology description
// epochs and the topic catalog; then the state rebuilt from the log, and from the compacted log,
// equals the live durable state, kind by kind.
func TestReplayEquivalenceAllKindsOverSegmentLogAndCompaction(t *testing.T) {
	dir, metaDir := t.TempDir(), t.TempDir()
	st, mst := openStore(t, dir), openSmallStore(t, metaDir)
	s, ms := startOne(t, st), startAny(t, mst, meta.NewCatalog)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewSource(10))
	write := func(op runtime.WriteOp[*Machine]) any {
		t.Helper()
		v, err := s.Write(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Timers must not change state between the snapshot and the restart: every timeout is
	// far longer than the test.
	ccfg := classic.DefaultConfig()
	ccfg.InitialRebalanceDelayMs = 0
	scfg := streams.DefaultConfig()
	scfg.InitialRebalanceDelay, scfg.AssignmentInterval, scfg.SessionTimeout = 0, 0, time.Hour
	scfg.Lookup = assign.Lookup
	cat := streamsCatalog{"foo": {Name: "foo", ID: [16]byte{1}, Partitions: 4}}

	type classicMember struct {
		id  string
		gen int32
	}
	classicMembers := map[string]*classicMember{}
	classicJoin := func(group, member string) {
		req := classic.JoinRequest{Group: group, MemberID: member, ClientID: "c", ClientHost: "/h", SessionTimeoutMs: 600000,
			RebalanceTimeout: 600000, ProtocolType: "consumer", Protocols: []classic.Protocol{{Name: "range", Metadata: []byte(fmt.Sprint("md", rng.Intn(100)))}}, Version: 3}
		r := write(JoinGroup(ccfg, req)).(*classic.JoinResult)
		if r.Code != 0 {
			delete(classicMembers, group)
			return
		}
		classicMembers[group] = &classicMember{id: r.MemberID, gen: r.Generation}
		write(SyncGroup(ccfg, classic.SyncRequest{Group: group, MemberID: r.MemberID, Generation: r.Generation, Version: 3,
			Assignments: map[string][]byte{r.MemberID: []byte(fmt.Sprint("a", rng.Intn(100)))}}))
	}
	streamsMembers := map[string]map[string]int32{} // group -> member -> epoch
	streamsHB := func(req *kmsg.StreamsGroupHeartbeatRequest) *kmsg.StreamsGroupHeartbeatResponse {
		if code, msg := streams.ValidateRequest(req); code != 0 {
			t.Fatalf("invalid streams request %d %s", code, msg)
		}
		return write(StreamsHeartbeat(streams.HeartbeatInput{Req: req, Version: 1, Catalog: cat, Config: scfg})).(streams.HeartbeatOutput).Response
	}
	topics := []string{}
	if _, err := ms.Write(ctx, meta.CreateTopics([]meta.NewTopic{{Name: "filler", Partitions: 1, ReplicationFactor: -1}}, false, meta.Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1})); err != nil {
		t.Fatal(err)
	}

	tp := func() offsets.TopicPartition {
		return offsets.TopicPartition{Topic: fmt.Sprint("t", rng.Intn(3)), Partition: int32(rng.Intn(4))}
	}
	for i := 0; i < 1500; i++ {
		switch r := rng.Intn(20); {
		case r < 4:
			write(CommitOffsets(CommitRequest{Group: fmt.Sprint("g", rng.Intn(8)), Generation: -1, Version: 8, MaxMetadata: 4096,
				Partitions: []CommitPartition{{TopicPartition: tp(), Offset: rng.Int63n(1 << 40), LeaderEpoch: -1, RetentionMs: -1}}}))
		case r < 5:
			write(DeleteOffsets(fmt.Sprint("g", rng.Intn(8)), []offsets.TopicPartition{tp()}))
		case r < 7:
			write(txnCommit(fmt.Sprint("g", rng.Intn(8)), -1, "", int64(rng.Intn(4)), 0, parts(tp())))
		case r < 8:
			write(CompleteTxn(int64(rng.Intn(4)), 0, 0, rng.Intn(2) == 0, 0))
		case r < 12:
			group := fmt.Sprint("c", rng.Intn(5))
			m := classicMembers[group]
			switch {
			case m == nil:
				classicJoin(group, "")
			case rng.Intn(4) == 0:
				write(LeaveGroup(ccfg, group, []classic.LeaveMember{{MemberID: m.id}}))
				delete(classicMembers, group)
				if rng.Intn(2) == 0 {
					write(DeleteClassicGroup(group))
				}
			case rng.Intn(3) == 0:
				classicJoin(group, m.id)
			default:
				write(CommitOffsets(CommitRequest{Group: group, Generation: m.gen, MemberID: m.id, Version: 8, MaxMetadata: 4096,
					Partitions: []CommitPartition{{TopicPartition: tp(), Offset: rng.Int63n(1000), LeaderEpoch: -1, RetentionMs: -1}}}))
			}
		case r < 16:
			group, member := fmt.Sprint("s", rng.Intn(3)), fmt.Sprint("m", rng.Intn(3))
			if streamsMembers[group] == nil {
				streamsMembers[group] = map[string]int32{}
			}
			epoch, joined := streamsMembers[group][member]
			switch {
			case !joined:
				req := streamsJoin(group, member)
				req.RebalanceTimeoutMillis = 600000
				if rng.Intn(2) == 0 { // a second version of the topology, so topology records differ
					cl := kmsg.NewTopicInfo()
					cl.Topic = group + "-store-changelog"
					req.Topology.Epoch = 1
					req.Topology.Subtopologies[0].StateChangelogTopics = []kmsg.TopicInfo{cl}
				}
				if resp := streamsHB(req); resp.ErrorCode == 0 {
					streamsMembers[group][member] = resp.MemberEpoch
				}
			case rng.Intn(5) == 0:
				streamsHB(streamsBeat(group, member, -1))
				delete(streamsMembers[group], member)
				if len(streamsMembers[group]) == 0 && rng.Intn(2) == 0 {
					write(DeleteStreamsGroup(group))
				}
			default:
				// Report exactly what is assigned, so members reconcile and targets move on.
				v, _ := s.Write(ctx, func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
					req := streamsBeat(group, member, epoch)
					if g := m.Streams.Group(group); g != nil && g.Members[member] != nil {
						mm := g.Members[member]
						req.MemberEpoch = mm.Epoch
						req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = streams.TasksToWire(mm.Assigned[streams.Active]),
							streams.TasksToWire(mm.Assigned[streams.Standby]), streams.TasksToWire(mm.Assigned[streams.Warmup])
					}
					return runtime.Result{Response: req}
				})
				if resp := streamsHB(v.(*kmsg.StreamsGroupHeartbeatRequest)); resp.ErrorCode == 0 {
					streamsMembers[group][member] = resp.MemberEpoch
				} else {
					delete(streamsMembers[group], member)
				}
			}
		case r < 18:
			group := fmt.Sprint("s", rng.Intn(3))
			if rng.Intn(3) == 0 { // group configs: set, change, clear (a tombstone)
				n := rng.Intn(3)
				write(AlterGroupConfigs(group, false, 0, func(cur map[string]string) (map[string]string, error) {
					switch n {
					case 0:
						return map[string]string{}, nil
					default:
						if cur == nil {
							cur = map[string]string{}
						}
						cur[fmt.Sprint("streams.key", n)] = fmt.Sprint(i)
						return cur, nil
					}
				}))
				continue
			}
			switch rng.Intn(4) {
			case 0:
				write(StreamsDescriptionStored(group, int32(rng.Intn(3))))
			case 1:
				write(StreamsDescriptionRejected(group, int32(rng.Intn(3))))
			case 2:
				write(StreamsDescriptionBarrier([]string{group}, rng.Intn(2) == 0))
			default:
				write(StreamsDescriptionFinalize([]string{group}))
			}
		default:
			var op runtime.WriteOp[*meta.Catalog]
			d := meta.Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1}
			switch {
			case len(topics) == 0 || rng.Intn(3) == 0:
				name := fmt.Sprint("topic-", i)
				topics = append(topics, name)
				op = meta.CreateTopics([]meta.NewTopic{{Name: name, Partitions: int32(1 + rng.Intn(4)), ReplicationFactor: -1}}, false, d)
			case rng.Intn(2) == 0:
				k := rng.Intn(len(topics))
				name := topics[k]
				topics = append(topics[:k], topics[k+1:]...)
				op = meta.DeleteTopics([]meta.TopicRef{{Name: &name}})
			default:
				op = meta.CreatePartitions([]meta.PartitionIncrease{{Name: topics[rng.Intn(len(topics))], Count: int32(5 + rng.Intn(20))}}, false, d)
			}
			if _, err := ms.Write(ctx, op); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Seal the history: compaction leaves the active segment alone, so the last record of each
	// key must reach a sealed segment for a compaction bug in any kind to show.
	for i := 0; i < 400; i++ {
		write(CommitOffsets(CommitRequest{Group: "filler", Generation: -1, Version: 8, MaxMetadata: 4096,
			Partitions: []CommitPartition{{TopicPartition: offsets.TopicPartition{Topic: "f", Partition: int32(i % 2)}, Offset: int64(i), LeaderEpoch: -1, RetentionMs: -1}}}))
		if _, err := ms.Write(ctx, meta.CreatePartitions([]meta.PartitionIncrease{{Name: "filler", Count: int32(i + 2)}}, false, meta.Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1})); err != nil {
			t.Fatal(err)
		}
	}
	want, wantCat := durableView(t, s), catalogView(t, ms)
	// Every kind must be there to be compared.
	if len(want.Classic) == 0 || len(want.Streams) == 0 || len(wantCat) == 0 || len(want.Offsets.Groups()) == 0 {
		t.Fatalf("the history left no state of some kind: classic %d streams %d topics %d offset groups %d",
			len(want.Classic), len(want.Streams), len(wantCat), len(want.Offsets.Groups()))
	}
	described := false
	for _, g := range want.Streams {
		described = described || g.StoredDescriptionEpoch >= 0 || g.FailedDescriptionEpoch >= 0
	}
	if !described {
		t.Fatal("no streams group holds a topology description epoch")
	}
	s.Close(ctx)
	ms.Close(ctx)
	st.Close()
	mst.Close()

	check := func(when string) {
		t.Helper()
		st, mst := openStore(t, dir), openSmallStore(t, metaDir)
		s, ms := startOne(t, st), startAny(t, mst, meta.NewCatalog)
		got, gotCat := durableView(t, s), catalogView(t, ms)
		s.Close(ctx)
		ms.Close(ctx)
		st.Close()
		mst.Close()
		if !reflect.DeepEqual(got.Offsets, want.Offsets) {
			t.Errorf("%s: offsets and transactions differ", when)
		}
		for id, g := range want.Classic {
			if !reflect.DeepEqual(got.Classic[id], g) {
				t.Errorf("%s: classic group %s: got %+v, want %+v", when, id, got.Classic[id], g)
			}
		}
		if len(got.Classic) != len(want.Classic) {
			t.Errorf("%s: %d classic groups, want %d", when, len(got.Classic), len(want.Classic))
		}
		for id, g := range want.Streams {
			if !reflect.DeepEqual(got.Streams[id], g) {
				t.Errorf("%s: streams group %s: got %+v, want %+v", when, id, got.Streams[id], g)
			}
		}
		if len(got.Streams) != len(want.Streams) {
			t.Errorf("%s: %d streams groups, want %d", when, len(got.Streams), len(want.Streams))
		}
		if got.UnknownKinds != 0 {
			t.Errorf("%s: %d records of unknown kinds", when, got.UnknownKinds)
		}
		if !reflect.DeepEqual(gotCat, wantCat) {
			t.Errorf("%s: topic catalog differs: %d topics, want %d", when, len(gotCat), len(wantCat))
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	check("replayed from the log")
	seen := refusesNewerValues(t, readAll(t, dir, openStore), replayIntoNewMachine)
	for k := range refusesNewerValues(t, readAll(t, metaDir, openSmallStore), func(r log.Record) error { return meta.NewCatalog().Replay(0, r) }) {
		seen[k] = true
	}
	for _, k := range []records.Kind{records.KindOffsetCommit, records.KindTxnOffset, records.KindTxnProducer, records.KindClassicGroup,
		records.KindStreamsGroupMetadata, records.KindStreamsMemberMetadata, records.KindStreamsTargetMetadata, records.KindStreamsTargetMember,
		records.KindStreamsCurrentMember, records.KindStreamsTopology, records.KindTopic, records.KindGroupConfig} {
		if !seen[k] {
			t.Errorf("no %s record to raise the value version of", k)
		}
	}
	for d, open := range map[string]func(testing.TB, string) *segment.Store{dir: openStore, metaDir: openSmallStore} {
		before, after := compactDir(t, d, open)
		if after >= before {
			t.Fatalf("compaction of %s kept %d of %d records", d, after, before)
		}
		t.Logf("%s: compaction kept %d of %d records", d, after, before)
	}
	check("replayed from the compacted log")
}

// readAll returns every record of shard 0 of the log in dir.
func readAll(t *testing.T, dir string, open func(testing.TB, string) *segment.Store) []log.Record {
	t.Helper()
	st := open(t, dir)
	defer st.Close()
	l, err := st.Open(0, log.Callbacks{Durable: func(int64) {}, Failed: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []log.Record
	if _, err := l.Load(func(_ int64, rec log.Record) error {
		out = append(out, log.Record{Key: slices.Clone(rec.Key), Value: slices.Clone(rec.Value)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// refusesNewerValues replays each record with its value version raised past what this build
// reads into a fresh machine (replay): every kind must refuse it with an error that names the
// kind and says a newer coordinatord wrote it. A value read with another version's layout
// would be silently wrong after a downgrade (the group config record was read whatever its
// version); the refusal fails the shard's load instead, as Kafka fails the load of a
// __consumer_offsets partition holding an unknown record version. It returns the kinds seen.
func refusesNewerValues(t *testing.T, recs []log.Record, replay func(log.Record) error) map[records.Kind]bool {
	t.Helper()
	seen := map[records.Kind]bool{}
	for _, rec := range recs {
		kind, _ := records.KindOf(rec.Key)
		if len(rec.Value) < 2 {
			continue
		}
		newer := slices.Clone(rec.Value)
		binary.BigEndian.PutUint16(newer, binary.BigEndian.Uint16(newer)+0x4000)
		err := replay(log.Record{Key: rec.Key, Value: newer})
		if !errors.Is(err, records.ErrNewerValue) || !strings.Contains(err.Error(), kind.String()) {
			t.Errorf("%s record with value version %d replayed with %v, want a refusal naming the kind",
				kind, binary.BigEndian.Uint16(newer), err)
		}
		seen[kind] = true
	}
	return seen
}

func replayIntoNewMachine(r log.Record) error { return NewMachine().Replay(0, r) }
