package shard

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
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

// Issue 10 defect 14, volatile plugin: after the process's first load of a shard every real
// stored epoch is reset to UNCERTAIN by a record (the reset survives the next restart), groups
// that hold nothing are left alone, and a later reload in the same process (done is set) does
// not reset again the epochs pushed since.
func TestTopologyDescription14_VolatilePluginResetOnFirstLoad(t *testing.T) {
	b := memlog.New()
	var done atomic.Bool
	start := func(volatile bool) *runtime.Shard[*Machine] {
		s := runtime.New(runtime.Options[*Machine]{Shard: 0, New: NewMachine, Backend: b,
			OnLoaded: func(c *runtime.Ctx[*Machine], m *Machine) {
				if volatile {
					ForgetVolatileDescriptions(c, &done, nil)
				}
			}})
		s.Start()
		for s.State() != runtime.StateActive {
			if s.State() == runtime.StateFailed {
				t.Fatal("shard failed")
			}
			time.Sleep(time.Millisecond)
		}
		return s
	}
	stop := func(s *runtime.Shard[*Machine]) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.Close(ctx)
	}
	setStored := func(s *runtime.Shard[*Machine], group string, stored int32) {
		g := &streams.Group{ID: group, StoredDescriptionEpoch: stored, FailedDescriptionEpoch: -1}
		_, err := s.Write(context.Background(), func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
			return runtime.Result{Records: []log.Record{streams.GroupMetadataRecord(g, 1, 0, -1, nil)}}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stored := func(s *runtime.Shard[*Machine], group string) int32 {
		v, err := s.Read(context.Background(), StreamsDescriptionEpochsOf(group))
		if err != nil || v == nil {
			t.Fatalf("%s: %v %v", group, v, err)
		}
		return v.(streams.DescriptionEpochs).Stored
	}
	s := start(false)
	setStored(s, "held", 3)
	setStored(s, "none", streams.DescriptionNone)
	// More groups than one reset batch takes.
	many := make([]string, 2*volatileResetBatch+1)
	_, err := s.Write(context.Background(), func(*runtime.Ctx[*Machine], *Machine) runtime.Result {
		var recs []log.Record
		for i := range many {
			many[i] = fmt.Sprintf("many-%d", i)
			g := &streams.Group{ID: many[i], StoredDescriptionEpoch: 1, FailedDescriptionEpoch: -1}
			recs = append(recs, streams.GroupMetadataRecord(g, 1, 0, -1, nil))
		}
		return runtime.Result{Records: recs}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop(s)

	s = start(true)
	for !done.Load() {
		time.Sleep(time.Millisecond)
	}
	if got := stored(s, "held"); got != streams.DescriptionUncertain {
		t.Fatalf("held after the volatile load: %d", got)
	}
	if got := stored(s, "none"); got != streams.DescriptionNone {
		t.Fatalf("none after the volatile load: %d", got)
	}
	for _, id := range many {
		if got := stored(s, id); got != streams.DescriptionUncertain {
			t.Fatalf("%s after the volatile load: %d", id, got)
		}
	}
	setStored(s, "held", 4) // a push after the start
	stop(s)

	s = start(true) // a reload in the same process
	defer stop(s)
	if got := stored(s, "held"); got != 4 {
		t.Fatalf("held after a reload: %d, want the epoch pushed since", got)
	}
	fresh := NewMachine()
	for i, rec := range b.Records(0) {
		if err := fresh.Replay(int64(i), rec); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := fresh.Streams.DescriptionEpochs("held"); d.Stored != 4 {
		t.Fatalf("replayed log: held %d", d.Stored)
	}
}
