package main

import "testing"

// The journal's fsyncs get a P of their own only where the daemon syncs on its hot path and the
// operator has not chosen GOMAXPROCS.
func TestSchedulerProcs(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		operatorSet, kafkaLog bool
		want                  int
	}{
		{"local log", false, false, 3},
		{"operator's GOMAXPROCS", true, false, 2},
		{"kafka log backend", false, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := schedulerProcs(tc.operatorSet, tc.kafkaLog, 2); got != tc.want || why == "" {
				t.Errorf("schedulerProcs = %d (%q), want %d", got, why, tc.want)
			}
		})
	}
}
