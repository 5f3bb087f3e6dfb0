package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Interactive Queries route a key to the instance that holds its store: every instance of a
// Kafka Streams application learns, from its heartbeats, which application.server holds which
// partitions as active and as standby. The word count runs with an application.server per
// instance, a second stream thread on one of them (each thread is a member of the group) and
// one standby replica from the group config, through scale-up, kill -9, a thread removed and
// added at runtime and a graceful scale-down. After each step, once the group has settled,
// every instance must name the hosts that the group's assignment gives every partition, no task
// may be left unassigned, and no instance may hold a standby of a task it runs (its threads are
// members of one process). The counts are checked at least once (at_least_once processing
// repeats records when tasks move before a commit).
func TestGateway_StreamsInteractiveQueryMetadataFollowsTheGroup(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	wordCountClasspath(t)
	g := startGateway(t, "group.streams.initial.rebalance.delay.ms=0", "group.streams.assignment.interval.ms=0",
		"group.streams.min.session.timeout.ms=6000", "group.streams.session.timeout.ms=6000",
		"group.streams.min.heartbeat.interval.ms=1000", "group.streams.heartbeat.interval.ms=1000")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r := newWordCountRun(t, ctx, g.Addr)
	kafkaTool(t, "org.apache.kafka.tools.ConfigCommand", g.Addr, "--alter", "--entity-type", "groups", "--entity-name", r.appID,
		"--add-config", "streams.num.standby.replicas=1")
	start := func(name string, port int, extra ...string) *streamsApp {
		args := append([]string{"at_least_once", fmt.Sprintf("application.server=%s.test:%d", name, port)}, extra...)
		return startWordCount(t, name, g.Addr, r.appID, r.in, r.out, "streams", args...)
	}
	a := start("iq-a", 7001, "num.stream.threads=2")
	b := start("iq-b", 7002)
	a.waitState("RUNNING", 2*time.Minute)
	b.waitState("RUNNING", 2*time.Minute)
	r.produce(t, ctx, 1)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	checkIQ(t, ctx, r.cl, r.appID, 3, "two instances, one of them with two threads", a, b)

	c := start("iq-c", 7003)
	c.waitState("RUNNING", 2*time.Minute)
	checkIQ(t, ctx, r.cl, r.appID, 4, "scaled up to three instances", a, b, c)

	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
	checkIQ(t, ctx, r.cl, r.appID, 3, "the third instance killed", a, b)

	a.command("remove-thread", "THREAD - ")
	checkIQ(t, ctx, r.cl, r.appID, 2, "a stream thread removed", a, b)
	a.command("add-thread", "THREAD + ")
	checkIQ(t, ctx, r.cl, r.appID, 3, "a stream thread added", a, b)

	b.stop()
	checkIQ(t, ctx, r.cl, r.appID, 2, "scaled down to one instance", a)
	r.produce(t, ctx, 2)
	waitCountsAtLeast(t, ctx, g.Addr, r.out, r.expected)
	a.stop()
}

// command writes a line to the instance's stdin and waits for its answer line starting with
// reply.
func (a *streamsApp) command(cmd, reply string) string {
	a.t.Helper()
	a.mu.Lock()
	from := len(a.lines)
	a.mu.Unlock()
	if _, err := fmt.Fprintln(a.stdin, cmd); err != nil {
		a.t.Fatalf("%s: %s: %v", a.name, cmd, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		lines := a.lines[from:]
		a.mu.Unlock()
		for _, l := range lines {
			if strings.HasPrefix(l, reply) {
				return l
			}
			if strings.HasPrefix(l, "COMMAND FAILED") {
				a.t.Fatalf("%s: %s", a.name, l)
			}
		}
		select {
		case <-a.exited:
			a.t.Fatalf("%s exited while answering %s", a.name, cmd)
		case <-time.After(50 * time.Millisecond):
		}
	}
	a.t.Fatalf("%s did not answer %s", a.name, cmd)
	return ""
}

// iqView is what one instance would route Interactive Queries by: per application.server, its
// active and standby partitions, and per word of the counts store, its active and standby hosts.
type iqView struct {
	hosts map[string]string // host:port → "active=... standby=..."
	keys  map[string]string // word → "partition active [standbys]"
}

func (v iqView) String() string {
	var out []string
	for h, p := range v.hosts {
		out = append(out, h+" "+p)
	}
	for k, p := range v.keys {
		out = append(out, "key "+k+" "+p)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func (a *streamsApp) iqView() iqView {
	a.t.Helper()
	a.mu.Lock()
	from := len(a.lines)
	a.mu.Unlock()
	a.command("meta", "META END")
	a.mu.Lock()
	lines := slices.Clone(a.lines[from:])
	a.mu.Unlock()
	v := iqView{hosts: map[string]string{}, keys: map[string]string{}}
	for _, l := range lines {
		if l == "META END" {
			break
		}
		if rest, ok := strings.CutPrefix(l, "META "); ok {
			host, parts, _ := strings.Cut(rest, " ")
			parts = parts[:strings.Index(parts, " stores=")]
			v.hosts[host] = parts
		} else if rest, ok := strings.CutPrefix(l, "KEY "); ok {
			word, where, _ := strings.Cut(rest, " ")
			v.keys[word] = where
		}
	}
	return v
}

// expectedIQ derives from the group's description what every instance should route by, once
// the group has settled (every member holds its target, n members, every task active on one).
func expectedIQ(ctx context.Context, cl *kgo.Client, group string, n int, keys map[string]string) (iqView, string) {
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl.Broker(nodeID))
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].Topology == nil {
		return iqView{}, fmt.Sprintf("describe: %v", err)
	}
	gr := resp.Groups[0]
	if len(gr.Members) != n || !strings.EqualFold(gr.State, "stable") {
		return iqView{}, fmt.Sprintf("%d members, state %s", len(gr.Members), gr.State)
	}
	topics := map[string][]string{} // subtopology → its source topics
	for _, s := range gr.Topology.Subtopologies {
		topics[s.SubtopologyID] = append(topics[s.SubtopologyID], s.SourceTopics...)
		for _, rt := range s.RepartitionSourceTopics {
			topics[s.SubtopologyID] = append(topics[s.SubtopologyID], rt.Topic)
		}
	}
	type sets struct{ active, standby map[string]bool }
	byHost := map[string]*sets{}
	activeTasks := map[string]int{}
	storeActive, storeStandby := map[int32]string{}, map[int32][]string{}
	add := func(host string, dst map[string]bool, tasks []kmsg.TaskIDs) {
		for _, ids := range tasks {
			for _, p := range ids.Partitions {
				for _, tp := range topics[ids.SubtopologyID] {
					dst[fmt.Sprintf("%s/%d", tp, p)] = true
				}
			}
		}
	}
	for _, m := range gr.Members {
		if fmt.Sprint(m.Assignment) != fmt.Sprint(m.TargetAssignment) {
			return iqView{}, fmt.Sprintf("member %s still reconciling", m.MemberID)
		}
		if m.UserEndpoint == nil {
			return iqView{}, fmt.Sprintf("member %s has no endpoint", m.MemberID)
		}
		host := fmt.Sprintf("%s:%d", m.UserEndpoint.Host, m.UserEndpoint.Port)
		s := byHost[host]
		if s == nil {
			s = &sets{map[string]bool{}, map[string]bool{}}
			byHost[host] = s
		}
		add(host, s.active, m.Assignment.ActiveTasks)
		add(host, s.standby, m.Assignment.StandbyTasks)
		add(host, s.standby, m.Assignment.WarmupTasks)
		for _, ids := range m.Assignment.ActiveTasks {
			for _, p := range ids.Partitions {
				activeTasks[fmt.Sprintf("%s_%d", ids.SubtopologyID, p)]++
				if ids.SubtopologyID == "1" {
					storeActive[p] = host
				}
			}
		}
		for _, ids := range m.Assignment.StandbyTasks {
			if ids.SubtopologyID == "1" {
				for _, p := range ids.Partitions {
					storeStandby[p] = append(storeStandby[p], host)
				}
			}
		}
	}
	want := 0
	for range topics {
		want += 4
	}
	if len(activeTasks) != want {
		return iqView{}, fmt.Sprintf("%d of %d tasks active: %v", len(activeTasks), want, activeTasks)
	}
	for h, s := range byHost {
		for tp := range s.standby {
			if s.active[tp] {
				return iqView{}, fmt.Sprintf("%s holds %s as active and as standby", h, tp)
			}
		}
	}
	v := iqView{hosts: map[string]string{}, keys: map[string]string{}}
	join := func(m map[string]bool) string {
		var l []string
		for k := range m {
			l = append(l, k)
		}
		sort.Strings(l)
		return strings.Join(l, ",")
	}
	for h, s := range byHost {
		v.hosts[h] = "active=" + join(s.active) + " standby=" + join(s.standby)
	}
	// A key's partition comes from the instance's answer; its hosts from the group.
	for word, where := range keys {
		var p int32
		fmt.Sscan(where, &p)
		sb := storeStandby[p]
		sort.Strings(sb)
		v.keys[word] = fmt.Sprintf("%d %s [%s]", p, storeActive[p], strings.Join(sb, ", "))
	}
	return v, ""
}

// checkIQ waits until the group has settled with n members and every instance's Interactive
// Query metadata agrees with the group's assignment.
func checkIQ(t *testing.T, ctx context.Context, cl *kgo.Client, group string, n int, step string, apps ...*streamsApp) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		last = ""
		for _, a := range apps {
			got := a.iqView()
			want, unsettled := expectedIQ(ctx, cl, group, n, got.keys)
			if unsettled != "" {
				last = "group not settled: " + unsettled
				break
			}
			if got.String() != want.String() {
				last = fmt.Sprintf("%s routes by\n%s\nthe group holds\n%s", a.name, got, want)
				break
			}
		}
		if last == "" {
			t.Logf("%s: every instance's Interactive Query metadata matches the group", step)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: %s", step, last)
}
