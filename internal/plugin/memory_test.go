package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/pkg/topologyplugin"
)

func newMemory(t *testing.T, cfg topologyplugin.Config) *Memory {
	t.Helper()
	p, err := NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Memory)
}

// Spec §9.55 / §7.3: at max.groups a new group's set evicts the least recently used group
// (a get counts as use); the evicted group then finds nothing.
func TestSpec7_3MemoryEvictsLeastRecentlyUsedGroup(t *testing.T) {
	m := newMemory(t, topologyplugin.Config{"max.groups": "2"})
	mustSet(t, m, "a", 1, desc("a"))
	mustSet(t, m, "b", 1, desc("b"))
	mustGet(t, m, "a", 1) // a is now more recently used than b
	mustSet(t, m, "c", 1, desc("c"))
	if mustGet(t, m, "b", 1) != nil {
		t.Fatal("b was least recently used and must be evicted")
	}
	if mustGet(t, m, "a", 1) == nil || mustGet(t, m, "c", 1) == nil {
		t.Fatal("a and c must remain")
	}
	if s := m.Stats(); s.Descriptions != 2 || s.Evictions != 1 {
		t.Fatalf("stats %+v", s)
	}
	// Replacing an existing group's epoch does not evict anyone.
	mustSet(t, m, "a", 2, desc("a2"))
	if s := m.Stats(); s.Descriptions != 2 || s.Evictions != 1 {
		t.Fatalf("stats after replace %+v", s)
	}
}

// Spec §7.3: the sum of sizes stays within max.bytes; sizes are wire-encoded lengths.
func TestSpec7_3MemoryBoundedByBytes(t *testing.T) {
	size := desc("a").EncodedSize()
	m := newMemory(t, topologyplugin.Config{"max.bytes": itoa(2*size + size/2), "max.description.bytes": itoa(size)})
	mustSet(t, m, "a", 1, desc("a"))
	mustSet(t, m, "b", 1, desc("b"))
	if s := m.Stats(); s.Bytes != int64(2*size) {
		t.Fatalf("bytes %d, want %d", s.Bytes, 2*size)
	}
	mustSet(t, m, "c", 1, desc("c"))
	if s := m.Stats(); s.Descriptions != 2 || s.Bytes > int64(2*size+size/2) || s.Evictions != 1 {
		t.Fatalf("stats %+v", s)
	}
	if mustGet(t, m, "a", 1) != nil {
		t.Fatal("a was least recently used")
	}
	if err := m.Delete(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Bytes != int64(size) {
		t.Fatalf("delete must release bytes: %+v", s)
	}
}

// Spec §9.56: a description above max.description.bytes is rejected permanently with a reason
// a client can read, and nothing is stored.
func TestSpec9_56MemoryRejectsOversizedDescriptionPermanently(t *testing.T) {
	m := newMemory(t, topologyplugin.Config{"max.description.bytes": "100"})
	big := desc("x")
	big.Subtopologies[0].Nodes[1].Stores = []string{strings.Repeat("s", 200)}
	err := m.Set(context.Background(), "g", 1, big)
	if !topologyplugin.IsPermanent(err) || !strings.Contains(err.Error(), "max.description.bytes") {
		t.Fatalf("want a permanent size error, got %v", err)
	}
	if mustGet(t, m, "g", 1) != nil || m.Stats().Descriptions != 0 {
		t.Fatal("rejected description was stored")
	}
}

// Kafka's reference plugin: close clears the state.
func TestMemoryCloseClears(t *testing.T) {
	m := newMemory(t, nil)
	mustSet(t, m, "g", 1, desc("x"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Descriptions != 0 || s.Bytes != 0 {
		t.Fatalf("stats after close %+v", s)
	}
	if _, err := m.Get(context.Background(), "g", 1); !topologyplugin.IsTransient(err) {
		t.Fatalf("calls after close must fail transiently, got %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("second close must be harmless")
	}
}

func TestMemoryConfigErrors(t *testing.T) {
	for _, cfg := range []topologyplugin.Config{
		{"max.groupz": "1"},
		{"max.groups": "0"},
		{"max.bytes": "abc"},
		{"max.bytes": "10", "max.description.bytes": "11"},
	} {
		var ce *topologyplugin.ConfigError
		if _, err := NewMemory(cfg); !errors.As(err, &ce) {
			t.Errorf("%v: want a ConfigError, got %v", cfg, err)
		}
	}
}

// A small max.bytes lowers the default per-description limit with it.
func TestMemoryDescriptionLimitFollowsMaxBytes(t *testing.T) {
	m := newMemory(t, topologyplugin.Config{"max.bytes": "50"})
	if m.maxDesc != 50 {
		t.Fatalf("max.description.bytes %d, want 50", m.maxDesc)
	}
	if err := m.Set(context.Background(), "g", 1, desc("x")); !topologyplugin.IsPermanent(err) {
		t.Fatalf("want permanent, got %v", err)
	}
}

// Issue 10 defect 14: memory declares that nothing survives a restart; file does not.
func TestMemoryDeclaresItselfVolatile(t *testing.T) {
	if !topologyplugin.IsVolatile(newMemory(t, topologyplugin.Config{})) {
		t.Fatal("memory is not volatile")
	}
	f := newFile(t, topologyplugin.Config{"dir": t.TempDir()})
	defer f.Close()
	if topologyplugin.IsVolatile(f) {
		t.Fatal("file is volatile")
	}
	c := NewCaller(Options{Plugin: newMemory(t, topologyplugin.Config{}), Name: "memory"}, nil)
	defer c.Close()
	var none *Caller
	if !c.Volatile() || none.Volatile() {
		t.Fatal("Caller.Volatile")
	}
}
