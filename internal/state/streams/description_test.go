package streams

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// descriptionState is a shard state with group g (topology epoch 3, member m) whose stored and
// failed description epochs are given, loaded by replaying its records.
func descriptionState(t *testing.T, stored, failed int32, members ...string) *State {
	t.Helper()
	s := New()
	g := newGroup("g")
	g.StoredDescriptionEpoch, g.FailedDescriptionEpoch = stored, failed
	recs := []logRecord{GroupMetadataRecord(g, 2, 0, 3, nil), TopologyRecord("g", &Topology{Epoch: 3})}
	for _, id := range members {
		m := newMember(id)
		recs = append(recs, MemberMetadataRecord("g", m), CurrentMemberRecord("g", m))
	}
	for _, r := range recs {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func applyAll(t *testing.T, s *State, recs []logRecord) {
	t.Helper()
	for _, r := range recs {
		if err := s.Replay(r); err != nil {
			t.Fatal(err)
		}
	}
}

// §0.4: both epochs survive a replay of the metadata record, and every ordinary rewrite (here a
// fence) carries them forward.
func TestTopologyDescription0_4_EpochsPersistAndCarryForward(t *testing.T) {
	s := descriptionState(t, 3, 2, "m", "n")
	recs, _ := s.Fence("g", "m", 0, false)
	applyAll(t, s, recs)
	g := s.Groups["g"]
	if g.Epoch != 3 || g.StoredDescriptionEpoch != 3 || g.FailedDescriptionEpoch != 2 {
		t.Fatalf("after fence: epoch %d stored %d failed %d", g.Epoch, g.StoredDescriptionEpoch, g.FailedDescriptionEpoch)
	}
	fresh := New()
	applyAll(t, fresh, []logRecord{GroupMetadataRecord(newGroup("h"), 1, 0, -1, nil)})
	if h := fresh.Groups["h"]; h.StoredDescriptionEpoch != DescriptionNone || h.FailedDescriptionEpoch != DescriptionNone {
		t.Fatalf("new group epochs %d %d", h.StoredDescriptionEpoch, h.FailedDescriptionEpoch)
	}
}

// §3.1 steps 10-12.
func TestTopologyDescription3_1_PushChecks(t *testing.T) {
	s := descriptionState(t, -1, -1, "m")
	for _, tc := range []struct {
		group, member string
		epoch         int32
		code          int16
		msg           string
	}{
		{"nope", "m", 3, kerr.GroupIDNotFound.Code, "Group nope not found."},
		{"g", "x", 3, kerr.UnknownMemberID.Code, "Member x is not a member of group g."},
		{"g", "m", 4, kerr.StreamsInvalidTopologyEpoch.Code, "Topology epoch 4 does not match the group's current topology epoch 3."},
		{"g", "m", 2, kerr.StreamsInvalidTopologyEpoch.Code, "Topology epoch 2 does not match the group's current topology epoch 3."},
		{"g", "m", 3, 0, ""},
	} {
		code, msg := s.CheckDescriptionPush(tc.group, tc.member, tc.epoch)
		if code != tc.code || msg != tc.msg {
			t.Errorf("%s/%s@%d: %d %q, want %d %q", tc.group, tc.member, tc.epoch, code, msg, tc.code, tc.msg)
		}
	}
}

// §3.1 step 14, §4 step 4, §6.3 step 2: the barrier keeps only groups that still qualify.
func TestTopologyDescription3_1_BarrierMarksUncertain(t *testing.T) {
	s := descriptionState(t, 3, -1, "m")
	recs, kept := s.MarkDescriptionUncertain([]string{"g", "gone"}, true)
	if len(recs) != 0 || len(kept) != 0 {
		t.Fatalf("non-empty group marked for a delete: %d records, kept %v", len(recs), kept)
	}
	recs, kept = s.MarkDescriptionUncertain([]string{"g", "gone"}, false)
	if len(kept) != 1 || kept[0] != "g" || len(recs) != 1 {
		t.Fatalf("kept %v, %d records", kept, len(recs))
	}
	applyAll(t, s, recs)
	if st := s.Groups["g"].StoredDescriptionEpoch; st != DescriptionUncertain {
		t.Fatalf("stored %d", st)
	}
	if recs, _ := s.MarkDescriptionUncertain([]string{"g"}, false); len(recs) != 0 {
		t.Fatal("barrier rewritten while already UNCERTAIN")
	}
}

// §3.3 success-record guard.
func TestTopologyDescription3_3_SuccessRecordGuard(t *testing.T) {
	for _, tc := range []struct {
		stored, pushed, want int32
		records              int
	}{
		{DescriptionUncertain, 3, 3, 1},
		{1, 3, 3, 1},
		{3, 3, 3, 0},
		{5, 3, 5, 0},
		{DescriptionNone, 3, DescriptionUncertain, 1},
	} {
		s := descriptionState(t, tc.stored, -1, "m")
		recs, found := s.DescriptionStored("g", tc.pushed)
		applyAll(t, s, recs)
		if !found || len(recs) != tc.records || s.Groups["g"].StoredDescriptionEpoch != tc.want {
			t.Errorf("stored %d push %d: found %v, %d records, stored now %d; want %d records, %d", tc.stored, tc.pushed, found, len(recs), s.Groups["g"].StoredDescriptionEpoch, tc.records, tc.want)
		}
	}
	if _, found := New().DescriptionStored("g", 1); found {
		t.Fatal("success recorded for a missing group")
	}
}

// §3.3: a permanent rejection moves failed forward only and leaves stored at the barrier.
func TestTopologyDescription3_3_PermanentFailureRatchets(t *testing.T) {
	s := descriptionState(t, DescriptionUncertain, 1, "m")
	recs, _ := s.DescriptionRejected("g", 3)
	applyAll(t, s, recs)
	if g := s.Groups["g"]; g.FailedDescriptionEpoch != 3 || g.StoredDescriptionEpoch != DescriptionUncertain {
		t.Fatalf("failed %d stored %d", g.FailedDescriptionEpoch, g.StoredDescriptionEpoch)
	}
	if recs, _ := s.DescriptionRejected("g", 2); len(recs) != 0 {
		t.Fatal("failed epoch moved backwards")
	}
}

// §4 step 5 / §6.3 step 4: finalize after a successful plugin delete.
func TestTopologyDescription4_FinalizeAfterDelete(t *testing.T) {
	for _, tc := range []struct{ stored, want int32 }{
		{DescriptionUncertain, DescriptionNone},
		{3, DescriptionUncertain}, // a push raced the delete
		{0, DescriptionUncertain}, // the same at topology epoch 0, every new application's
		{DescriptionNone, DescriptionNone},
	} {
		s := descriptionState(t, tc.stored, -1)
		applyAll(t, s, s.FinalizeDescriptionDelete([]string{"g", "gone"}))
		if got := s.Groups["g"].StoredDescriptionEpoch; got != tc.want {
			t.Errorf("stored %d → %d, want %d", tc.stored, got, tc.want)
		}
		if held := s.DescriptionHeld("g"); held != (tc.want != DescriptionNone) {
			t.Errorf("stored %d: held %v", tc.want, held)
		}
	}
}

// Issue 10 defect 14: a stored epoch the plugin was found not to hold becomes UNCERTAIN by a
// record, so the reset survives a restart: replaying the log from scratch gives the reset
// group, with its other metadata and its failed epoch unchanged. Only the exact claim found
// missing is reset: a group whose stored epoch moved since (a push's barrier or outcome) or
// that holds nothing is left alone.
func TestTopologyDescription14_LostDescriptionResetReplays(t *testing.T) {
	s := descriptionState(t, 3, 2, "m")
	before := *s.Groups["g"]
	for _, tc := range []struct {
		name  string
		lost  map[string]int32
		reset bool
	}{
		{"another epoch found missing", map[string]int32{"g": 2}, false},
		{"unknown group", map[string]int32{"nope": 3}, false},
		{"the stored epoch", map[string]int32{"g": 3, "nope": 3}, true},
	} {
		recs := s.DescriptionLost(tc.lost)
		if (len(recs) == 1) != tc.reset || len(recs) > 1 {
			t.Fatalf("%s: %d records", tc.name, len(recs))
		}
	}
	recs := s.DescriptionLost(map[string]int32{"g": 3})
	// The restarted process: every record of the group, then the reset, replayed afresh.
	fresh := descriptionState(t, 3, 2, "m")
	applyAll(t, fresh, recs)
	g := fresh.Groups["g"]
	if g.StoredDescriptionEpoch != DescriptionUncertain || g.FailedDescriptionEpoch != 2 {
		t.Fatalf("after replay: stored %d failed %d", g.StoredDescriptionEpoch, g.FailedDescriptionEpoch)
	}
	if g.Epoch != before.Epoch || g.ValidatedTopologyEpoch != before.ValidatedTopologyEpoch || g.Topology.Epoch != 3 || len(g.Members) != 1 {
		t.Fatalf("the reset changed other state: %+v", g)
	}
	if d, _ := fresh.DescriptionEpochs("g"); d.Stored == d.Topology || !fresh.DescriptionHeld("g") {
		t.Fatalf("epochs %+v: the group must be asked again and still be released on delete", d)
	}
	// A second loss report of the same claim writes nothing more.
	if more := fresh.DescriptionLost(map[string]int32{"g": 3}); len(more) != 0 {
		t.Fatalf("UNCERTAIN reset again: %d records", len(more))
	}
	// The volatile-plugin path resets every real claim and nothing else.
	v := descriptionState(t, 5, -1)
	applyAll(t, v, []logRecord{GroupMetadataRecord(&Group{ID: "none", StoredDescriptionEpoch: DescriptionNone, FailedDescriptionEpoch: -1}, 1, 0, -1, nil)})
	if got := v.StoredDescriptionEpochs(); len(got) != 1 || got["g"] != 5 {
		t.Fatalf("stored epochs %v", got)
	}
}
