package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// javaGroupConsumer is one Java 4.4 KafkaConsumer (GroupConsumer) running until its stdin closes.
type javaGroupConsumer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *os.File
}

func startJavaGroupConsumer(t *testing.T, addr, group, topic, protocol string) *javaGroupConsumer {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "consumer-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", wordCountClasspath(t),
		"GroupConsumer", addr, group, topic, "-1", protocol)
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &javaGroupConsumer{cmd: cmd, stdin: stdin, out: out}
	t.Cleanup(func() { c.stdin.Close(); c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

// stop closes the consumer (it commits and leaves its group) and checks it exited cleanly.
func (c *javaGroupConsumer) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b, _ := os.ReadFile(c.out.Name())
			t.Fatalf("Java consumer exited with %v\n%s", err, tail(b, 3000))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Java consumer did not stop within 60 s")
	}
}

// A rolling switch of three Java 4.4 consumers through the gateway, online: classic ->
// consumer protocol (the first consumer-protocol member upgrades the group) and back (the last
// one leaving downgrades it); every record is consumed and committed, the group type follows.
func TestGateway_JavaConsumerRollingProtocolSwitch(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	g := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cl := newClient(t, g.Addr)
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topic, group := "roll848-"+run, "roll848-group-"+run
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitType := func(want string, members int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		var last string
		for time.Now().Before(deadline) {
			l, err := adm.ListGroups(ctx)
			if err == nil && l[group].GroupType == want && l[group].State == "Stable" {
				n := -1
				if want == "consumer" {
					if d, err := adm.DescribeConsumerGroups(ctx, group); err == nil {
						n = len(d[group].Members)
					}
				} else if d, err := adm.DescribeGroups(ctx, group); err == nil {
					n = len(d[group].Members)
				}
				if n == members {
					return
				}
			}
			last = strings.TrimSpace(l[group].GroupType + " " + l[group].State)
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("group never a Stable %s group of %d members (last: %s)", want, members, last)
	}
	waitCommitted := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		var sum int64
		for time.Now().Before(deadline) {
			if sum = committedSum(t, ctx, adm, group); sum == want {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("committed offsets sum to %d, want %d", sum, want)
	}

	produceN(t, ctx, cl, topic, 100)
	var cs []*javaGroupConsumer
	for i := 0; i < 3; i++ {
		cs = append(cs, startJavaGroupConsumer(t, g.Addr, group, topic, "classic"))
	}
	waitType("classic", 3)
	waitCommitted(100)
	for i := 0; i < 3; i++ { // classic -> consumer, one instance at a time
		cs = append(cs, startJavaGroupConsumer(t, g.Addr, group, topic, "consumer"))
		waitType("consumer", 4)
		cs[0].stop(t)
		cs = cs[1:]
		waitType("consumer", 3)
	}
	produceN(t, ctx, cl, topic, 100)
	waitCommitted(200)
	for i := 0; i < 3; i++ { // consumer -> classic
		cs = append(cs, startJavaGroupConsumer(t, g.Addr, group, topic, "classic"))
		waitType("consumer", 4)
		cs[0].stop(t)
		cs = cs[1:]
		if i < 2 {
			waitType("consumer", 3)
		}
	}
	waitType("classic", 3) // the last consumer-protocol member left: the group downgraded
	produceN(t, ctx, cl, topic, 100)
	waitCommitted(300)
	for _, c := range cs {
		c.stop(t)
	}
}
