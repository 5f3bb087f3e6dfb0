package memlog

import (
	"errors"
	"testing"

	"github.com/coordinatord/coordinatord/internal/state/log"
)

// A shard's log that failed for good can be opened again before the failed one has closed:
// shard.Set.Own reloads a FAILED shard and closes the old one in the background, and with the
// failed log still counted as open the reload failed too, about once in 300 runs of
// TestOwnReloadsAShardWhoseLogFailed. A live log is still opened only once.
func TestOpenAgainAfterAFailureButNotBesideALiveLog(t *testing.T) {
	b := New()
	cb := log.Callbacks{Failed: func(error) {}}
	first, err := b.Open(0, cb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(0, cb); err == nil {
		t.Fatal("a second open beside a live log succeeded")
	}
	b.Fail(0, errors.New("fenced"))
	second, err := b.Open(0, cb)
	if err != nil {
		t.Fatalf("open after the log failed, before it closed: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(0, cb); err == nil {
		t.Fatal("the failed log's late close let a third open beside the live second one")
	}
	second.Close()
}
