package acl

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var (
	alice = Principal{"User", "alice"}
	bob   = Principal{"User", "bob"}
	any_  = Principal{"User", "*"}
)

func lit(r ResourceType, name string, p Principal, op Operation, perm Permission) Binding {
	return Binding{Resource: r, Name: name, Pattern: PatternLiteral, Principal: p, Host: "*", Operation: op, Permission: perm}
}

func pre(r ResourceType, name string, p Principal, op Operation, perm Permission) Binding {
	b := lit(r, name, p, op, perm)
	b.Pattern = PatternPrefixed
	return b
}

func TestDecisions(t *testing.T) {
	onHost := lit(ResourceGroup, "g", alice, OpRead, Allow)
	onHost.Host = "10.0.0.1"
	cases := []struct {
		name     string
		bindings []Binding
		noACL    bool
		super    []Principal
		p        Principal
		host     string
		r        ResourceType
		res      string
		op       Operation
		want     bool
	}{
		{"no acl, default deny", nil, false, nil, alice, "1.2.3.4", ResourceGroup, "g", OpRead, false},
		{"no acl, allow everyone", nil, true, nil, alice, "1.2.3.4", ResourceGroup, "g", OpRead, true},
		{"literal allow", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, true},
		{"literal is not a prefix", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "gg", OpRead, false},
		{"acls for others deny even with allow-everyone", []Binding{lit(ResourceGroup, "g", bob, OpRead, Allow)}, true, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"acls on another resource leave the default", []Binding{lit(ResourceGroup, "other", bob, OpRead, Allow)}, true, nil, alice, "h", ResourceGroup, "g", OpRead, true},
		{"acls on another type leave the default", []Binding{lit(ResourceTopic, "g", bob, OpRead, Allow)}, true, nil, alice, "h", ResourceGroup, "g", OpRead, true},
		{"deny beats allow", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow), lit(ResourceGroup, "g", alice, OpRead, Deny)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"wildcard-principal deny beats specific allow", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow), lit(ResourceGroup, "g", any_, OpRead, Deny)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"prefixed deny beats literal allow", []Binding{lit(ResourceGroup, "app-1", alice, OpRead, Allow), pre(ResourceGroup, "app-", alice, OpAll, Deny)}, false, nil, alice, "h", ResourceGroup, "app-1", OpRead, false},
		{"prefixed allow", []Binding{pre(ResourceGroup, "app-", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "app-1", OpRead, true},
		{"prefixed equal name", []Binding{pre(ResourceGroup, "app-", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "app-", OpRead, true},
		{"prefixed longer than name", []Binding{pre(ResourceGroup, "app-1", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "app-", OpRead, false},
		{"prefixed other prefix", []Binding{pre(ResourceGroup, "app-", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "ap", OpRead, false},
		{"prefixed * is not a wildcard", []Binding{pre(ResourceGroup, "*", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"literal * wildcard", []Binding{lit(ResourceGroup, "*", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "anything", OpRead, true},
		{"User:* principal", []Binding{lit(ResourceGroup, "g", any_, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, true},
		{"Group:* is not a wildcard", []Binding{lit(ResourceGroup, "g", Principal{"Group", "*"}, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"read implies describe", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpDescribe, true},
		{"write implies describe", []Binding{lit(ResourceTopic, "t", alice, OpWrite, Allow)}, false, nil, alice, "h", ResourceTopic, "t", OpDescribe, true},
		{"delete implies describe", []Binding{lit(ResourceGroup, "g", alice, OpDelete, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpDescribe, true},
		{"alter implies describe", []Binding{lit(ResourceCluster, ClusterName, alice, OpAlter, Allow)}, false, nil, alice, "h", ResourceCluster, ClusterName, OpDescribe, true},
		{"create does not imply describe", []Binding{lit(ResourceTopic, "t", alice, OpCreate, Allow)}, false, nil, alice, "h", ResourceTopic, "t", OpDescribe, false},
		{"describe does not imply read", []Binding{lit(ResourceGroup, "g", alice, OpDescribe, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpRead, false},
		{"alter_configs implies describe_configs", []Binding{lit(ResourceTopic, "t", alice, OpAlterConfigs, Allow)}, false, nil, alice, "h", ResourceTopic, "t", OpDescribeConfigs, true},
		{"alter does not imply describe_configs", []Binding{lit(ResourceTopic, "t", alice, OpAlter, Allow)}, false, nil, alice, "h", ResourceTopic, "t", OpDescribeConfigs, false},
		{"deny read does not deny describe", []Binding{lit(ResourceGroup, "g", alice, OpDescribe, Allow), lit(ResourceGroup, "g", alice, OpRead, Deny)}, false, nil, alice, "h", ResourceGroup, "g", OpDescribe, true},
		{"all allows everything", []Binding{lit(ResourceGroup, "g", alice, OpAll, Allow)}, false, nil, alice, "h", ResourceGroup, "g", OpDelete, true},
		{"deny all denies describe", []Binding{lit(ResourceGroup, "g", alice, OpRead, Allow), lit(ResourceGroup, "g", alice, OpAll, Deny)}, false, nil, alice, "h", ResourceGroup, "g", OpDescribe, false},
		{"super user without acls", nil, false, []Principal{alice}, alice, "h", ResourceCluster, ClusterName, OpAlter, true},
		{"super user despite deny", []Binding{lit(ResourceGroup, "g", alice, OpAll, Deny)}, false, []Principal{alice}, alice, "h", ResourceGroup, "g", OpRead, true},
		{"super user is exact", nil, false, []Principal{bob}, alice, "h", ResourceGroup, "g", OpRead, false},
		{"host matches", []Binding{onHost}, false, nil, alice, "10.0.0.1", ResourceGroup, "g", OpRead, true},
		{"host differs", []Binding{onHost}, false, nil, alice, "10.0.0.2", ResourceGroup, "g", OpRead, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Config{Enabled: true, AllowIfNoACL: c.noACL, SuperUsers: c.super})
			a.Update(NewSet(c.bindings), 0)
			for i := 0; i < 2; i++ { // the second answer comes from the cache
				if got := a.Allowed(c.p, c.host, c.r, c.res, c.op); got != c.want {
					t.Fatalf("check %d: got %v, want %v", i, got, c.want)
				}
			}
		})
	}
}

func TestDisabledAllowsEverything(t *testing.T) {
	a := New(Config{})
	a.Update(NewSet([]Binding{lit(ResourceGroup, "g", alice, OpAll, Deny)}), 0)
	if !a.Authorize(alice, "h", ResourceGroup, "g", OpRead) {
		t.Fatal("an authorizer that is not enabled denied")
	}
	if got := a.AuthorizedOperations(alice, "h", ResourceGroup, "g"); got != 3400 {
		t.Fatalf("authorized operations without an authorizer: %d, want every group operation (3400)", got)
	}
}

func TestUpdateInvalidatesCachedDecisions(t *testing.T) {
	a := New(Config{Enabled: true})
	if a.Allowed(alice, "h", ResourceGroup, "g", OpRead) {
		t.Fatal("allowed without acl")
	}
	a.Update(NewSet([]Binding{lit(ResourceGroup, "g", alice, OpRead, Allow)}), 5)
	if !a.Allowed(alice, "h", ResourceGroup, "g", OpRead) {
		t.Fatal("a new ALLOW did not take effect")
	}
	// A set read before the installed one (an older log offset) must not replace it.
	a.Update(NewSet(nil), 3)
	if !a.Allowed(alice, "h", ResourceGroup, "g", OpRead) {
		t.Fatal("an older set replaced a newer one")
	}
	a.Update(NewSet(nil), 6)
	if a.Allowed(alice, "h", ResourceGroup, "g", OpRead) {
		t.Fatal("removing the ALLOW did not take effect")
	}
}

func TestDecisionCacheIsBounded(t *testing.T) {
	a := New(Config{Enabled: true})
	for i := 0; i < maxCachedDecisions+10; i++ {
		a.Allowed(alice, "h", ResourceGroup, fmt.Sprint(i), OpRead)
	}
	if n := a.state.Load().cache.Load().n.Load(); n > maxCachedDecisions {
		t.Fatalf("cache holds %d decisions, more than %d", n, maxCachedDecisions)
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New(Config{Enabled: true})
	a.Update(NewSet([]Binding{lit(ResourceGroup, "g", alice, OpRead, Allow)}), 0)
	if got := a.AuthorizedOperations(alice, "h", ResourceGroup, "g"); got != 1<<OpRead|1<<OpDescribe {
		t.Fatalf("READ on a group: %d, want READ|DESCRIBE (264)", got)
	}
	if got := a.AuthorizedOperations(bob, "h", ResourceGroup, "g"); got != 0 {
		t.Fatalf("no acl: %d, want 0", got)
	}
}

func TestDenialsAreLoggedOncePerIntervalAndCounted(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	a := New(Config{Enabled: true, Logger: zap.New(core), Registerer: reg})
	for i := 0; i < 3; i++ {
		a.Authorize(alice, "h", ResourceGroup, "g", OpRead)
	}
	a.Authorize(alice, "h", ResourceGroup, "g2", OpRead)
	if n := logs.FilterMessage("authorization denied").Len(); n != 2 {
		t.Fatalf("%d denial logs, want one per key (2)", n)
	}
	e := logs.All()[0].ContextMap()
	if e["principal"] != "User:alice" || e["resource"] != "g" || e["operation"] != "READ" || e["resource_type"] != "GROUP" {
		t.Fatalf("denial log fields: %v", e)
	}
	var m dto.Metric
	if err := a.denied.WithLabelValues("GROUP", "READ").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 4 {
		t.Fatalf("denied counter %v, want 4", got)
	}
	if a.Allowed(alice, "h", ResourceGroup, "g3", OpRead); logs.Len() != 2 {
		t.Fatal("Allowed logged a denial")
	}
}

func TestValidate(t *testing.T) {
	ok := lit(ResourceGroup, "g", alice, OpRead, Allow)
	bad := func(f func(*Binding)) Binding { b := ok; f(&b); return b }
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]Binding{
		"any resource":   bad(func(b *Binding) { b.Resource = ResourceAny }),
		"match pattern":  bad(func(b *Binding) { b.Pattern = PatternMatch }),
		"any operation":  bad(func(b *Binding) { b.Operation = OpAny }),
		"any permission": bad(func(b *Binding) { b.Permission = PermissionAny }),
		"empty name":     bad(func(b *Binding) { b.Name = "" }),
		"cluster name":   bad(func(b *Binding) { b.Resource = ResourceCluster; b.Name = "c" }),
		"empty host":     bad(func(b *Binding) { b.Host = "" }),
	} {
		if err := b.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFilterMatch(t *testing.T) {
	s := NewSet([]Binding{
		lit(ResourceTopic, "app-1", alice, OpRead, Allow),
		lit(ResourceTopic, "*", alice, OpRead, Allow),
		pre(ResourceTopic, "app-", alice, OpRead, Allow),
		pre(ResourceTopic, "b", alice, OpRead, Allow),
		lit(ResourceGroup, "app-1", bob, OpRead, Deny),
	})
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		f    Filter
		want int
	}{
		{"everything", Filter{Resource: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, 5},
		{"match", Filter{Resource: ResourceTopic, Name: str("app-1"), Pattern: PatternMatch, Operation: OpAny, Permission: PermissionAny}, 3},
		{"literal", Filter{Resource: ResourceTopic, Name: str("app-1"), Pattern: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, 1},
		{"any pattern exact name", Filter{Resource: ResourceAny, Name: str("app-1"), Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}, 2},
		{"prefixed", Filter{Resource: ResourceTopic, Pattern: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, 2},
		{"principal", Filter{Resource: ResourceAny, Pattern: PatternAny, Principal: str("User:bob"), Operation: OpAny, Permission: PermissionAny}, 1},
		{"deny", Filter{Resource: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: Deny}, 1},
	} {
		if got := len(s.Select(c.f)); got != c.want {
			t.Errorf("%s: %d bindings, want %d", c.name, got, c.want)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5555":             "127.0.0.1",
		"[::1]:9":                    "0:0:0:0:0:0:0:1",
		"[fe80::1%eth0]:9":           "fe80:0:0:0:0:0:0:1",
		"[2001:db8::ff00:42:8329]:1": "2001:db8:0:0:0:ff00:42:8329",
		"[::ffff:10.0.0.1]:1":        "10.0.0.1",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// A check on the request path: a cached decision with a realistic number of bindings.
func BenchmarkAuthorizeCached(b *testing.B) {
	var bs []Binding
	for i := 0; i < 1000; i++ {
		bs = append(bs, lit(ResourceGroup, fmt.Sprintf("group-%d", i), alice, OpRead, Allow))
		bs = append(bs, pre(ResourceTopic, fmt.Sprintf("t%d-", i), alice, OpRead, Allow))
	}
	a := New(Config{Enabled: true})
	a.Update(NewSet(bs), 0)
	b.ReportAllocs()
	for b.Loop() {
		if !a.Authorize(alice, "127.0.0.1", ResourceGroup, "group-500", OpRead) {
			b.Fatal("denied")
		}
	}
}

// The first check of a (principal, resource, operation): the rules themselves.
func BenchmarkDecideUncached(b *testing.B) {
	var bs []Binding
	for i := 0; i < 1000; i++ {
		bs = append(bs, lit(ResourceGroup, fmt.Sprintf("group-%d", i), alice, OpRead, Allow))
		bs = append(bs, pre(ResourceTopic, fmt.Sprintf("t%d-", i), alice, OpRead, Allow))
	}
	s := NewSet(bs)
	b.ReportAllocs()
	for b.Loop() {
		if !s.decide(alice, "127.0.0.1", ResourceTopic, "t500-orders", OpDescribe, false) {
			b.Fatal("denied")
		}
	}
}
