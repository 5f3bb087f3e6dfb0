package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitStreamsMembers waits (at most 90 s) until the streams group has n members of which classic
// use the classic protocol (StreamsGroupDescribe's IsClassic).
func waitStreamsMembers(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n, classic int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrStreamsGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl.Broker(nodeID))
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			c := 0
			for _, m := range resp.Groups[0].Members {
				if m.IsClassic {
					c++
				}
			}
			last = fmt.Sprintf("%d members, %d classic, state %s", len(resp.Groups[0].Members), c, resp.Groups[0].State)
			if len(resp.Groups[0].Members) == n && c == classic {
				return
			}
		} else if err == nil && len(resp.Groups) == 1 {
			last = fmt.Sprintf("error %d", resp.Groups[0].ErrorCode)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("streams group %s: want %d members (%d classic), last seen %s", group, n, classic, last)
}

// Issue 14 with real applications: the word count, with processing.guarantee=exactly_once_v2,
// runs as two instances with group.protocol=classic; a third starts with group.protocol=streams
// (the seed's situation), which turns the running classic group into a streams group; the
// classic instances are restarted one by one with the streams protocol; then all three are
// restarted one by one back to the classic protocol, the last streams instance's leave turning
// the group back into a classic group. Input is produced all the while, restarts included; after
// every step the committed output catches up with what was produced so far, at the end it holds
// exactly the counts of all the input (read_committed: a record counted twice or lost leaves
// some count off for good), and the instances' own task-assignment logs show no task processed
// by two of them at the same time.
func TestGateway_StreamsWordCountOnlineMigration(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.initial.rebalance.delay.ms=0", "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, start, input, caughtUp := rollingWordCount(t, ctx, g.Addr)

	c1, c2 := start("classic-1", "classic"), start("classic-2", "classic")
	caughtUp("2 classic instances")

	s3 := start("streams-3", "streams")
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 2)
	caughtUp("a streams instance joined the classic ones")

	c1.stop()
	s1 := start("streams-1", "streams")
	c2.stop()
	s2 := start("streams-2", "streams")
	// Stopped classic instances do not leave; their sessions (10 s) expire.
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 0)
	caughtUp("rolled to the streams protocol")

	s1.stop()
	k1 := start("classic-1b", "classic")
	s2.stop()
	k2 := start("classic-2b", "classic")
	waitStreamsMembers(t, ctx, r.cl, r.appID, 3, 2)
	s3.stop() // the last streams member leaves: the group is a classic group again
	k3 := start("classic-3b", "classic")
	caughtUp("rolled back to the classic protocol")
	described, err := kadm.NewClient(r.cl).DescribeGroups(ctx, r.appID)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[r.appID]; d.ProtocolType != "consumer" || len(d.Members) != 3 {
		t.Fatalf("the application's group after the rolling downgrade: %+v", d)
	}

	expected, batches := input.finish(t)
	waitCommittedCounts(t, ctx, g.Addr, r.out, expected)
	t.Logf("exact counts of %d batches produced throughout", batches)
	k1.stop()
	k2.stop()
	k3.stop()
	checkNoTaskProcessedTwice(t, c1, c2, s3, s1, s2, k1, k2, k3)
}

// continuousInput is word-count input produced in the background, a batch at a time; expected
// holds the counts of the batches the upstream acknowledged.
type continuousInput struct {
	stop, done chan struct{}

	mu       sync.Mutex
	expected map[string]int64
	batches  int
	err      error
}

// rollingWordCount sets up an exactly-once word count whose instances come and go under
// continuous input (ten lines every 200 ms, until the roll is over, the test's deadline or 3000
// batches): start runs an instance with the given protocol until RUNNING, caughtUp waits until
// the committed output reflects everything produced so far.
func rollingWordCount(t *testing.T, ctx context.Context, addr string) (r *wordCountRun, start func(name, protocol string) *streamsApp, input *continuousInput, caughtUp func(step string)) {
	t.Helper()
	r = newWordCountRun(t, ctx, addr)
	start = func(name, protocol string) *streamsApp {
		a := startWordCount(t, name, addr, r.appID, r.in, r.out, protocol, "exactly_once_v2")
		a.waitState("RUNNING", 2*time.Minute)
		return a
	}
	input = produceContinuously(ctx, newClient(t, addr), r.in, 10, 200*time.Millisecond, 3000)
	caughtUp = func(step string) {
		t.Helper()
		expected, batches := input.snapshot(t)
		waitCommittedCountsAtLeast(t, ctx, addr, r.out, expected)
		t.Logf("%s: the committed output reflects the first %d batches", step, batches)
	}
	return r, start, input, caughtUp
}

// produceContinuously produces batches of lines lines, one every interval, until finish, the
// end of ctx, or max batches.
func produceContinuously(ctx context.Context, cl *kgo.Client, topic string, lines int, interval time.Duration, max int) *continuousInput {
	in := &continuousInput{stop: make(chan struct{}), done: make(chan struct{}), expected: map[string]int64{}}
	go func() {
		defer close(in.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for batch := 1; batch <= max; batch++ {
			text, counts := wordCountInput(batch, lines)
			records := make([]*kgo.Record, len(text))
			for i, l := range text {
				records[i] = &kgo.Record{Topic: topic, Value: []byte(l)}
			}
			err := cl.ProduceSync(ctx, records...).FirstErr()
			in.mu.Lock()
			if err != nil {
				in.err = fmt.Errorf("producing batch %d: %w", batch, err)
			} else {
				addCounts(in.expected, counts)
				in.batches = batch
			}
			in.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-in.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return in
}

// snapshot is the counts of the input acknowledged so far and how many batches that is.
func (in *continuousInput) snapshot(t *testing.T) (map[string]int64, int) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err != nil {
		t.Fatal(in.err)
	}
	return maps.Clone(in.expected), in.batches
}

// finish stops the producer and returns the counts of all the input it produced.
func (in *continuousInput) finish(t *testing.T) (map[string]int64, int) {
	t.Helper()
	close(in.stop)
	<-in.done
	return in.snapshot(t)
}

// taskSpan is a time during which one instance processed one active task, from the word count's
// own task-assignment log ("TASK + <task> <micros>" / "TASK - <task> <micros>").
type taskSpan struct {
	app, task string
	from, to  int64 // microseconds; to is MaxInt64 while the log never reported the task stopped
}

// overlappingTasks reads the instances' task-assignment logs and returns every pair of spans in
// which two instances processed the same task at the same time. A hand-over is not an overlap
// when the old owner reports the stop no later than the new owner reports the start.
func overlappingTasks(logs map[string][]string) (spans []taskSpan, overlaps []string) {
	for app, lines := range logs {
		open := map[string]int64{}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "TASK" {
				continue
			}
			at, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				overlaps = append(overlaps, fmt.Sprintf("%s: malformed %q", app, line))
				continue
			}
			switch from, running := open[f[2]]; {
			case f[1] == "+" && running:
				overlaps = append(overlaps, fmt.Sprintf("%s started task %s twice (at %d and %d)", app, f[2], from, at))
			case f[1] == "+":
				open[f[2]] = at
			case f[1] == "-" && running:
				spans = append(spans, taskSpan{app, f[2], from, at})
				delete(open, f[2])
			}
		}
		for task, from := range open {
			spans = append(spans, taskSpan{app, task, from, math.MaxInt64})
		}
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.task == b.task && a.app != b.app && a.from < b.to && b.from < a.to {
				overlaps = append(overlaps, fmt.Sprintf("task %s processed by %s [%d, %d) and %s [%d, %d)", a.task, a.app, a.from, a.to, b.app, b.from, b.to))
			}
		}
	}
	return spans, overlaps
}

// checkNoTaskProcessedTwice fails the test if, by the instances' own logs, two of them processed
// one task at the same time, or if the logs show no hand-over at all (then the check checked
// nothing).
func checkNoTaskProcessedTwice(t *testing.T, apps ...*streamsApp) {
	t.Helper()
	logs := map[string][]string{}
	for _, a := range apps {
		logs[a.name] = strings.Split(a.output(), "\n")
	}
	spans, overlaps := overlappingTasks(logs)
	if len(overlaps) > 0 {
		t.Fatalf("tasks processed by two instances at once:\n%s", strings.Join(overlaps, "\n"))
	}
	owners := map[string]map[string]bool{}
	for _, s := range spans {
		if owners[s.task] == nil {
			owners[s.task] = map[string]bool{}
		}
		owners[s.task][s.app] = true
	}
	moved := 0
	for _, o := range owners {
		if len(o) > 1 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("no task changed instance in the task-assignment logs: %v", spans)
	}
	t.Logf("%d task spans, %d of %d tasks moved between instances, none processed twice at once", len(spans), moved, len(owners))
}

// The check itself: a hand-over in order passes, touching spans pass, an overlap and a task
// never reported stopped while another instance runs it are caught.
func TestOverlappingTasks(t *testing.T) {
	_, o := overlappingTasks(map[string][]string{
		"a": {"STATE RUNNING", "TASK + 0_1 100", "TASK - 0_1 200", "TASK + 1_0 100"},
		"b": {"TASK + 0_1 200", "TASK - 0_1 300"},
		"c": {"TASK + 0_1 300"},
	})
	if len(o) != 0 {
		t.Fatalf("in-order hand-overs reported: %v", o)
	}
	_, o = overlappingTasks(map[string][]string{
		"a": {"TASK + 0_1 100", "TASK - 0_1 250"},
		"b": {"TASK + 0_1 200", "TASK - 0_1 300"},
	})
	if len(o) != 1 {
		t.Fatalf("overlap [100,250) and [200,300): %v", o)
	}
	_, o = overlappingTasks(map[string][]string{
		"a": {"TASK + 1_2 100"},
		"b": {"TASK + 1_2 500", "TASK - 1_2 600"},
	})
	if len(o) != 1 {
		t.Fatalf("a task never stopped on a, started on b: %v", o)
	}
}
