package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// startSASLKafka starts a second reference broker with a SASL_SSL listener (SCRAM-SHA-256, a
// PEM keystore issued by a CA made here, whose file it returns) and Kafka's StandardAuthorizer,
// denying what no ACL allows; its PLAINTEXT listener is the administrator's (User:ANONYMOUS is a
// super user there). It returns both addresses.
func startSASLKafka(t *testing.T) (admin, sasl, caFile string) {
	t.Helper()
	dir := t.TempDir()
	caFile, keystore := testCertificates(t, dir)
	cmd := exec.Command(kafkaScript, "start", "--dir", dir, "--no-topology-plugin", "--no-warmup", "--listener", "SASL_SSL",
		"--config", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
		"--config", "sasl.enabled.mechanisms=SCRAM-SHA-256",
		"--config", "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"--config", "listener.name.sasl_ssl.ssl.keystore.type=PEM",
		"--config", "listener.name.sasl_ssl.ssl.keystore.location="+keystore,
		"--config", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--config", "super.users=User:ANONYMOUS",
		"--config", "allow.everyone.if.no.acl.found=false",
		"--config", "group.coordinator.rebalance.protocols=classic,consumer")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("starting the SASL reference broker: %v", err)
	}
	t.Cleanup(func() {
		stop := exec.Command(kafkaScript, "stop", "--dir", dir)
		stop.Stdout, stop.Stderr = os.Stderr, os.Stderr
		stop.Run()
	})
	for _, line := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_ADDR="); ok {
			admin = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "KAFKA_LISTENER_SASL_SSL="); ok {
			sasl = strings.TrimSpace(v)
		}
	}
	if admin == "" || sasl == "" {
		t.Fatalf("kafka.sh start printed no addresses:\n%s", stdout.String())
	}
	return admin, sasl, caFile
}

// testCertificates writes a CA certificate and a server keystore for 127.0.0.1 (PKCS#8 key and
// certificate in one PEM file, Kafka's ssl.keystore.type=PEM) into dir.
func testCertificates(t *testing.T, dir string) (caFile, keystore string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafka"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, keystore = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "kafka.pem")
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keystore, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, keystore
}

// A SCRAM client through the gateway to an upstream with SASL over TLS and an authorizer
// (the gateway verifies the upstream's certificate against upstream.ssl.truststore.location): the upstream
// checks each client's password and applies each client's own ACLs to what is forwarded (alice
// may write and read her topic, bob may not, although the gateway's own user could describe it),
// while the group and its offsets live in coordinatord. A wrong password is refused.
func TestGateway_SCRAMClientsRelayedToASASLUpstream(t *testing.T) {
	t.Parallel()
	requireE2E(t)
	adminAddr, saslAddr, caFile := startSASLKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	adm := kadm.NewClient(newClient(t, adminAddr))
	const topic = "relay-orders"
	// The gateway's user describes the cluster and every topic (its metadata); alice owns her
	// topic; bob has no ACL at all.
	prepareSASLUpstream(t, ctx, adm, []string{"gw", "alice", "bob"}, topic,
		kadm.NewACLs().Allow("User:gw").AllowHosts().Topics("*").Clusters().Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(topic).Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
	)

	g := startSASLGateway(t, saslAddr, caFile)

	client := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		return newClient(t, g.Addr, append([]kgo.Opt{scramSHA256(user, pass)}, opts...)...)
	}

	alice := client("alice", "alice-secret", kgo.ConsumerGroup("relay-g"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for i := 0; i < 10; i++ {
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte('0' + i)}}).FirstErr(); err != nil {
			t.Fatalf("alice produces to her topic: %v", err)
		}
	}
	got := 0
	for got < 10 {
		fs := alice.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consumes: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := alice.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits: %v", err)
	}
	offs, err := kadm.NewClient(alice).FetchOffsets(ctx, "relay-g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.At != 10 {
		t.Fatalf("committed offset %+v, want 10", o)
	}

	// bob logs in (his password is right) but the upstream's ACLs do not let him write: the
	// produce is checked under his principal, not the gateway's.
	bob := client("bob", "bob-secret", kgo.RecordRetries(0), kgo.RequestRetries(0))
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	wrong := client("alice", "guess", kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if _, err := kadm.NewClient(wrong).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// prepareSASLUpstream creates, on the SASL upstream's admin listener, a SCRAM-SHA-256 user for
// each name (password "<name>-secret"), the topic and the ACL bindings a test needs.
func prepareSASLUpstream(t *testing.T, ctx context.Context, adm *kadm.Client, users []string, topic string, acls ...*kadm.ACLBuilder) {
	t.Helper()
	var ups []kadm.UpsertSCRAM
	for _, u := range users {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: u + "-secret"})
	}
	if res, err := adm.AlterUserSCRAMs(ctx, nil, ups); err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	for _, b := range acls {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("CreateACLs: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs %+v: %v", r, r.Err)
			}
		}
	}
}

// startSASLGateway starts coordinatord in gateway mode in front of the SASL_SSL upstream at
// saslAddr (verified against caFile), as the upstream user gw, with a SASL_PLAINTEXT
// SCRAM-SHA-256 listener of its own instead of startGateway's PLAINTEXT one; sets are more
// --set values.
func startSASLGateway(t *testing.T, saslAddr, caFile string, sets ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, DataDir: t.TempDir()}
	base := freePortRange(t, 11)
	g.Addr = "127.0.0.1:" + strconv.Itoa(base)
	g.PortMin, g.PortMax = base+1, base+10
	g.sets = append([]string{"listeners=SASL_PLAINTEXT://" + g.Addr, "sasl.enabled.mechanisms=SCRAM-SHA-256",
		"upstream.bootstrap.servers=" + saslAddr,
		"upstream.security.protocol=SASL_SSL",
		"upstream.ssl.truststore.location=" + caFile,
		"upstream.sasl.mechanism=SCRAM-SHA-256",
		"upstream.sasl.username=gw", "upstream.sasl.password=gw-secret"}, sets...)
	g.start()
	return g
}

// scramSHA256 is a franz-go client's SCRAM-SHA-256 login.
func scramSHA256(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
}
