package wire

import "testing"

func TestConnPrincipalIsAnonymousUntilSet(t *testing.T) {
	c := &Conn{ID: 1}
	if got := c.Principal(); got != Anonymous || got.String() != "User:ANONYMOUS" {
		t.Fatalf("principal before authentication = %v, want User:ANONYMOUS", got)
	}
	c.SetPrincipal(Principal{Type: "User", Name: "alice"})
	if got := c.Principal().String(); got != "User:alice" {
		t.Fatalf("principal after authentication = %q, want User:alice", got)
	}
}
