package handlers

import (
	"testing"
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
