package main

import (
	"slices"
	"testing"
)

// An --also target's own settings: every set= after the binary, values with '=' kept whole;
// anything else after a comma is refused rather than dropped.
func TestTargetSets(t *testing.T) {
	bin, sets, err := targetSets("bin/coordinatord,set=log.backend=kafka,set=cluster.id=a=b")
	if err != nil || bin != "bin/coordinatord" || !slices.Equal(sets, []string{"log.backend=kafka", "cluster.id=a=b"}) {
		t.Fatalf("got %q %q %v", bin, sets, err)
	}
	if bin, sets, err := targetSets("bin/coordinatord"); err != nil || bin != "bin/coordinatord" || sets != nil {
		t.Fatalf("plain binary: got %q %q %v", bin, sets, err)
	}
	for _, bad := range []string{"bin/c,log.backend=kafka", "bin/c,set=nokey"} {
		if _, _, err := targetSets(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
