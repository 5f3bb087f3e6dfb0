package meta

import (
	"context"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log/memlog"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
)

func startPublishing(t testing.TB) (*runtime.Shard[*Catalog], *memlog.Backend, *Published) {
	t.Helper()
	b := memlog.New()
	pub := &Published{}
	s := runtime.New(runtime.Options[*Catalog]{New: NewCatalog, Backend: b, Kind: "meta", OnDurable: pub.Publish})
	s.Start()
	t.Cleanup(func() { s.Close(context.Background()) })
	for deadline := time.Now().Add(10 * time.Second); s.State() != runtime.StateActive; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("metadata shard is %v", s.State())
		}
	}
	return s, b, pub
}

// Handlers read the catalog from the published snapshot instead of the metadata shard. A commit
// that saw a topic whose record could still be lost would store offsets of a topic that, after
// a crash, never existed: the snapshot shows a topic only once its record is durable.
func TestPublishedCatalogShowsOnlyDurableTopics(t *testing.T) {
	s, b, pub := startPublishing(t)
	if snap := pub.Load(); snap == nil || snap.Len() != 0 {
		t.Fatalf("after loading an empty log the published catalog is %v, want empty", snap)
	}
	b.Hold(true)
	defer b.Release(0) // on failure too, so that closing the shard does not wait forever
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(ctx, CreateTopics([]NewTopic{{Name: "orders", Partitions: 3, ReplicationFactor: -1}}, false, Defaults{Partitions: 1, ReplicationFactor: 1, NodeID: 1}))
		done <- err
	}()
	for b.Pending(0) == 0 { // the record is appended, its fsync held
		select {
		case err := <-done:
			t.Fatalf("create answered before its record was durable: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if _, ok := pub.Load().Topic("orders"); ok {
		t.Fatal("the published catalog shows a topic whose record is not durable")
	}
	b.Release(0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The create answers after publishing: a client that created a topic can commit to it.
	tp, ok := pub.Load().Topic("orders")
	if !ok || tp.Partitions != 3 {
		t.Fatalf("after the record is durable the published catalog has %+v, %v", tp, ok)
	}
}

// BenchmarkCatalogRead compares the two ways a handler gets the catalog: a round trip through
// the metadata shard (before) and the published snapshot (after).
func BenchmarkCatalogRead(b *testing.B) {
	s, _, pub := startPublishing(b)
	ctx := context.Background()
	b.Run("shard-round-trip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Read(ctx, Read); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("published", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.State() != runtime.StateActive || pub.Load() == nil {
				b.Fatal("no published catalog")
			}
		}
	})
}
