package meta

import (
	"testing"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/state/log"
)

func replayACLs(t *testing.T, c *Catalog, offset *int64, recs []log.Record) {
	t.Helper()
	for _, rec := range recs {
		*offset++
		if err := c.Replay(*offset, rec); err != nil {
			t.Fatal(err)
		}
	}
}

func TestACLsCreateDeleteAndReload(t *testing.T) {
	alice := acl.Principal{Type: "User", Name: "alice"}
	g := acl.Binding{Resource: acl.ResourceGroup, Name: "g", Pattern: acl.PatternLiteral, Principal: alice, Host: "*", Operation: acl.OpRead, Permission: acl.Allow}
	tp := acl.Binding{Resource: acl.ResourceTopic, Name: "t-", Pattern: acl.PatternPrefixed, Principal: alice, Host: "10.0.0.1", Operation: acl.OpAll, Permission: acl.Deny}
	c := NewCatalog()
	var off int64
	var all []log.Record
	r := CreateACLs([]acl.Binding{g, tp, g})(nil, c)
	if len(r.Records) != 2 {
		t.Fatalf("%d records for two distinct bindings", len(r.Records))
	}
	all = append(all, r.Records...)
	replayACLs(t, c, &off, r.Records)
	if r := CreateACLs([]acl.Binding{g})(nil, c); len(r.Records) != 0 {
		t.Fatal("creating an existing binding wrote a record")
	}
	v := c.ACLView()
	if v.Set.Len() != 2 || v.Version != off {
		t.Fatalf("view: %d bindings at %d, want 2 at %d", v.Set.Len(), v.Version, off)
	}
	everything := acl.Filter{Resource: acl.ResourceAny, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	groups := everything
	groups.Resource = acl.ResourceGroup
	r = DeleteACLs([]acl.Filter{groups, everything})(nil, c)
	got := r.Response.([][]acl.Binding)
	if len(got[0]) != 1 || len(got[1]) != 2 || len(r.Records) != 2 {
		t.Fatalf("delete: matched %d and %d with %d records; want 1 and 2 with 2 (a binding matched twice is deleted once)", len(got[0]), len(got[1]), len(r.Records))
	}
	// Reload the creates alone: the bindings come back from their records.
	c2 := NewCatalog()
	var off2 int64
	replayACLs(t, c2, &off2, all)
	if c2.ACLView().Set.Len() != 2 || c2.ACLView().Set.Select(everything)[1] != g {
		t.Fatalf("reloaded bindings: %v", c2.ACLView().Set.Select(everything))
	}
	replayACLs(t, c, &off, r.Records)
	if c.ACLView().Set.Len() != 0 {
		t.Fatal("deleted bindings remain")
	}
}
