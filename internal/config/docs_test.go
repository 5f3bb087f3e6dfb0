package config

import (
	"os"
	"strings"
	"testing"
)

// The operator page must document every key with its default, so it cannot drift from the code.
func TestOperationsDocListsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Entries() {
		def := e.Value
		if def == "" {
			def = "(empty)"
		}
		if !strings.Contains(doc, "| `"+e.Key+"` | `"+def+"` |") {
			t.Errorf("docs/operations.md lacks a row for %s with default %s", e.Key, def)
		}
	}
}
