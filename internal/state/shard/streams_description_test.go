package shard

import (
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/streams"
)

func descriptionMachine(t *testing.T, pin bool, stored map[string]int32) *Machine {
	t.Helper()
	m := NewMachine()
	m.PinTopologyDescriptions = pin
	off := int64(0)
	for id, st := range stored {
		g := &streams.Group{ID: id, StoredDescriptionEpoch: st, FailedDescriptionEpoch: -1}
		for _, r := range []log.Record{streams.GroupMetadataRecord(g, 1, 0, -1, nil)} {
			if err := m.Replay(off, r); err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	return m
}

// topology-description §6.4: with a plugin, the offsets sweep keeps an empty streams group
// whose description the plugin may hold (a real epoch or UNCERTAIN); without one, or once the
// cleanup finalized it to NONE, the group goes.
func TestTopologyDescription6_4_SweepPinsHeldGroups(t *testing.T) {
	for _, tc := range []struct {
		pin       bool
		stored    int32
		deletable bool
	}{
		{true, 3, false},
		{true, streams.DescriptionUncertain, false},
		{true, streams.DescriptionNone, true},
		{false, 3, true}, // KAFKA-21141: without a plugin the stored epoch is ignored
	} {
		m := descriptionMachine(t, tc.pin, map[string]int32{"g": tc.stored})
		rules, ok := m.streamsOffsetRules("g")
		if !ok || !rules.Empty {
			t.Fatalf("rules %+v %v", rules, ok)
		}
		if got := rules.DeleteRecords != nil; got != tc.deletable {
			t.Errorf("pin %v stored %d: sweep may delete %v, want %v", tc.pin, tc.stored, got, tc.deletable)
		}
	}
}

// §6.2: eligible are empty streams groups with stored ≠ NONE and no offsets left.
func TestTopologyDescription6_2_CleanupEligibility(t *testing.T) {
	m := descriptionMachine(t, true, map[string]int32{"held": 3, "uncertain": streams.DescriptionUncertain, "none": streams.DescriptionNone})
	v, _ := StreamsDescriptionCleanupCandidates()(m)
	got := v.([]string)
	if len(got) != 2 || got[0] != "held" || got[1] != "uncertain" {
		t.Fatalf("eligible %v", got)
	}
	v, _ = StreamsDescriptionDeletable([]string{"held", "none", "missing"})(m)
	if d := v.([]string); len(d) != 1 || d[0] != "held" {
		t.Fatalf("deletable %v", d)
	}
}
