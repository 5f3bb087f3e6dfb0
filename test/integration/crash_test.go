package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9LosesNoAcknowledgedCommit: writers commit ever-growing offsets while the daemon is
// killed with SIGKILL at a random moment. After restart every partition must hold at least the
// last offset whose commit was acknowledged (it may hold a later one that was durable but whose
// answer never arrived). Repeated over several kills of the same data directory.
func TestKill9LosesNoAcknowledgedCommit(t *testing.T) {
	t.Parallel()
	const writers = 16
	d := startDaemon(t)
	createTopic(t, kadm.NewClient(d.client()), "t", writers)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := make([]int64, writers) // highest acknowledged offset per writer, across rounds
	next := make([]int64, writers)
	for round := 0; round < 3; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(d.Addr), kgo.RetryTimeout(time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				adm := kadm.NewClient(cl)
				for ctx.Err() == nil {
					mu.Lock()
					next[w]++
					off := next[w]
					mu.Unlock()
					var o kadm.Offsets
					o.Add(kadm.Offset{Topic: "t", Partition: int32(w), At: off, LeaderEpoch: -1})
					resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("crash-%d", w), o)
					if err != nil || resp.Error() != nil {
						continue
					}
					mu.Lock()
					if off > acked[w] {
						acked[w] = off
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(300+rng.Intn(700)) * time.Millisecond)
		d.kill()
		cancel()
		wg.Wait()

		d.start()
		adm := kadm.NewClient(d.client())
		total := int64(0)
		for w := 0; w < writers; w++ {
			got, err := adm.FetchOffsets(ctxT(t), fmt.Sprintf("crash-%d", w))
			if err != nil || got.Error() != nil {
				t.Fatalf("fetch after kill: %v %v", err, got.Error())
			}
			o, _ := got.Lookup("t", int32(w))
			if o.At < acked[w] {
				t.Fatalf("round %d writer %d: acknowledged offset %d, after kill -9 only %d survived", round, w, acked[w], o.At)
			}
			total += acked[w]
		}
		if total == 0 {
			t.Fatalf("round %d: no commit was acknowledged before the kill; the test proves nothing", round)
		}
		t.Logf("round %d: %d commits acknowledged in total so far, all survived", round, total)
	}
}
