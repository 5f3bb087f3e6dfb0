package config

import (
	"strings"
	"testing"
	"time"
)

func TestAuthorizerKeys(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Authorizer.Enabled || c.Authorizer.AllowEveryoneIfNoACL {
		t.Fatal("authorization is on by default; deployments without authorizer.class.name must stay open")
	}
	c, err = Load("", []string{"authorizer.class.name=" + StandardAuthorizer, "super.users=User:admin; User:ops", "allow.everyone.if.no.acl.found=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authorizer.Enabled || !c.Authorizer.AllowEveryoneIfNoACL || strings.Join(c.Authorizer.SuperUsers, ";") != "User:admin;User:ops" {
		t.Fatalf("authorizer config: %+v", c.Authorizer)
	}
	for _, bad := range [][]string{
		{"authorizer.class.name=kafka.security.authorizer.AclAuthorizer"},
		{"super.users=admin"},
		{"upstream.acls.refresh.interval.ms=999"},
	} {
		if _, err := Load("", bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// Gateway mode takes the upstream's ACLs rather than refusing the authorizer.
	c, err = Load("", []string{"authorizer.class.name=" + StandardAuthorizer, "upstream.bootstrap.servers=127.0.0.1:9092", "upstream.acls.refresh.interval.ms=5000"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Authorizer.Enabled || c.Authorizer.UpstreamRefresh != 5*time.Second {
		t.Fatalf("gateway authorizer config: %+v", c.Authorizer)
	}
}
