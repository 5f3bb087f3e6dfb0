package integration

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// In gateway mode with an authorizer, the group APIs coordinatord answers follow the
// upstream's ACLs (here a standalone coordinatord with an authorizer stands in for the
// cluster), and an ACL created through the gateway is the upstream's and applies on retry.
func TestGatewayGroupAPIsFollowTheUpstreamsACLs(t *testing.T) {
	t.Parallel()
	up := startDaemon(t, standardAuthorizer, "super.users=User:ANONYMOUS")
	ctx := ctxT(t)
	upAdm := kadm.NewClient(up.client())
	if _, err := upAdm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// The gateway's clients are User:ANONYMOUS to coordinatord (a plaintext listener) but have
	// no super.users there: only the upstream's ACLs let them do anything.
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Groups("ok-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
	} {
		if res, err := upAdm.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs upstream: %v %v", err, res)
		}
	}
	gw := startDaemon(t, "node.id=1000", "upstream.bootstrap.servers="+up.Addr, standardAuthorizer,
		"upstream.acls.refresh.interval.ms=3600000")
	adm := kadm.NewClient(gw.client(kgo.RequestRetries(0)))
	commit := func(group string) error {
		resp, err := adm.CommitOffsets(ctx, group, kadm.Offsets{"t": {0: {Topic: "t", At: 1}}})
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit("ok-1"); err != nil {
		t.Fatalf("commit where the upstream's ACLs allow: %v", err)
	}
	if err := commit("no"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("commit where no upstream ACL allows: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// CreateAcls through the gateway is forwarded: the binding is the upstream's.
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Groups("no").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs through the gateway: %v %v", err, res)
	}
	described, err := upAdm.DescribeACLs(ctx, kadm.NewACLs().Groups("no").ResourcePatternType(kadm.ACLPatternLiteral).AllowHosts().Allow().Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || len(described[0].Described) != 1 {
		t.Fatalf("the upstream's ACLs on group no: %v %+v", err, described)
	}
	// The refresh interval is an hour: only the denial's re-read can let this through.
	for {
		err := commit("no")
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("commit after the grant: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the ACL added upstream never applied")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A gateway with an authorizer whose upstream has none refuses to start and says what is
// missing, rather than deciding the group APIs by an empty set.
func TestGatewayWithAnAuthorizerRefusesAnUpstreamWithout(t *testing.T) {
	t.Parallel()
	up := startDaemon(t)
	cmd := exec.Command(binaryPath, "serve",
		"--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", "admin.listener=127.0.0.1:0",
		"--set", "log.dirs="+t.TempDir(), "--set", "node.id=1000",
		"--set", "upstream.bootstrap.servers="+up.Addr, "--set", standardAuthorizer,
		"--set", "upstream.startup.timeout.ms=1500")
	cmd.Env = daemonEnv(binaryPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("coordinatord started although the upstream has no ACLs to read")
	}
	failIfRaced(t, cmd.ProcessState)
	if msg := stderr.String(); !strings.Contains(msg, "SECURITY_DISABLED") || !strings.Contains(msg, "DESCRIBE on CLUSTER") {
		t.Errorf("the refusal does not say why: %q", msg)
	}
}

// An ACL deleted through the gateway no longer applies to the next request, although the
// gateway reads the upstream's ACLs only every hour here and no denial asks it to read again:
// Kafka applies a revocation on every broker within milliseconds.
func TestGatewayACLDeletedThroughItAppliesAtOnce(t *testing.T) {
	t.Parallel()
	up := startDaemon(t, standardAuthorizer, "super.users=User:ANONYMOUS")
	ctx := ctxT(t)
	upAdm := kadm.NewClient(up.client())
	if _, err := upAdm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	grants := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Groups("app").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
	}
	for _, b := range grants {
		if res, err := upAdm.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs upstream: %v %v", err, res)
		}
	}
	gw := startDaemon(t, "node.id=1000", "upstream.bootstrap.servers="+up.Addr, standardAuthorizer,
		"upstream.acls.refresh.interval.ms=3600000")
	adm := kadm.NewClient(gw.client(kgo.RequestRetries(0)))
	commit := func() error {
		resp, err := adm.CommitOffsets(ctx, "app", kadm.Offsets{"t": {0: {Topic: "t", At: 1}}})
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit(); err != nil {
		t.Fatalf("commit while the upstream's ACLs allow it: %v", err)
	}
	// kafka-acls.sh --remove through the gateway, as an operator revoking access does.
	res, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Groups("app").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs through the gateway: %v %+v", err, res)
	}
	if err := commit(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("commit right after the grant was deleted: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
}
