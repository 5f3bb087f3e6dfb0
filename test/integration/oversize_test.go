package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defect 4 (issue 10): a write whose records exceed message.max.bytes used to be answered
// COORDINATOR_NOT_AVAILABLE, which every client retries forever. It now gets the code Kafka's
// coordinator answers for RECORD_LIST_TOO_LARGE on that API (UNKNOWN_SERVER_ERROR; on commit
// paths INVALID_COMMIT_OFFSET_SIZE), the server stays healthy, and a record under the limit fits.
func TestOversizeRecordsRefusedNonRetriably(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "message.max.bytes=65536", "group.initial.rebalance.delay.ms=0")
	huge := strings.Repeat("m", 100<<10) // a group record with it cannot fit in 64 KiB
	small := strings.Repeat("m", 30<<10) // fits

	withMeta := func(member, meta string) *kmsg.JoinGroupRequest {
		req := joinReq("big", member, nil)
		req.Protocols[0].Metadata = []byte(meta)
		return req
	}
	r := join(t, d, 5, withMeta("", huge))
	wantCode(t, "first join (no record yet)", r.ErrorCode, kerr.MemberIDRequired.Code)
	member := r.MemberID
	wantCode(t, "join with 100 KiB of protocol metadata", join(t, d, 5, withMeta(member, huge)).ErrorCode, kerr.UnknownServerError.Code)
	// The refusal changed nothing: the same member joins with metadata that fits.
	r = join(t, d, 5, withMeta(member, small))
	wantCode(t, "join with 30 KiB of protocol metadata", r.ErrorCode, 0)
	if r.LeaderID != member || r.Generation != 1 || len(r.Members) != 1 || len(r.Members[0].ProtocolMetadata) != len(small) {
		t.Fatalf("join after a refusal: leader %q generation %d members %d", r.LeaderID, r.Generation, len(r.Members))
	}
	wantCode(t, "sync", syncG(t, d, 3, "big", member, nil, 1, map[string]string{member: "a"}).ErrorCode, 0)

	// OffsetCommit of more partitions than 64 KiB of records hold: INVALID_COMMIT_OFFSET_SIZE
	// for every partition, nothing committed; a smaller commit goes through.
	createStreamsTopics(t, d.Addr, 3000, "wide")
	commit := func(parts int) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = "simple", -1, ""
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "wide"
		for p := 0; p < parts; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = int32(p), int64(p), strp("some metadata")
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		return rawCall(t, d, req, 8, kmsg.NewPtrOffsetCommitResponse())
	}
	for _, p := range commit(3000).Topics[0].Partitions {
		wantCode(t, fmt.Sprintf("oversize commit, partition %d", p.Partition), p.ErrorCode, kerr.InvalidCommitOffsetSize.Code)
	}
	for _, p := range commit(100).Topics[0].Partitions {
		wantCode(t, fmt.Sprintf("small commit, partition %d", p.Partition), p.ErrorCode, 0)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "simple"
	fr := rawCall(t, d, fetch, 5, kmsg.NewPtrOffsetFetchResponse())
	if n := len(fr.Topics[0].Partitions); n != 100 {
		t.Fatalf("%d partitions committed, want the 100 of the commit that fit", n)
	}

	// Streams: a topology whose record cannot fit is refused with UNKNOWN_SERVER_ERROR too.
	c := dialRaw(t, d.Addr)
	sr := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	sr.Group, sr.MemberID, sr.RebalanceTimeoutMillis = "streams-big", "m1", 1000
	topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID = "0"
	for i := 0; i < 600; i++ {
		st.SourceTopics = append(st.SourceTopics, fmt.Sprintf("%s-%d", strings.Repeat("t", 150), i))
	}
	topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}
	sr.Topology = &topo
	sr.ActiveTasks, sr.StandbyTasks, sr.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	if resp := streamsHeartbeatRaw(t, c, 1, sr); resp.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("streams join with a 90 KiB topology: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}

	// The server is healthy throughout: ready, and other groups are served.
	resp, err := http.Get("http://" + d.Admin + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after oversize requests: %v %v", resp, err)
	}
	resp.Body.Close()
	r = join(t, d, 5, joinReq("other", "", nil))
	wantCode(t, "another group", r.ErrorCode, kerr.MemberIDRequired.Code)
}

// With Kafka's default message.max.bytes, the same 100 KiB of protocol metadata fits.
func TestLargeJoinFitsUnderDefaultMessageMaxBytes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "group.initial.rebalance.delay.ms=0")
	req := joinReq("big", "", nil)
	req.Protocols[0].Metadata = []byte(strings.Repeat("m", 100<<10))
	r := join(t, d, 5, req)
	wantCode(t, "first join", r.ErrorCode, kerr.MemberIDRequired.Code)
	req.MemberID = r.MemberID
	r = join(t, d, 5, req)
	wantCode(t, "join with 100 KiB of protocol metadata", r.ErrorCode, 0)
}

// A group with more committed partitions than one message.max.bytes batch of tombstones holds
// can still be deleted: DeleteGroups answers NONE and the offsets are gone, also after a
// restart (docs/storage.md, deletions larger than one batch).
func TestDeleteGroupLargerThanOneBatch(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "message.max.bytes=65536")
	const parts = 6000 // ~20 bytes of tombstone each: about twice what 64 KiB holds
	createStreamsTopics(t, d.Addr, parts, "wide")
	for from := 0; from < parts; from += 500 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "big", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "wide"
		for p := from; p < from+500; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = int32(p), int64(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		for _, p := range rawCall(t, d, req, 8, kmsg.NewPtrOffsetCommitResponse()).Topics[0].Partitions {
			wantCode(t, fmt.Sprintf("commit of partition %d", p.Partition), p.ErrorCode, 0)
		}
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"big"}
	got := rawCall(t, d, del, 2, kmsg.NewPtrDeleteGroupsResponse())
	wantCode(t, "DeleteGroups of a group with 6000 offsets", got.Groups[0].ErrorCode, 0)
	d.stop()
	d.start()
	got = rawCall(t, d, del, 2, kmsg.NewPtrDeleteGroupsResponse())
	wantCode(t, "DeleteGroups again after a restart", got.Groups[0].ErrorCode, kerr.GroupIDNotFound.Code)
}
