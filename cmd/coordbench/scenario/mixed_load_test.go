package scenario

import (
	"testing"
	"unicode/utf16"
)

// javaHash is Java's String.hashCode, which Kafka's group-to-partition mapping (and
// coordinatord's group-to-shard mapping) starts from.
func javaHash(s string) int32 {
	var h int32
	for _, c := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(c)
	}
	return h
}

// The mixed-load committers must share the heartbeating group's shard on every target, for any
// partition count: their ids must hash alike.
func TestMixedLoadGroupsShareAShard(t *testing.T) {
	for _, tag := range []string{"coordbench-coordinatord-r1-1764781234567890123", "x", ""} {
		hb, commit := tag+mixedHeartbeatSuffix, tag+mixedCommitSuffix
		if hb == commit {
			t.Fatalf("the two groups are one: %q", hb)
		}
		if javaHash(hb) != javaHash(commit) {
			t.Fatalf("%q and %q hash to %d and %d: different shards", hb, commit, javaHash(hb), javaHash(commit))
		}
	}
}
