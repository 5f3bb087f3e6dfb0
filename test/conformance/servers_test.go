package conformance

// The servers under test, started once per test binary: coordinatord always (built from this
// tree), the reference Kafka broker only when asked for (CONFORMANCE=1, or KAFKA_ADDR naming
// a broker that is already running).

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// coordinatordNodeID differs from the reference broker's node.id (1) so that node id
// normalization is exercised on every run.
const coordinatordNodeID = "7"

type servers struct {
	once sync.Once
	err  error
	// coordSets and kafkaConfigs are what this pair adds to the shared configuration
	// (coordinatord --set, kafka.sh --config).
	coordSets, kafkaConfigs []string
	// sasl adds a SASL_PLAINTEXT listener to the reference broker and creates saslUsers on
	// both servers.
	sasl bool

	tmp   string
	coord *coordinatord
	kafka *kafkaBroker
	// kafkaSkip says why the Kafka side does not run (empty when it does).
	kafkaSkip string

	Coord, Kafka *Target
}

var srv servers

// srvAuthz is the pair for files headed "servers authorizer", started on first use.
var srvAuthz = servers{
	coordSets:    []string{"authorizer.class.name=" + standardAuthorizer, "allow.everyone.if.no.acl.found=true"},
	kafkaConfigs: []string{"authorizer.class.name=" + standardAuthorizer, "allow.everyone.if.no.acl.found=true"},
}

// srvConsumerMaxSize is the pair for files headed "servers consumer-max-size".
var srvConsumerMaxSize = servers{
	coordSets:    []string{"group.consumer.max.size=2", "group.consumer.assignment.interval.ms=0"},
	kafkaConfigs: []string{"group.consumer.max.size=2", "group.consumer.assignment.interval.ms=0"},
}

const standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// srvSASL is the pair for files headed "servers sasl", started on first use: both servers deny
// what no ACL allows, have a SASL_PLAINTEXT listener with SCRAM-SHA-256 and the users of
// saslUsers, and keep their plaintext listener for the super user User:ANONYMOUS (on Kafka also
// its controller's principal).
var srvSASL = servers{
	sasl: true,
	coordSets: []string{"authorizer.class.name=" + standardAuthorizer, "allow.everyone.if.no.acl.found=false",
		"super.users=User:ANONYMOUS", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=SCRAM-SHA-256"},
	kafkaConfigs: []string{"authorizer.class.name=" + standardAuthorizer, "allow.everyone.if.no.acl.found=false",
		"super.users=User:ANONYMOUS",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-256",
		"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"},
}

// pairFor is the pair a file runs against.
func pairFor(f *File) *servers {
	switch f.Servers {
	case ServersAuthorizer:
		return &srvAuthz
	case ServersConsumerMaxSize:
		return &srvConsumerMaxSize
	case ServersSASL:
		return &srvSASL
	}
	return &srv
}

func (s *servers) start() error {
	s.once.Do(func() { s.err = s.startAll() })
	return s.err
}

func (s *servers) startAll() error {
	tmp, err := os.MkdirTemp("", "conformance")
	if err != nil {
		return err
	}
	s.tmp = tmp

	// Kafka takes several seconds to start; build and start coordinatord meanwhile.
	type kafkaStart struct {
		b   *kafkaBroker
		err error
	}
	kch := make(chan kafkaStart, 1)
	want, reason := kafkaWanted()
	if want && s.kafkaConfigs != nil && os.Getenv("KAFKA_ADDR") != "" {
		// A broker already running has the shared configuration, not this pair's.
		want, reason = false, "Kafka side skipped: KAFKA_ADDR names a broker without this pair's settings ("+strings.Join(s.kafkaConfigs, ", ")+")"
	}
	if want {
		go func() {
			b, err := startKafka(filepath.Join(tmp, "kafka"), s.kafkaConfigs, s.sasl)
			kch <- kafkaStart{b, err}
		}()
	} else {
		s.kafkaSkip = reason
	}

	// In gateway mode coordinatord needs its upstream first.
	var upstream string
	if gatewayWanted() {
		if !want {
			return errors.New("CONFORMANCE_GATEWAY=1 needs the reference broker as the upstream: set CONFORMANCE=1 or KAFKA_ADDR too")
		}
		k := <-kch
		if k.err != nil {
			return k.err
		}
		kch <- k
		upstream = k.b.addr
	}
	coord, err := startCoordinatord(tmp, upstream, s.coordSets)
	if err != nil {
		if want {
			if k := <-kch; k.b != nil {
				k.b.stop()
			}
		}
		return err
	}
	s.coord = coord
	if s.Coord, err = Probe(Coordinatord, coord.addr, upstream != ""); err != nil {
		return err
	}
	if want {
		k := <-kch
		if k.err != nil {
			return k.err
		}
		s.kafka = k.b
		if s.Kafka, err = Probe(Kafka, k.b.addr, false); err != nil {
			return err
		}
	}
	if s.sasl {
		s.Coord.SASLAddr = coord.saslAddr
		if err := createSASLUsers(coord.addr, coord.saslAddr); err != nil {
			return err
		}
		if s.Kafka != nil {
			s.Kafka.SASLAddr = s.kafka.saslAddr
			if err := createSASLUsers(s.kafka.addr, s.kafka.saslAddr); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *servers) stop() {
	if s.kafka != nil {
		s.kafka.stop()
	}
	if s.coord != nil {
		s.coord.stop()
	}
	if s.tmp != "" && os.Getenv("CONFORMANCE_KEEP") == "" {
		os.RemoveAll(s.tmp)
	}
}

// kafkaWanted says whether this run diffs against Kafka, and if not, why.
func kafkaWanted() (bool, string) {
	if os.Getenv("KAFKA_ADDR") != "" {
		return true, ""
	}
	switch os.Getenv("CONFORMANCE") {
	case "1", "true", "yes":
		return true, ""
	}
	return false, "Kafka side skipped: set CONFORMANCE=1 (or run test/conformance/run.sh) to diff every scenario against Apache Kafka 4.4; only coordinatord's expectations were checked"
}

// gatewayWanted says whether coordinatord runs in gateway mode in front of the reference
// broker (CONFORMANCE_GATEWAY=1, make conformance-gateway): every scenario then reaches the
// group APIs through the gateway and every other API through it to the broker.
func gatewayWanted() bool {
	switch os.Getenv("CONFORMANCE_GATEWAY") {
	case "1", "true", "yes":
		return true
	}
	return false
}

// ---------------------------------------------------------------------------- coordinatord

type coordinatord struct {
	cmd      *exec.Cmd
	addr     string
	saslAddr string // the SASL_PLAINTEXT listener, when it has one
	exited   chan struct{}

	mu   sync.Mutex
	logs []string
}

// startCoordinatord starts coordinatord standalone, or in gateway mode in front of upstream
// (host:port) when that is set.
func startCoordinatord(tmp, upstream string, sets []string) (*coordinatord, error) {
	bin := os.Getenv("CONFORMANCE_COORDINATORD") // a binary built elsewhere, e.g. a release
	if bin == "" {
		bin = filepath.Join(tmp, "coordinatord")
		// -race: the build cache is shared with test/integration, which builds the same way.
		build := exec.Command("go", "build", "-race", "-o", bin, "../../cmd/coordinatord")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("building coordinatord: %w", err)
		}
	}
	data := filepath.Join(tmp, "coordinatord-data")
	c := &coordinatord{exited: make(chan struct{})}
	c.cmd = exec.Command(bin, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0",
		"--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+data,
		"--set", "node.id="+coordinatordNodeID,
		"--set", "shutdown.timeout.ms=2000",
		// As test/kafka/kafka.sh configures the reference broker: one offsets partition (so a
		// group's __consumer_offsets partition, the one WriteTxnMarkers names, is 0 on both),
		// no delay before the first assignment of a classic or streams group.
		"--set", "offsets.topic.num.partitions=1",
		"--set", "group.initial.rebalance.delay.ms=0",
		"--set", "group.streams.initial.rebalance.delay.ms=0",
		// Kafka answers a join whose internal topics are missing with MISSING_INTERNAL_TOPICS;
		// coordinatord's default creates them first (docs/conformance.md).
		"--set", "group.streams.join.creates.internal.topics=false",
		// Kafka answers every heartbeat with the configured interval; coordinatord's default
		// answers a shorter one during a hand-over (docs/conformance.md).
		"--set", "group.streams.reconciliation.heartbeat.interval.ms=0",
		// Kafka computes a group's target once per assignment interval; coordinatord's
		// default computes sooner for a quiet group (docs/conformance.md).
		"--set", "group.consumer.assignment.quiet.ms=0",
		"--set", "group.streams.assignment.quiet.ms=0",
		// kafka.sh runs Kafka's in-memory topology description plugin (KIP-1331).
		"--set", "group.streams.topology.description.plugin.class=memory",
	)
	for _, kv := range sets {
		c.cmd.Args = append(c.cmd.Args, "--set", kv)
	}
	if upstream != "" {
		// Broker ports: the 100 after the listener's, which the kernel picks.
		c.cmd.Args = append(c.cmd.Args, "--set", "upstream.bootstrap.servers="+upstream)
	}
	// A data race ends the daemon (and so the run) instead of being printed and passed over.
	c.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	c.cmd.Stderr = os.Stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	started := make(chan startedLine, 1)
	go c.readLogs(out, started)
	go func() { c.cmd.Wait(); close(c.exited) }()
	select {
	case line := <-started:
		c.addr, c.saslAddr = line.addr, line.saslAddr
		// Like a deployment's readiness gate: scenarios start once every shard has loaded
		// (before that, Metadata finds no catalog).
		if err := waitReady(line.admin, c.exited); err != nil {
			c.stop()
			return nil, err
		}
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("coordinatord exited before starting: %v", c.cmd.ProcessState)
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, errors.New("coordinatord did not start within 30s")
	}
}

type startedLine struct{ addr, saslAddr, admin string }

func waitReady(admin string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("coordinatord exited while loading")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("coordinatord not ready (/readyz) within 30s")
}

func (c *coordinatord) readLogs(r io.Reader, started chan<- startedLine) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		c.logs = append(c.logs, line)
		c.mu.Unlock()
		var l struct {
			Msg       string   `json:"msg"`
			Listeners []string `json:"listeners"`
			Admin     string   `json:"admin"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "coordinatord started" && len(l.Listeners) > 0 {
			sl := startedLine{addr: strings.TrimPrefix(l.Listeners[0], "PLAINTEXT://"), admin: l.Admin}
			for _, ln := range l.Listeners {
				if a, ok := strings.CutPrefix(ln, "SASL_PLAINTEXT://"); ok {
					sl.saslAddr = a
				}
			}
			started <- sl
		}
	}
}

// logMark and logsSince let a failing scenario show what coordinatord logged meanwhile
// (for instance the reason it closed a connection).
func (c *coordinatord) logMark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.logs)
}

func (c *coordinatord) logsSince(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs[mark:]...)
}

func (c *coordinatord) stop() {
	if c.cmd.Process == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
}

// ---------------------------------------------------------------------------- kafka

type kafkaBroker struct {
	addr     string
	saslAddr string // its SASL_PLAINTEXT listener, when started with one
	dir      string // empty when the broker was started by someone else (KAFKA_ADDR)
}

const kafkaScript = "../kafka/kafka.sh"

// startKafka runs test/kafka/kafka.sh start in dir (or CONFORMANCE_KAFKA_DIR), or uses the
// broker KAFKA_ADDR names.
func startKafka(dir string, configs []string, sasl bool) (*kafkaBroker, error) {
	if addr := os.Getenv("KAFKA_ADDR"); addr != "" {
		return &kafkaBroker{addr: addr}, nil
	}
	if d := os.Getenv("CONFORMANCE_KAFKA_DIR"); d != "" && configs == nil {
		dir = d
	}
	cmd := exec.Command(kafkaScript, "start", "--dir", dir)
	if sasl {
		cmd.Args = append(cmd.Args, "--listener", "SASL_PLAINTEXT")
	}
	for _, kv := range configs {
		cmd.Args = append(cmd.Args, "--config", kv)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return nil, fmt.Errorf("CONFORMANCE=1 but the reference broker cannot run here (java 17+ or mvn missing; test/conformance/run.sh installs them): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("starting the reference broker (%s start --dir %s): %w", kafkaScript, dir, err)
	}
	b := &kafkaBroker{dir: dir}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_ADDR="); ok {
			b.addr = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "KAFKA_LISTENER_SASL_PLAINTEXT="); ok {
			b.saslAddr = strings.TrimSpace(v)
		}
	}
	if b.addr == "" || (sasl && b.saslAddr == "") {
		b.stop()
		return nil, fmt.Errorf("%s start printed no KAFKA_ADDR", kafkaScript)
	}
	return b, nil
}

func (b *kafkaBroker) stop() {
	if b.dir == "" {
		return
	}
	cmd := exec.Command(kafkaScript, "stop", "--dir", b.dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Run()
}

// runID is a random suffix for names (topics, groups) so scenarios do not collide with what
// an earlier run left in a long-lived broker (KAFKA_ADDR).
func runID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
