package integration

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
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
