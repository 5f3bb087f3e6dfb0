package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// unreachableAddr is a loopback address below the ephemeral range that nothing listens on: a
// connection to it is refused.
func unreachableAddr(t *testing.T) string {
	t.Helper()
	for port := 21000; port < 22000; port++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("no free port")
	return ""
}

// While the upstream cannot be reached at all the load keeps trying (the shard stays LOADING and
// answers COORDINATOR_LOAD_IN_PROGRESS) rather than returning an error that would put the shard
// in FAILED until a restart; closing the log ends the wait.
func TestLoadRetriesWhileUpstreamUnreachable(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	b := &Backend{lg: zap.New(core), opts: Options{
		// A short client retry bound makes each attempt fail within a second.
		Client: []kgo.Opt{kgo.SeedBrokers(unreachableAddr(t)), kgo.RetryTimeout(time.Second)},
		Topic:  "state", Partitions: 1, TransactionalIDPrefix: "unreachable-", TransactionTimeout: time.Second,
		MaxBatchBytes: defaultMaxBatchBytes,
	}}
	l, err := b.Open(0, log.Callbacks{})
	if err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() {
		_, err := l.Load(func(int64, log.Record) error { return nil })
		loaded <- err
	}()
	deadline := time.After(2 * time.Minute)
	for logs.FilterMessageSnippet("retrying with a new producer").Len() < 2 {
		select {
		case err := <-loaded:
			t.Fatalf("load ended while the upstream is unreachable: %v", err)
		case <-deadline:
			t.Fatalf("the load did not retry twice (logged: %v)", logs.All())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("retried after: %v", logs.FilterMessageSnippet("retrying").All()[0].ContextMap()["error"])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-loaded:
		if !errors.Is(err, log.ErrClosed) {
			t.Fatalf("load after close: %v, want log.ErrClosed", err)
		}
	case <-deadline:
		t.Fatal("close did not end the load")
	}
}

// A shard that loses its ownership while its load waits for an unreachable upstream stops at
// once (it answers as not owned and its load ends) rather than when the upstream is back: a
// load finishing then would fence the shard's new owner.
func TestDisownEndsALoadWaitingForTheUpstream(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	b := &Backend{lg: zap.New(core), opts: Options{
		Client: []kgo.Opt{kgo.SeedBrokers(unreachableAddr(t)), kgo.RetryTimeout(time.Second)},
		Topic:  "state", Partitions: 1, TransactionalIDPrefix: "unreachable-", TransactionTimeout: time.Second,
		MaxBatchBytes: defaultMaxBatchBytes,
	}}
	set := shard.NewSet(shard.SetOptions{Count: 1, Backend: b, Deferred: true})
	defer set.Close(context.Background())
	if !set.Own(0) {
		t.Fatal("Own started no load")
	}
	deadline := time.After(2 * time.Minute)
	for logs.FilterMessageSnippet("retrying with a new producer").Len() < 1 {
		select {
		case <-deadline:
			t.Fatalf("the load did not retry (logged: %v)", logs.All())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if st := set.Shard(0).State(); st != runtime.StateLoading {
		t.Fatalf("shard state %v, want loading", st)
	}
	disowned := make(chan struct{})
	go func() { set.Disown(context.Background(), 0); close(disowned) }()
	select {
	case <-disowned:
	case <-time.After(20 * time.Second): // the load alone would wait for the upstream forever
		t.Fatal("Disown waited for the load")
	}
	if _, err := set.Shard(0).Read(context.Background(), shard.OpenProducers()); !errors.Is(err, runtime.ErrNotOwned) {
		t.Fatalf("read after Disown: %v, want ErrNotOwned", err)
	}
}
