// Package soak runs coordinatord under hostile clients while well-behaved groups work beside
// them, and checks that nothing acknowledged is lost and that the process neither dies nor
// grows without bound. It targets only the daemon it starts itself, on 127.0.0.1.
//
//	go test ./test/soak                                   # the short, paced run `make test` does
//	go test ./test/soak -soak.duration=5m -soak.seed=42 -soak.rate=0   # longer, unpaced, a given seed (make soak)
//
// docs/reliability.md reports the figures of a long run.
package soak

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	duration    = flag.Duration("soak.duration", 25*time.Second, "how long the hostile traffic runs")
	seed        = flag.Int64("soak.seed", 0, "seed of the hostile traffic (0: from the clock; the seed used is printed)")
	conns       = flag.Int("soak.conns", 50, "hostile connections at once")
	maxRequests = flag.Int64("soak.max-requests", 20_000_000, "hostile requests at most, over all connections")
	rssCeiling  = flag.Int64("soak.rss-ceiling-mib", 256, "largest resident set the daemon may reach, MiB")
	readTimeout = flag.Duration("soak.read-timeout", 20*time.Second, "longest wait for an answer (or a close) before a request counts as hung")
	rate        = flag.Int("soak.rate", 1000, "hostile requests per second at most, over all connections (0: as fast as the server answers); the default keeps `go test ./...` from starving the packages tested beside it")
	stalled     = flag.Int("soak.stalled", 20, "connections that send the start of a frame of nearly socket.request.max.bytes and then nothing, held for the whole soak")
	churn       = flag.Duration("soak.churn", 5*time.Second, "a well-behaved member is replaced after between this and twice this")
	raceBinary  = flag.Bool("soak.race", false, "run the daemon built with -race (the RSS ceiling is then multiplied by 8)")
)

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// flagsParse lets TestMain see -soak.race before it builds the daemon.
func flagsParse() {
	if !flag.Parsed() {
		flag.Parse()
	}
}

// maxRequestBytes is the daemon's socket.request.max.bytes in the soak: small, so that sending
// frames past it costs the soak little.
const maxRequestBytes = 1 << 20

const (
	classicGroups     = 3
	membersPerClassic = 3
	classicPartitions = 6
	streamsGroups     = 2
	membersPerStreams = 3
	streamsSubs       = 2
	streamsPartitions = 4
)

func TestHostileSoak(t *testing.T) {
	if testing.Short() && !flagSet("soak.duration") {
		*duration = 10 * time.Second
	}
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("soak seed %d (rerun with -soak.seed=%d), duration %v, %d hostile connections, at most %d requests/s (0: unpaced)", s, s, *duration, *conns, *rate)

	d := startDaemon(t,
		fmt.Sprintf("socket.request.max.bytes=%d", maxRequestBytes),
		// Short member timeouts let hostile members (valid requests with 0.1-3 s timeouts) in,
		// and out again soon; the well-behaved members ask for 30 s.
		"group.min.session.timeout.ms=100",
		"group.streams.min.session.timeout.ms=1000", "group.streams.session.timeout.ms=30000",
		"group.streams.min.heartbeat.interval.ms=100", "group.streams.heartbeat.interval.ms=500",
		"group.streams.initial.rebalance.delay.ms=300",
	)
	pid := d.pid()
	apis := servedAPIs(t, d.Addr)
	t.Logf("served APIs: %v", apis)

	// Well-behaved side.
	adm := kadm.NewClient(newClient(t, d.Addr))
	var topics []string
	for g := 0; g < classicGroups; g++ {
		topics = append(topics, fmt.Sprintf("behaved-classic-in-%d", g))
	}
	for g := 0; g < streamsGroups; g++ {
		for i := 0; i < streamsSubs; i++ {
			topics = append(topics, fmt.Sprintf("behaved-streams-%d-in-%d", g, i))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := adm.CreateTopics(ctx, classicPartitions, 1, nil, topics...)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("creating the well-behaved topics: %v", err)
	}

	// Each well-behaved member lives in a slot that replaces it now and then (a clean leave and a
	// new member), so that rebalances and task hand-overs happen under the hostile load too.
	led := newLedger()
	var apps []*streamsApp
	for g := 0; g < streamsGroups; g++ {
		apps = append(apps, newStreamsApp(d.Addr, fmt.Sprintf("behaved-streams-%d", g), streamsTopology(fmt.Sprintf("behaved-streams-%d-in", g), streamsSubs)))
	}
	stopBehaved := make(chan struct{})
	var behavedWG sync.WaitGroup
	var joins atomic.Int64
	churnRng := rand.New(rand.NewSource(s - 1))
	lifetime := func() time.Duration { return *churn + time.Duration(churnRng.Int63n(int64(*churn))) }
	for g := 0; g < classicGroups; g++ {
		for i := 0; i < membersPerClassic; i++ {
			life := lifetime()
			behavedWG.Add(1)
			go func() {
				defer behavedWG.Done()
				group, topic := fmt.Sprintf("behaved-classic-%d", g), fmt.Sprintf("behaved-classic-in-%d", g)
				for {
					m, err := newClassicMember(d.Addr, group, topic, led)
					if err != nil {
						t.Error(err)
						return
					}
					joins.Add(1)
					end := time.After(life)
					for stop := false; !stop; {
						select {
						case <-stopBehaved:
							m.cl.Close()
							return
						case <-end:
							stop = true
						case <-time.After(100 * time.Millisecond):
							m.commitOnce()
						}
					}
					m.cl.Close()
				}
			}()
		}
	}
	for _, app := range apps {
		for i := 0; i < membersPerStreams; i++ {
			life := lifetime()
			behavedWG.Add(1)
			go func() {
				defer behavedWG.Done()
				for gen := 0; ; gen++ {
					m := app.newMember(fmt.Sprintf("behaved-m%d-gen%d", i, gen), fmt.Sprintf("behaved-p%d", i))
					joins.Add(1)
					select {
					case <-stopBehaved:
						m.leave()
						return
					case <-time.After(life):
						m.leave()
					}
				}
			}()
		}
	}

	// RSS sampling.
	var rssPeak, rssStart atomic.Int64
	rssStart.Store(d.rssBytes())
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		for {
			if r := d.rssBytes(); r > rssPeak.Load() {
				rssPeak.Store(r)
			}
			select {
			case <-stopRSS:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	// Stalled connections: each promises a large frame and never finishes it. The server waits
	// (Kafka does too, until connections.max.idle.ms); they must cost it neither the memory they
	// claim nor its service to everyone else.
	stallRng := rand.New(rand.NewSource(s - 2))
	var stalls []net.Conn
	for i := 0; i < *stalled; i++ {
		nc, err := net.DialTimeout("tcp", d.Addr, 10*time.Second)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		defer nc.Close()
		claim := maxRequestBytes - stallRng.Intn(1024)
		e, _ := encode(kmsg.NewPtrMetadataRequest(), 12, 1)
		nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(claim)), e.frame[4:]...)); err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		stalls = append(stalls, nc)
	}

	// Hostile side.
	stats := &hostileStats{perAPI: map[int16]int64{}}
	var budget atomic.Int64
	budget.Store(*maxRequests)
	var pace time.Duration
	if *rate > 0 {
		pace = time.Duration(*conns) * time.Second / time.Duration(*rate)
	}
	stopHostile := make(chan struct{})
	var hostileWG sync.WaitGroup
	for i := 0; i < *conns; i++ {
		h := &hostileConn{addr: d.Addr, rng: rand.New(rand.NewSource(s + int64(i))), apis: apis, stats: stats,
			maxReq: maxRequestBytes, readTimeout: *readTimeout, budget: &budget, pace: pace}
		hostileWG.Add(1)
		go func() { defer hostileWG.Done(); h.run(stopHostile) }()
	}

	start := time.Now()
	deadline := start.Add(*duration)
	for time.Now().Before(deadline) && d.alive() {
		time.Sleep(500 * time.Millisecond)
	}
	close(stopHostile)
	hostileWG.Wait()
	elapsed := time.Since(start)

	stalledAnswered := 0
	for _, nc := range stalls {
		nc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if n, _ := nc.Read(make([]byte, 1)); n > 0 {
			stalledAnswered++
		}
		nc.Close()
	}
	if stalledAnswered > 0 {
		t.Errorf("%d stalled connections got bytes for a frame they never finished", stalledAnswered)
	}
	if !d.alive() {
		t.Fatalf("coordinatord (pid %d) exited during the soak: %s\n%v", pid, exitReport(d.cmd.ProcessState), d.errors())
	}
	if !d.ready() {
		t.Errorf("/readyz is not OK after the soak (a shard failed?)")
	}
	// The well-behaved groups run a little longer without hostile traffic, then stop.
	time.Sleep(2 * time.Second)
	close(stopBehaved)
	behavedWG.Wait()
	close(stopRSS)
	<-rssDone

	t.Logf("hostile traffic for %v: %d requests on %d connections, %d MiB sent; %d stalled connections held a partial frame throughout\n%s\nper API: %s",
		elapsed.Round(time.Second), sumTried(stats), stats.dials.Load(), stats.bytesSent.Load()>>20, len(stalls), stats.table(), stats.apiLine())
	t.Logf("well-behaved: %d members joined; %d classic commits acknowledged (%d refused during rebalances)", joins.Load(), led.commits.Load(), led.refused.Load())
	for _, app := range apps {
		v, owned, takes := app.state()
		t.Logf("streams group %s: %d task hand-overs, %d tasks owned at the end, %d violations", app.group, takes, owned, len(v))
		for i, line := range v {
			if i == 5 {
				break
			}
			t.Errorf("task active on two members at once: %s", line)
		}
		if takes == 0 {
			t.Errorf("streams group %s never got a task: the soak did not exercise it", app.group)
		}
	}
	peak := rssPeak.Load()
	ceiling := *rssCeiling << 20
	if *raceBinary {
		ceiling *= 8
	}
	t.Logf("RSS at start %d MiB, peak %d MiB (ceiling %d MiB)", rssStart.Load()>>20, peak>>20, ceiling>>20)
	if peak > ceiling {
		t.Errorf("RSS peaked at %d MiB, above the ceiling of %d MiB", peak>>20, ceiling>>20)
	}
	for _, f := range stats.failed() {
		t.Errorf("hostile request not answered properly: %s", f)
	}
	if errs := d.errors(); len(errs) > 0 {
		for _, e := range errs {
			t.Errorf("daemon logged: %.2000s", e)
		}
	}
	if led.commits.Load() == 0 {
		t.Fatal("no classic commit was acknowledged: the soak did not exercise the well-behaved groups")
	}

	checkOffsets(t, d, led, "after the soak")
	if d.pid() != pid {
		t.Fatalf("pid changed from %d to %d", pid, d.pid())
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("coordinatord exited with %d on SIGTERM, want 0: %s\n%v", code, exitReport(d.cmd.ProcessState), d.errors())
	}
	d.start()
	checkOffsets(t, d, led, "after a restart")
}

func sumTried(s *hostileStats) int64 {
	var n int64
	for c := range s.classes {
		n += s.classes[c].tried.Load()
	}
	return n
}

// checkOffsets fails for every acknowledged commit the daemon no longer returns.
func checkOffsets(t *testing.T, d *daemon, led *ledger, when string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, d.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	led.mu.Lock()
	defer led.mu.Unlock()
	checked := 0
	for group, parts := range led.acked {
		got, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("%s: fetching offsets of %s: %v", when, group, err)
		}
		for p, want := range parts {
			topic := "behaved-classic-in-" + group[len("behaved-classic-"):]
			o, ok := got.Lookup(topic, p)
			checked++
			if !ok || o.Err != nil || o.At < want {
				t.Errorf("%s: %s %s[%d] committed at %d (acknowledged), fetched %+v", when, group, topic, p, want, o)
			}
		}
	}
	t.Logf("%s: %d acknowledged partition offsets checked", when, checked)
}

func newClient(t *testing.T, addr string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// servedAPIs asks the daemon which keys and versions it serves.
func servedAPIs(t *testing.T, addr string) []api {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "coordinatord-soak", "1"
	e, _ := encode(req, 3, 1)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(e.frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
	if _, err := io.ReadFull(nc, buf); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(buf[4:]); err != nil {
		t.Fatal(err)
	}
	var out []api
	for _, k := range resp.ApiKeys {
		out = append(out, api{key: k.ApiKey, min: k.MinVersion, max: k.MaxVersion})
	}
	if resp.ErrorCode != 0 || len(out) == 0 {
		t.Fatalf("ApiVersions answered error %d with %d APIs", resp.ErrorCode, len(out))
	}
	return out
}
