package handlers

import (
	"fmt"
	"net"
	"testing"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/coordinatord/coordinatord/internal/wire"
)

// Every served API decides its authorization before it is served: a key registered without an
// entry in authorizations is an API whose checks nobody wrote down (issue 13).
func TestEveryAPIHasAnAuthorizationEntry(t *testing.T) {
	tbl := New(Deps{Node: Node{ID: 1, Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}})
	for key := range tbl.apis {
		if authorizations[key] == "" {
			t.Errorf("API key %d is served without an entry in authorizations (authz.go)", key)
		}
	}
	for key := range authorizations {
		if _, ok := tbl.apis[key]; !ok {
			t.Errorf("authorizations lists key %d, which is not served", key)
		}
	}
}

// The whole check a handler makes on the request path (principal and host of the connection,
// then the cached decision): well under a microsecond.
func BenchmarkGroupCheckOnRequestPath(b *testing.B) {
	a := acl.New(acl.Config{Enabled: true})
	var bs []acl.Binding
	for i := 0; i < 1000; i++ {
		bs = append(bs, acl.Binding{Resource: acl.ResourceGroup, Name: fmt.Sprintf("group-%d", i), Pattern: acl.PatternLiteral,
			Principal: acl.Principal{Type: "User", Name: "ANONYMOUS"}, Host: "*", Operation: acl.OpRead, Permission: acl.Allow})
	}
	a.Update(acl.NewSet(bs), 0)
	tbl := New(Deps{Authorizer: a, Node: Node{ID: 1, Endpoints: []Endpoint{{Listener: "PLAINTEXT", Host: "h", Port: 1}}}})
	r := &wire.Request{Conn: &wire.Conn{Remote: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 50000}}}
	b.ReportAllocs()
	for b.Loop() {
		if !tbl.groupAllowed(r, "group-500", acl.OpRead) {
			b.Fatal("denied")
		}
	}
}
