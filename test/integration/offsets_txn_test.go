package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// call sends one request on a fresh raw connection and decodes the answer.
func call(t *testing.T, d *daemon, req kmsg.Request, version int16) kmsg.Response {
	t.Helper()
	c := dialRaw(t, d.Addr)
	c.write(frame(req, version, 1, strp("offsets-txn-test"), nil))
	resp := req.ResponseKind()
	c.read(resp, version, 1)
	return resp
}

// txnCommit sends TxnOffsetCommit for one topic's partitions (offset = 100*partition+base)
// and returns the codes by "topic/partition".
func txnCommit(t *testing.T, d *daemon, version int16, group string, pid int64, epoch int16, generation int32, topic string, topicID [16]byte, base int64, meta string, ps ...int32) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", group, pid, epoch, generation
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for _, p := range ps {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p, base+int64(p), &meta
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := call(t, d, req, version).(*kmsg.TxnOffsetCommitResponse)
	out := map[string]int16{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out[fmt.Sprintf("%s/%d", topic, sp.Partition)] = sp.ErrorCode
		}
	}
	return out
}

// marker sends WriteTxnMarkers v1 for one producer to the __consumer_offsets partition of each
// group and returns the partition codes in order.
func marker(t *testing.T, d *daemon, pid int64, epoch int16, commit bool, topic string, partitions ...int32) []int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, 0
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, partitions
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp := call(t, d, req, 1).(*kmsg.WriteTxnMarkersResponse)
	var out []int16
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, rp.ErrorCode)
			}
		}
	}
	return out
}

// offsetsPartition is the __consumer_offsets partition (= shard) of a group at the default
// offsets.topic.num.partitions.
func offsetsPartition(group string) int32 { return shard.For(group, 50) }

type fetched struct {
	offset int64
	code   int16
}

// fetchV7 reads named partitions of one topic with OffsetFetch v7.
func fetchV7(t *testing.T, d *daemon, group string, stable bool, topic string, ps ...int32) map[int32]fetched {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, stable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, ps
	req.Topics = append(req.Topics, rt)
	resp := call(t, d, req, 7).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch group error %d", resp.ErrorCode)
	}
	out := map[int32]fetched{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out[sp.Partition] = fetched{sp.Offset, sp.ErrorCode}
		}
	}
	return out
}

func commitPlain(t *testing.T, adm *kadm.Client, group, topic string, p int32, at int64) {
	t.Helper()
	var o kadm.Offsets
	o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctxT(t), group, o)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
}

var noID [16]byte

// Spec coordinator-apis §4.3, T61, T71: staged offsets are invisible, RequireStable reports
// them per partition as UNSTABLE_OFFSET_COMMIT, a COMMIT marker makes them visible.
func TestSpec4_3_StagedOffsetsVisibleOnlyAfterCommitMarker(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	commitPlain(t, adm, "g", "t", 1, 5)

	if got := txnCommit(t, d, 3, "g", 1000, 0, -1, "t", noID, 100, "", 0); got["t/0"] != 0 {
		t.Fatalf("TxnOffsetCommit: %v", got)
	}
	if got := fetchV7(t, d, "g", true, "t", 0, 1); got[0] != (fetched{-1, kerr.UnstableOffsetCommit.Code}) || got[1] != (fetched{5, 0}) {
		t.Fatalf("stable fetch while staged: %v", got)
	}
	if got := fetchV7(t, d, "g", false, "t", 0, 1); got[0] != (fetched{-1, 0}) || got[1] != (fetched{5, 0}) {
		t.Fatalf("plain fetch while staged: %v", got)
	}
	if got := marker(t, d, 1000, 0, true, "__consumer_offsets", offsetsPartition("g")); len(got) != 1 || got[0] != 0 {
		t.Fatalf("marker: %v", got)
	}
	if got := fetchV7(t, d, "g", true, "t", 0, 1); got[0] != (fetched{100, 0}) || got[1] != (fetched{5, 0}) {
		t.Fatalf("stable fetch after COMMIT: %v", got)
	}
}

// T71 (abort) and T72: an ABORT keeps the previous value; a regular commit after the staged
// one wins over the COMMIT marker; a marker for a producer with nothing staged succeeds (T73).
func TestSpec4_3_AbortAndLaterRegularCommitWins(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	commitPlain(t, adm, "g", "t", 0, 7)
	part := offsetsPartition("g")

	txnCommit(t, d, 3, "g", 1, 0, -1, "t", noID, 100, "", 0)
	if got := marker(t, d, 1, 0, false, "__consumer_offsets", part); got[0] != 0 {
		t.Fatalf("abort marker: %v", got)
	}
	if got := fetchV7(t, d, "g", true, "t", 0); got[0] != (fetched{7, 0}) {
		t.Fatalf("after ABORT: %v", got)
	}

	txnCommit(t, d, 3, "g", 2, 0, -1, "t", noID, 100, "", 1) // stages t/1 = 101
	commitPlain(t, adm, "g", "t", 1, 150)
	if got := marker(t, d, 2, 0, true, "__consumer_offsets", part); got[0] != 0 {
		t.Fatalf("commit marker: %v", got)
	}
	if got := fetchV7(t, d, "g", true, "t", 1); got[1] != (fetched{150, 0}) {
		t.Fatalf("regular commit after the staged one must win: %v", got)
	}
	if got := marker(t, d, 999, 0, true, "__consumer_offsets", part); got[0] != 0 {
		t.Fatalf("marker with nothing staged: %v", got)
	}
}

// Staged offsets and the producer's epoch are durable: they survive SIGTERM and kill -9, and
// the marker still applies afterwards.
func TestSpec4_3_StagedOffsetsSurviveRestartAndKill9(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 3)
	txnCommit(t, d, 3, "g", 42, 3, -1, "t", noID, 100, "", 0, 1)
	d.kill()
	d.start()
	if got := fetchV7(t, d, "g", true, "t", 0, 1, 2); got[0].code != kerr.UnstableOffsetCommit.Code || got[1].code != kerr.UnstableOffsetCommit.Code || got[2] != (fetched{-1, 0}) {
		t.Fatalf("after kill -9: %v", got)
	}
	// The epoch survived too: an older one is fenced (T77).
	if got := txnCommit(t, d, 3, "g", 42, 2, -1, "t", noID, 100, "", 2); got["t/2"] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older epoch after restart: %v", got)
	}
	if d.stop() != 0 {
		t.Fatal("stop")
	}
	d.start()
	if got := marker(t, d, 42, 3, true, "__consumer_offsets", offsetsPartition("g")); got[0] != 0 {
		t.Fatalf("marker: %v", got)
	}
	d.kill()
	d.start()
	if got := fetchV7(t, d, "g", true, "t", 0, 1); got[0] != (fetched{100, 0}) || got[1] != (fetched{101, 0}) {
		t.Fatalf("after marker and kill -9: %v", got)
	}
}

// §4.2, §4.5, T68, T77 and bad input: every refusal is the version's Kafka code and stages
// nothing.
func TestSpec4_5_TxnOffsetCommitErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offset.metadata.max.bytes=10")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	details, err := adm.ListTopics(ctxT(t), "t")
	if err != nil {
		t.Fatal(err)
	}
	tid := [16]byte(details["t"].ID)

	// A missing group with a generation: ILLEGAL_GENERATION up to v5, GROUP_ID_NOT_FOUND at v6.
	if got := txnCommit(t, d, 5, "missing", 1, 0, 3, "t", noID, 1, "", 0); got["t/0"] != kerr.IllegalGeneration.Code {
		t.Fatalf("v5 missing group: %v", got)
	}
	if got := txnCommit(t, d, 6, "missing", 1, 0, 3, "", tid, 1, "", 0); got["/0"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("v6 missing group: %v", got)
	}
	// Unknown topic, unknown partition, unknown topic id.
	if got := txnCommit(t, d, 3, "g", 1, 0, -1, "nope", noID, 1, "", 0); got["nope/0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", got)
	}
	if got := txnCommit(t, d, 3, "g", 1, 0, -1, "t", noID, 1, "", 0, 9); got["t/0"] != 0 || got["t/9"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", got)
	}
	if got := txnCommit(t, d, 6, "g", 1, 0, -1, "", [16]byte{1}, 1, "", 0); got["/0"] != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v", got)
	}
	// v6 by topic id works.
	if got := txnCommit(t, d, 6, "g", 1, 0, -1, "", tid, 1, "", 1); got["/1"] != 0 {
		t.Fatalf("v6 by id: %v", got)
	}
	// Metadata over offset.metadata.max.bytes.
	if got := txnCommit(t, d, 3, "g2", 1, 0, -1, "t", noID, 1, "0123456789ABC", 0); got["t/0"] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("metadata too large: %v", got)
	}
	// A simple group has no members.
	if got := txnCommit(t, d, 3, "g", 1, 0, 4, "t", noID, 1, "", 0); got["t/0"] != kerr.UnknownMemberID.Code {
		t.Fatalf("member of a simple group: %v", got)
	}
	// Producer 2 staged with epoch 7; its older epoch 6 is fenced.
	txnCommit(t, d, 3, "g3", 2, 7, -1, "t", noID, 1, "", 0)
	if got := txnCommit(t, d, 3, "g3", 2, 6, -1, "t", noID, 1, "", 1); got["t/1"] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older producer epoch: %v", got)
	}
	// Empty group id.
	if got := txnCommit(t, d, 3, "", 1, 0, -1, "t", noID, 1, "", 0); got["t/0"] != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %v", got)
	}
	// Nothing of the refused commits was staged: g2 and "missing" do not exist, g3/t/1 is not
	// staged.
	if got := fetchV7(t, d, "g2", true, "t", 0); got[0] != (fetched{-1, 0}) {
		t.Fatalf("g2: %v", got)
	}
	if got := fetchV7(t, d, "missing", true, "t", 0); got[0] != (fetched{-1, 0}) {
		t.Fatalf("missing: %v", got)
	}
	if got := fetchV7(t, d, "g3", true, "t", 0, 1); got[0].code != kerr.UnstableOffsetCommit.Code || got[1] != (fetched{-1, 0}) {
		t.Fatalf("g3: %v", got)
	}
	// Markers: with an older epoch, for partitions that are not shards, for other topics.
	if got := marker(t, d, 2, 6, true, "__consumer_offsets", offsetsPartition("g3")); got[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker with older epoch: %v", got)
	}
	if got := marker(t, d, 2, 7, true, "__consumer_offsets", 50, -1); got[0] != kerr.UnknownTopicOrPartition.Code || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("marker for a partition that is no shard: %v", got)
	}
	if got := marker(t, d, 2, 7, true, "t", 0); got[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("marker for a data partition: %v", got)
	}
}

// Bad input: 10 000 partitions in one OffsetCommit and one TxnOffsetCommit; each partition gets
// its own answer, and only the existing ones are stored.
func TestTenThousandPartitionsInOneCommit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 100)
	const n = 10000

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "big", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p := int32(0); p < n; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, int64(p)+1
		rt.Partitions = append(rt.Partitions, rp)
	}
	oc.Topics = append(oc.Topics, rt)
	resp := call(t, d, oc, 8).(*kmsg.OffsetCommitResponse)
	ok, unknown := 0, 0
	for _, sp := range resp.Topics[0].Partitions {
		switch {
		case sp.ErrorCode == 0 && sp.Partition < 100:
			ok++
		case sp.ErrorCode == kerr.UnknownTopicOrPartition.Code && sp.Partition >= 100:
			unknown++
		default:
			t.Fatalf("partition %d: code %d", sp.Partition, sp.ErrorCode)
		}
	}
	if ok != 100 || unknown != n-100 {
		t.Fatalf("ok %d unknown %d", ok, unknown)
	}

	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	got := txnCommit(t, d, 3, "big-txn", 5, 0, -1, "t", noID, 1000, "", ps...)
	for p := int32(0); p < n; p++ {
		want := int16(0)
		if p >= 100 {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if got[fmt.Sprintf("t/%d", p)] != want {
			t.Fatalf("txn partition %d: %d", p, got[fmt.Sprintf("t/%d", p)])
		}
	}
	marker(t, d, 5, 0, true, "__consumer_offsets", offsetsPartition("big-txn"))

	for group, base := range map[string]int64{"big": 1, "big-txn": 1000} {
		offs, err := adm.FetchOffsets(ctxT(t), group)
		if err != nil || offs.Error() != nil {
			t.Fatalf("fetch %s: %v %v", group, err, offs.Error())
		}
		count := 0
		offs.Each(func(o kadm.OffsetResponse) {
			count++
			if o.At != base+int64(o.Partition) {
				t.Errorf("%s %s/%d = %d", group, o.Topic, o.Partition, o.At)
			}
		})
		if count != 100 {
			t.Fatalf("%s has %d offsets, want 100", group, count)
		}
	}
}

// Spec §3.4 for simple groups: a missing group is GROUP_ID_NOT_FOUND; unknown topics are
// refused per partition; the rest are NONE and their committed and staged offsets are gone.
func TestSpec3_4_OffsetDelete(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)

	del := func(group string, topic string, ps ...int32) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return call(t, d, req, 0).(*kmsg.OffsetDeleteResponse)
	}
	if r := del("missing", "t", 0); r.ErrorCode != kerr.GroupIDNotFound.Code || len(r.Topics) != 0 {
		t.Fatalf("missing group: %+v", r)
	}
	if r := del("", "t", 0); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %+v", r)
	}
	commitPlain(t, adm, "g", "t", 0, 10)
	commitPlain(t, adm, "g", "t", 1, 11)
	txnCommit(t, d, 3, "g", 77, 0, -1, "t", noID, 500, "", 0)

	r := del("g", "t", 0, 5)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %+v", r)
	}
	if r := del("g", "nope", 0); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", r)
	}
	if got := fetchV7(t, d, "g", true, "t", 0, 1); got[0] != (fetched{-1, 0}) || got[1] != (fetched{11, 0}) {
		t.Fatalf("after delete (committed and staged offsets of t/0 gone): %v", got)
	}
	// The producer's marker brings nothing back.
	marker(t, d, 77, 0, true, "__consumer_offsets", offsetsPartition("g"))
	if got := fetchV7(t, d, "g", true, "t", 0); got[0] != (fetched{-1, 0}) {
		t.Fatalf("after marker: %v", got)
	}
	// kadm speaks it too; deleting the last offset removes the simple group.
	resp, err := adm.DeleteOffsets(ctxT(t), "g", kadm.TopicsSet{"t": {1: {}}})
	if err != nil || resp.Error() != nil {
		t.Fatalf("kadm delete: %v %v", err, resp.Error())
	}
	if r := del("g", "t", 1); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("group with no offsets left: %+v", r)
	}
}

// producer.id.max.per.shard: a marker for an unknown producer with nothing staged records the
// producer's epoch (a delayed TxnOffsetCommit with an older epoch is INVALID_PRODUCER_EPOCH)
// while the shard remembers fewer producers than the cap; beyond it the marker is answered
// NONE and records nothing, so markers for made-up producer ids cannot fill the shard.
func TestMarkersForUnknownProducersBounded(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "producer.id.max.per.shard=1")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	part := offsetsPartition("g")
	for _, pid := range []int64{1, 2} {
		if got := marker(t, d, pid, 1, true, "__consumer_offsets", part); got[0] != 0 {
			t.Fatalf("marker for producer %d: %v", pid, got)
		}
	}
	if got := txnCommit(t, d, 3, "g", 1, 0, -1, "t", noID, 100, "", 0); got["t/0"] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("delayed commit of the remembered producer: %v", got)
	}
	if got := txnCommit(t, d, 3, "g", 2, 0, -1, "t", noID, 100, "", 0); got["t/0"] != 0 {
		t.Fatalf("commit of the producer beyond the cap (nothing recorded for it): %v", got)
	}
}

// An operator finds a hanging transaction on the real binary: /metrics carries the age of the
// oldest open transaction and names its group, the group's console page names the producer id
// and epoch an ABORT marker needs, both survive a kill -9 (the staged offsets are durable), and
// the marker clears them.
func TestHangingTransactionIsVisibleInMetricsAndConsole(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	txnCommit(t, d, 3, "hang", 77, 3, -1, "t", noID, 100, "", 0, 1)
	staged := time.Now()

	check := func(when string) {
		t.Helper()
		age, ok := scrapeGauge(d.Admin, "coordinatord_txn_oldest_open_age_seconds")
		if !ok || age < time.Since(staged).Seconds()-1 {
			t.Fatalf("%s: oldest open transaction age %v (served %v), want at least %.0f s", when, age, ok, time.Since(staged).Seconds()-1)
		}
		if _, ok := scrapeGauge(d.Admin, `coordinatord_group_txn_oldest_open_age_seconds{group="hang"}`); !ok {
			t.Fatalf("%s: no per-group age series for group hang", when)
		}
		_, body := httpGet(t, "http://"+d.Admin+"/console/group?id=hang")
		if !regexp.MustCompile(`<tr data-producer-id="77"><td class="num">77</td><td class="num">3</td>.*<td class="num">2</td></tr>`).MatchString(body) {
			t.Fatalf("%s: the group page does not list producer 77 (epoch 3, 2 partitions):\n%s", when, body)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	check("while staged")
	d.kill()
	d.start()
	check("after kill -9")

	if got := marker(t, d, 77, 3, false, "__consumer_offsets", offsetsPartition("hang")); len(got) != 1 || got[0] != 0 {
		t.Fatalf("abort marker: %v", got)
	}
	if age, ok := scrapeGauge(d.Admin, "coordinatord_txn_oldest_open_age_seconds"); !ok || age != 0 {
		t.Fatalf("after the ABORT marker the oldest open transaction age is %v (served %v), want 0", age, ok)
	}
	if _, ok := scrapeGauge(d.Admin, `coordinatord_group_txn_oldest_open_age_seconds{group="hang"}`); ok {
		t.Fatal("after the ABORT marker group hang still has an age series")
	}
	if _, body := httpGet(t, "http://"+d.Admin+"/console/group?id=hang"); strings.Contains(body, "open-txns") {
		t.Fatalf("after the ABORT marker the group page still lists open transactions:\n%s", body)
	}
}
