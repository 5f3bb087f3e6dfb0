package kafkalog

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
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
