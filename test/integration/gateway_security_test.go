package integration

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secureUpstream is a standalone coordinatord serving SASL_SSL, standing in for an upstream
// cluster that requires TLS and SCRAM, with the gateway's own SCRAM user "gw".
func secureUpstream(t *testing.T, p *testPKI) *daemon {
	up, _ := saslDaemon(t, p)
	adm := kadm.NewClient(up.client())
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "gw", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "gw-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	return up
}

// The gateway reaches an upstream that requires TLS and SASL with upstream.* keys: its own
// client (metadata at start) and the connections it opens for a client's forwarded requests
// both verify the upstream's certificate and log in as the gateway's user.
func TestGatewayUpstreamOverTLSAndSCRAM(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := secureUpstream(t, p)
	gw := startDaemon(t, "node.id=1000",
		"upstream.bootstrap.servers="+up.Listeners["SASL_SSL"],
		"upstream.security.protocol=SASL_SSL",
		"upstream.ssl.truststore.location="+p.caFile,
		"upstream.sasl.mechanism=SCRAM-SHA-256",
		`upstream.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="gw" password="gw-secret";`)
	ctx := ctxT(t)
	adm := kadm.NewClient(gw.client())
	// CreateTopics is forwarded on the client's own upstream connection.
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "through-gw"); err != nil {
		t.Fatalf("CreateTopic through the gateway: %v", err)
	}
	topics, err := kadm.NewClient(up.client()).ListTopics(ctx, "through-gw")
	if err != nil || topics.Error() != nil || len(topics["through-gw"].Partitions) != 2 {
		t.Fatalf("upstream topics %v, %v", topics, err)
	}
}

// In gateway mode an SSL listener terminates the client's TLS at coordinatord, and the
// per-upstream-broker ports clients are sent to serve TLS with the same certificate: a client
// that bootstrapped over TLS produces and consumes through them, and commits its offsets.
func TestGatewaySSLListenerAndBrokerPorts(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := secureUpstream(t, p)
	gw := startDaemon(t, "node.id=1000",
		"listeners=SSL://127.0.0.1:0",
		"ssl.keystore.location="+p.serverKeystore("gateway"),
		"upstream.bootstrap.servers="+up.Listeners["SASL_SSL"],
		"upstream.security.protocol=SASL_SSL",
		"upstream.ssl.truststore.location="+p.caFile,
		"upstream.sasl.mechanism=SCRAM-SHA-256",
		"upstream.sasl.username=gw", "upstream.sasl.password=gw-secret")
	ctx := ctxT(t)
	cl := gw.client(kgo.SeedBrokers(gw.Listeners["SSL"]), kgo.DialTLSConfig(p.clientTLS()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "tls-t"); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		t.Fatalf("ListBrokers: %v %v", brokers, err)
	}
	for _, b := range brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		conn, err := tls.Dial("tcp", addr, p.clientTLS())
		if err != nil {
			t.Fatalf("broker port %s (node %d) does not serve TLS: %v", addr, b.NodeID, err)
		}
		conn.Close()
	}
	// Metadata through the broker port of the upstream's broker: a forwarded request whose
	// client connection is TLS at the gateway's broker port.
	bcl := gw.client(kgo.SeedBrokers(net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port)))), kgo.DialTLSConfig(p.clientTLS()))
	off := kadm.Offsets{}
	off.AddOffset("tls-t", 0, 3, -1)
	if _, err := kadm.NewClient(bcl).CommitOffsets(ctx, "tls-g", off); err != nil {
		t.Fatalf("CommitOffsets over TLS: %v", err)
	}
	got, err := adm.FetchOffsets(ctx, "tls-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("tls-t", 0); o.At != 3 {
		t.Fatalf("committed offset %+v, want 3", o)
	}
}

// A client of a SASL listener logs in with the upstream, through the gateway: the upstream
// checks its password (the gateway knows none of these users), its forwarded requests go
// upstream under its own login, and group APIs answered by coordinatord work once it is in.
// Wrong passwords and unknown users are refused with the upstream's SASL_AUTHENTICATION_FAILED.
func TestGatewayRelaysSASLToTheUpstream(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := secureUpstream(t, p)
	res, err := kadm.NewClient(up.client()).AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	gw := startDaemon(t, "node.id=1000",
		"listeners=SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location="+p.serverKeystore("gateway"),
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"upstream.bootstrap.servers="+up.Listeners["SASL_SSL"],
		"upstream.security.protocol=SASL_SSL",
		"upstream.ssl.truststore.location="+p.caFile,
		"upstream.sasl.mechanism=SCRAM-SHA-256",
		"upstream.sasl.username=gw", "upstream.sasl.password=gw-secret")
	ctx := ctxT(t)
	login := func(mech sasl.Mechanism) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(gw.Listeners["SASL_SSL"]), kgo.DialTLSConfig(p.clientTLS()), kgo.SASL(mech),
			kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		topic := "relay-" + mech.Name()
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		off := kadm.Offsets{}
		off.AddOffset(topic, 0, 5, -1)
		if _, err := adm.CommitOffsets(ctx, "relay-g-"+mech.Name(), off); err != nil {
			return err
		}
		got, err := adm.FetchOffsets(ctx, "relay-g-"+mech.Name())
		if err != nil {
			return err
		}
		if o, _ := got.Lookup(topic, 0); o.At != 5 {
			t.Errorf("%s: committed offset %+v, want 5", mech.Name(), o)
		}
		return nil
	}
	for _, ok := range []sasl.Mechanism{
		scramSHA256("alice", "alice-secret"),
		scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(),
		plain.Auth{User: "pat", Pass: "pat-secret"}.AsMechanism(),
	} {
		if err := login(ok); err != nil {
			t.Fatalf("%s through the gateway: %v", ok.Name(), err)
		}
	}
	for name, bad := range map[string]sasl.Mechanism{
		"wrong password":       scramSHA256("alice", "nope"),
		"unknown user":         scramSHA256("mallory", "alice-secret"),
		"wrong PLAIN password": plain.Auth{User: "pat", Pass: "nope"}.AsMechanism(),
		// The gateway's own user is not lent to clients: its password is checked like any other.
		"gateway user, wrong password": scramSHA256("gw", "guess"),
	} {
		if err := login(bad); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: err = %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// Nothing but ApiVersions and SaslHandshake before the login, on the gateway's port too.
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw.Listeners["SASL_SSL"]), kgo.DialTLSConfig(p.clientTLS()),
		kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).ListTopics(ctx); err == nil {
		t.Error("a client without SASL listed topics through a SASL listener of the gateway")
	}
}

// A gateway whose own upstream login is refused does not start, and says why.
func TestGatewayRefusesToStartWithAWrongUpstreamPassword(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := secureUpstream(t, p)
	cmd := exec.Command(binaryPath, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", "node.id=1000",
		"--set", "upstream.bootstrap.servers="+up.Listeners["SASL_SSL"],
		"--set", "upstream.security.protocol=SASL_SSL",
		"--set", "upstream.ssl.truststore.location="+p.caFile,
		"--set", "upstream.sasl.mechanism=SCRAM-SHA-256",
		"--set", "upstream.sasl.username=gw", "--set", "upstream.sasl.password=wrong",
		"--set", "upstream.startup.timeout.ms=1500")
	cmd.Env = daemonEnv(binaryPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("coordinatord started although the upstream refused its login")
	}
	failIfRaced(t, cmd.ProcessState)
	if msg := stderr.String(); !strings.Contains(msg, "gateway mode") || !strings.Contains(msg, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("the refusal does not say the login failed: %q", msg)
	}
}
