package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitWithRetention commits with OffsetCommit v2, whose RetentionTimeMillis sets an explicit
// expire timestamp (spec coordinator-apis §3.2 step 6).
func commitWithRetention(t *testing.T, d *daemon, group, topic string, p int32, at, retentionMs int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.RetentionTimeMillis = group, -1, retentionMs
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = p, at
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := call(t, d, req, 2).(*kmsg.OffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %d", code)
	}
}

// eventually polls cond until it holds or 15 s pass (the sweep runs on its own timer).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 15s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fetchAllV7 returns a group's committed offsets (fetch-all) by "topic/partition".
func fetchAllV7(t *testing.T, d *daemon, group string) map[string]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.Topics = group, nil
	resp := call(t, d, req, 7).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch-all: %d", resp.ErrorCode)
	}
	out := map[string]int64{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out[st.Topic+"/"+string(rune('0'+sp.Partition))] = sp.Offset
		}
	}
	return out
}

// Spec §3.5: an explicit retention expires the offset at the next check and the simple group
// goes with its last offset; offsets without one keep offsets.retention.minutes; a partition
// with a staged transactional offset does not expire until the transaction ends.
func TestSpec3_5_RetentionCheckExpiresOffsets(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offsets.retention.check.interval.ms=100")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)

	commitWithRetention(t, d, "short", "t", 0, 3, 300)
	commitWithRetention(t, d, "mixed", "t", 0, 4, 300)
	commitWithRetention(t, d, "mixed", "t", 1, 5, -1) // broker default: 7 days
	commitWithRetention(t, d, "staged", "t", 0, 6, 300)
	txnCommit(t, d, 3, "staged", 9, 0, -1, "t", noID, 100, "", 0)

	eventually(t, "expiry of the 300 ms offsets", func() bool {
		return len(fetchAllV7(t, d, "short")) == 0 && len(fetchAllV7(t, d, "mixed")) == 1
	})
	d.waitLogged("expired committed offsets", nil)
	if got := fetchAllV7(t, d, "mixed"); got["t/1"] != 5 {
		t.Fatalf("mixed: %v", got)
	}
	// The simple group "short" is gone: OffsetDelete no longer finds it.
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "short"
	if r := call(t, d, req, 0).(*kmsg.OffsetDeleteResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("expired simple group still exists: %d", r.ErrorCode)
	}
	// Several checks later the staged partition is still there.
	time.Sleep(500 * time.Millisecond)
	if got := fetchAllV7(t, d, "staged"); got["t/0"] != 6 {
		t.Fatalf("offset with a staged transactional offset expired: %v", got)
	}
	// After the ABORT nothing protects it (its explicit expire time has long passed).
	marker(t, d, 9, 0, false, "__consumer_offsets", offsetsPartition("staged"))
	eventually(t, "expiry after the abort", func() bool { return len(fetchAllV7(t, d, "staged")) == 0 })
}

// The retention timer is re-armed when a shard loads: offsets due while the process was down
// expire after a restart (and after kill -9). The expiry must be the restarted process's doing
// on the commit it reloaded, so a restart that lost the commit fails the test: a long-lived
// witness commit must still be there, and the restarted process must log the expiry of one
// offset.
func TestSpec3_5_RetentionResumesAfterRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offsets.retention.check.interval.ms=100")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 2)
	commitWithRetention(t, d, "g", "t", 0, 1, 1000)
	commitWithRetention(t, d, "g", "t", 1, 2, 24*3600*1000)
	d.kill()
	time.Sleep(1200 * time.Millisecond) // t/0 is due while the process is down
	before := len(d.allLogs())
	d.start("offsets.retention.check.interval.ms=100")
	eventually(t, "expiry after restart", func() bool {
		for _, l := range d.allLogs()[before:] {
			if l["msg"] == "expired committed offsets" && l["offsets"] == float64(1) {
				return true
			}
		}
		return false
	})
	if got := fetchAllV7(t, d, "g"); len(got) != 1 || got["t/1"] != 2 {
		t.Fatalf("after restart: %v, want only t/1=2", got)
	}
}

// Spec §3.5: deleting a topic removes every group's offsets for it (committed and staged), so a
// topic re-created under the same name starts with none.
func TestSpec3_5_DeletedTopicOffsetsRemoved(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "offsets.retention.check.interval.ms=100")
	adm := kadm.NewClient(d.client())
	createTopic(t, adm, "t", 1)
	createTopic(t, adm, "u", 2)
	commitPlain(t, adm, "a", "u", 0, 10)
	commitPlain(t, adm, "a", "t", 0, 11)
	commitPlain(t, adm, "b", "u", 1, 12)
	txnCommit(t, d, 3, "c", 3, 0, -1, "u", noID, 100, "", 0)

	if res, err := adm.DeleteTopics(ctxT(t), "u"); err != nil || res["u"].Err != nil {
		t.Fatalf("delete u: %v %v", err, res["u"].Err)
	}
	// A named fetch (v7) does not consult the catalog, so it sees what is stored.
	eventually(t, "removal of u's committed and staged offsets", func() bool {
		return fetchV7(t, d, "a", true, "u", 0)[0] == (fetched{-1, 0}) &&
			fetchV7(t, d, "b", true, "u", 1)[1] == (fetched{-1, 0}) &&
			fetchV7(t, d, "c", true, "u", 0)[0] == (fetched{-1, 0})
	})
	d.waitLogged("removed offsets of deleted topics", nil)
	createTopic(t, adm, "u", 2)
	if got := fetchV7(t, d, "a", true, "u", 0); got[0] != (fetched{-1, 0}) {
		t.Fatalf("re-created topic has an old offset: %v", got)
	}
	if got := fetchAllV7(t, d, "a"); got["t/0"] != 11 {
		t.Fatalf("offset of another topic removed: %v", got)
	}
}
