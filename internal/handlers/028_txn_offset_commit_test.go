package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Spec coordinator-apis §4.5: the TxnOffsetCommit rows.
func TestSpec4_5_TxnOffsetCommitTranslation(t *testing.T) {
	cases := []struct {
		version   int16
		code      int16
		want      int16
		rationale string
	}{
		{0, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, "pre-2.0 producers crash on 14"},
		{1, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, ""},
		{2, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorLoadInProgress.Code, ""},
		{3, kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code, "120 only from v4"},
		{4, kerr.TransactionAbortable.Code, kerr.TransactionAbortable.Code, ""},
		{5, kerr.GroupIDNotFound.Code, kerr.IllegalGeneration.Code, "KIP-1319: 69 only from v6"},
		{6, kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code, ""},
		{5, kerr.StaleMemberEpoch.Code, kerr.IllegalGeneration.Code, "KIP-1319: 113 only from v6"},
		{6, kerr.StaleMemberEpoch.Code, kerr.StaleMemberEpoch.Code, ""},
		{0, kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerEpoch.Code, ""},
		{3, 0, 0, ""},
	}
	for _, c := range cases {
		if got := txnOffsetCommitCode(c.version, c.code); got != c.want {
			t.Errorf("v%d code %d: got %d, want %d (%s)", c.version, c.code, got, c.want, c.rationale)
		}
	}
}

// loadingTable has a loaded catalog with topic t and group shards that never load.
func loadingTable(t *testing.T) *Table {
	t.Helper()
	m := catalogShard(t, nil, meta.NewTopic{Name: "t", Partitions: 1, ReplicationFactor: 1})
	groups := shard.NewSet(shard.SetOptions{Count: 50, Backend: memlog.New()}) // never started: loading
	return &Table{deps: Deps{Meta: m, Groups: groups, Limits: Limits{OffsetMetadataMaxBytes: 4096}}, log: zap.NewNop()}
}

// T69: a loading shard is COORDINATOR_LOAD_IN_PROGRESS for TxnOffsetCommit v2+ and
// COORDINATOR_NOT_AVAILABLE below.
func TestSpec8_5_T69_TxnOffsetCommitWhileLoading(t *testing.T) {
	tbl := loadingTable(t)
	for version, want := range map[int16]int16{1: kerr.CoordinatorNotAvailable.Code, 3: kerr.CoordinatorLoadInProgress.Code} {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.Group, req.ProducerID = "g", 1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rt.Partitions = append(rt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp := tbl.txnOffsetCommit(context.Background(), &wire.Request{Header: wire.Header{Key: 28, Version: version}, Body: req}).(*kmsg.TxnOffsetCommitResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("v%d: code %d, want %d", version, got, want)
		}
	}
}

// T74: a marker for the partition of a loading shard is NOT_LEADER_OR_FOLLOWER, the code the
// transaction coordinator retries.
func TestSpec8_5_T74_WriteTxnMarkersWhileLoading(t *testing.T) {
	tbl := loadingTable(t)
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Committed = 1, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "__consumer_offsets", []int32{7, 50}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp := tbl.writeTxnMarkers(context.Background(), &wire.Request{Header: wire.Header{Key: 27, Version: 1}, Body: req}).(*kmsg.WriteTxnMarkersResponse)
	ps := resp.Markers[0].Topics[0].Partitions
	if ps[0].ErrorCode != kerr.NotLeaderForPartition.Code || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("codes %d %d", ps[0].ErrorCode, ps[1].ErrorCode)
	}
}

// KIP-890 verification (gateway mode): a v0-4 commit whose transaction the transaction
// coordinator does not know as ongoing with the group's offsets partition is refused with the
// code the version knows, and nothing is staged (a RequireStable fetch does not see the
// partition unstable). v5+ producers do not add the partition themselves: not verified.
func TestTxnOffsetCommitVerification(t *testing.T) {
	tbl := loadingTable(t)
	groups := shard.NewSet(shard.SetOptions{Count: 50, Backend: memlog.New()})
	groups.Start()
	t.Cleanup(func() { groups.Close(context.Background()) })
	tbl.deps.Groups = groups
	verdict := kerr.TransactionAbortable.Code
	var asked []TxnVerification
	tbl.deps.VerifyTxnOffsets = func(_ context.Context, v TxnVerification) int16 {
		asked = append(asked, v)
		return verdict
	}
	commit := func(version int16) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(version)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", "g", 7, 3, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Offset = 42
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := tbl.txnOffsetCommit(context.Background(), &wire.Request{Header: wire.Header{Key: 28, Version: version}, Body: req}).(*kmsg.TxnOffsetCommitResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	unstable := func() bool {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(7)
		req.Group, req.RequireStable = "g", true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := tbl.offsetFetch(context.Background(), &wire.Request{Header: wire.Header{Key: 9, Version: 7}, Body: req}).(*kmsg.OffsetFetchResponse)
		return resp.Topics[0].Partitions[0].ErrorCode == kerr.UnstableOffsetCommit.Code
	}
	for {
		if groups.For("g").State() == runtime.StateActive {
			break
		}
		time.Sleep(time.Millisecond)
	}

	if got := commit(3); got != kerr.InvalidTxnState.Code {
		t.Errorf("v3 unverified: code %d, want INVALID_TXN_STATE", got)
	}
	if got := commit(4); got != kerr.TransactionAbortable.Code {
		t.Errorf("v4 unverified: code %d, want TRANSACTION_ABORTABLE", got)
	}
	if unstable() {
		t.Fatal("an unverified commit staged offsets")
	}
	if len(asked) != 2 || asked[0] != (TxnVerification{TransactionalID: "tx", Group: "g", ProducerID: 7, ProducerEpoch: 3}) {
		t.Fatalf("verifications asked: %+v", asked)
	}
	verdict = kerr.CoordinatorLoadInProgress.Code // the upstream could not answer
	if got := commit(1); got != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("v1, verification unanswered: code %d, want COORDINATOR_NOT_AVAILABLE", got)
	}
	if got := commit(5); got != 0 || len(asked) != 3 {
		t.Errorf("v5: code %d after %d verifications, want staged without one", got, len(asked)-3)
	}
	verdict = 0
	if got := commit(4); got != 0 || !unstable() {
		t.Errorf("v4 verified: code %d, unstable %v; want staged", got, unstable())
	}
}

// A WriteTxnMarkers for __consumer_offsets naming no partition is another node's settle request
// (several nodes, gateway/txnpeer.go): it is handed to TxnPeerOutcome and answered with the
// shards this node answers for. A transaction coordinator never sends one; without the hook
// (one node) it is answered with no partition, as Kafka answers it.
func TestWriteTxnMarkersWithoutPartitionsIsASettleRequest(t *testing.T) {
	tbl := loadingTable(t)
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 77, 4, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic = "__consumer_offsets"
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	send := func() []kmsg.WriteTxnMarkersResponseMarkerTopicPartition {
		resp := tbl.writeTxnMarkers(context.Background(), &wire.Request{Header: wire.Header{Key: 27, Version: 1}, Body: req}).(*kmsg.WriteTxnMarkersResponse)
		return resp.Markers[0].Topics[0].Partitions
	}
	if ps := send(); len(ps) != 0 {
		t.Fatalf("without the hook: %+v, want no partition", ps)
	}
	var asked []int64
	tbl.deps.TxnPeerOutcome = func(_ context.Context, pid int64, epoch int16, commit bool) map[int32]int16 {
		if epoch != 4 || !commit {
			t.Errorf("epoch %d commit %v", epoch, commit)
		}
		asked = append(asked, pid)
		return map[int32]int16{3: 0}
	}
	ps := send()
	if len(asked) != 1 || asked[0] != 77 || len(ps) != 1 || ps[0].Partition != 3 || ps[0].ErrorCode != 0 {
		t.Fatalf("asked %v, answered %+v; want producer 77 asked and shard 3 answered for", asked, ps)
	}
}
