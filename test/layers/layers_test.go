// Package layers enforces the import rules of docs/architecture.md (Packages): imports point down the
// package table, and nothing imports cmd/ or internal/handlers; and that every handler decides
// authorization before it touches state (authorize_test.go). `make lint` runs it.
package layers

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/coordinatord/coordinatord/"

// allowed lists, per package prefix, the project packages it may import. One addition to the
// table of docs/architecture.md: state machines may import internal/state/log, because the record
// type every Replay takes (log.Record) lives there. A package matches
// the longest prefix listed; test/ and cmd/ may import anything.
var allowed = map[string][]string{
	"internal/config":             {},
	"internal/wire":               {},
	"internal/wire/wiretest":      {"internal/wire"},
	"internal/security":           {},
	"pkg/topologyplugin":          {},
	"pkg/kerrclass":               {},
	"internal/acl":                {},
	"internal/plugin":             {"pkg/topologyplugin"},
	"internal/state/records":      {},
	"internal/state/log":          {"internal/state/records"},
	"internal/state/log/segment":  {"internal/state/log", "internal/state/records"},
	"internal/state/log/kafkalog": {"internal/state/log", "internal/state/records", "pkg/kerrclass"},
	"internal/state/log/memlog":   {"internal/state/log", "internal/state/records"},
	"internal/state/runtime":      {"internal/state/log", "internal/state/records"},
	"internal/state/meta":         {"internal/state/log", "internal/state/records", "internal/state/runtime", "internal/acl"},
	"internal/offsets":            {"internal/state/log", "internal/state/records", "internal/state/runtime"},
	"internal/state/classic":      {"internal/state/log", "internal/state/records", "internal/state/runtime", "internal/state/meta", "internal/offsets"},
	"internal/state/assigntiming": {},
	"internal/state/streams":      {"internal/state/log", "internal/state/records", "internal/state/runtime", "internal/state/meta", "internal/offsets", "internal/state/assigntiming"},
	"internal/state/consumer":     {"internal/state/log", "internal/state/records", "internal/state/runtime", "internal/state/meta", "internal/offsets", "internal/state/assigntiming"},
	"internal/state/shard":        {"internal/state", "internal/offsets"},
	"internal/upstream":           {"pkg/kerrclass"},
	"internal/gateway":            {"internal/wire", "internal/upstream", "internal/acl", "pkg/kerrclass"},
	"internal/membership":         {},
	"internal/gcpace":             {},
	"internal/console":            {"internal/plugin", "internal/state", "internal/offsets", "pkg/topologyplugin"},
	"internal/handlers":           {"internal/wire", "internal/security", "internal/acl", "internal/plugin", "internal/state", "internal/offsets", "pkg/kerrclass", "pkg/topologyplugin"},
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		self := strings.TrimPrefix(p.ImportPath, module)
		if strings.HasPrefix(self, "cmd/") || strings.HasPrefix(self, "test/") {
			continue
		}
		rule, ok := ruleFor(self)
		if !ok {
			t.Errorf("%s is not in the package table of docs/architecture.md; add it to the table and to this test", self)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if strings.HasPrefix(dep, self+"/") || dep == self {
				continue // a package's own subpackages
			}
			if !permitted(dep, rule) {
				t.Errorf("%s imports %s, which the package table of docs/architecture.md does not allow", self, dep)
			}
		}
	}
}

func ruleFor(self string) ([]string, bool) {
	best := ""
	for prefix := range allowed {
		if (self == prefix || strings.HasPrefix(self, prefix+"/")) && len(prefix) > len(best) {
			best = prefix
		}
	}
	r, ok := allowed[best]
	return r, ok && best != ""
}

func permitted(dep string, rule []string) bool {
	if strings.HasPrefix(dep, "cmd/") || strings.HasPrefix(dep, "internal/handlers") {
		return false
	}
	for _, a := range rule {
		if dep == a || strings.HasPrefix(dep, a+"/") {
			return true
		}
	}
	return false
}

// The server binary links only what serving needs: the load tool's chart and fake-cluster
// libraries and the second Kafka client the tests use must never reach it, or every deployment
// carries (and is scanned for) code it never runs.
func TestServerBinaryLinksNoToolOrTestLibraries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/coordinatord").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"gonum.org/", "github.com/twmb/franz-go/pkg/kfake", "github.com/IBM/sarama", "codeberg.org/go-"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("cmd/coordinatord links %s (prefix %s), which only tools or tests need", dep, f)
			}
		}
	}
}
