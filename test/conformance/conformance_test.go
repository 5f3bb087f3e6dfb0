package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

const (
	testdata = "testdata"
	docsPath = "../../docs/conformance.md"
)

func TestMain(m *testing.M) {
	code := m.Run()
	srv.stop()
	srvAuthz.stop()
	srvConsumerMaxSize.stop()
	srvSASL.stop()
	os.Exit(code)
}

func loadAll(t *testing.T) ([]*File, map[string]*APITable) {
	t.Helper()
	files, err := LoadDir(testdata)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario files in testdata")
	}
	paths, err := filepath.Glob(filepath.Join(testdata, "*.table"))
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]*APITable{}
	for _, p := range paths {
		tb, err := LoadAPITable(p)
		if err != nil {
			t.Fatal(err)
		}
		tables[tb.File] = tb
	}
	for _, f := range files {
		for _, sc := range f.Scenarios {
			for _, st := range sc.Steps {
				for _, ck := range st.Checks {
					if ck.APIKeys != "" && tables[ck.APIKeys] == nil {
						t.Fatalf("%s:%d: no table %s in %s", f.Name, ck.Line, ck.APIKeys, testdata)
					}
				}
			}
		}
	}
	return files, tables
}

// TestConformance runs every scenario against coordinatord and, when enabled, against the
// reference Kafka broker, then diffs them.
func TestConformance(t *testing.T) {
	files, tables := loadAll(t)
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	if srv.Kafka == nil {
		t.Log(srv.kafkaSkip)
	}
	shared := map[string]string{"run": runID()}
	for _, f := range files {
		t.Run(f.Name, func(t *testing.T) {
			pair := pairFor(f)
			if pair != &srv {
				if srv.Coord.Gateway && (pair == &srvAuthz || pair == &srvSASL) {
					t.Skip("not run: the authorizer's pairs run coordinatord standalone (gateway mode relays SASL and takes the upstream's ACLs: test/e2e)")
				}
				if err := pair.start(); err != nil {
					t.Fatal(err)
				}
				if pair.Kafka == nil {
					t.Log(pair.kafkaSkip)
				}
			}
			for _, sc := range f.Scenarios {
				t.Run(sc.Name, func(t *testing.T) { runScenario(t, pair, sc, shared, tables) })
			}
		})
	}
	if srv.Kafka != nil && !t.Failed() {
		for _, name := range sortedNames(tables) {
			if strings.HasPrefix(name, "gateway-") != srv.Coord.Gateway {
				continue // the other mode's table
			}
			t.Logf("%s: APIs where coordinatord and Kafka 4.4 differ (each explained in docs/conformance.md):\n%s", name, tables[name].Differences())
		}
	}
}

func runScenario(t *testing.T, srv *servers, sc *Scenario, shared map[string]string, tables map[string]*APITable) {
	targets := []*Target{srv.Coord}
	if srv.Kafka != nil {
		targets = append(targets, srv.Kafka)
	}
	if sc.Mode != "" && sc.Mode != srv.Coord.Mode() {
		t.Skipf("not run: for coordinatord in %s mode (this run: %s)", sc.Mode, srv.Coord.Mode())
	}
	var eligible []*Target
	var skipped []string
	for _, tg := range targets {
		if miss := tg.missing(sc.Requires); len(miss) > 0 {
			skipped = append(skipped, fmt.Sprintf("%s does not advertise %s", tg.Name, strings.Join(miss, ", ")))
			continue
		}
		eligible = append(eligible, tg)
	}
	if len(eligible) == 0 {
		t.Skipf("not run: %s", strings.Join(skipped, "; "))
	}
	for _, s := range skipped {
		t.Logf("diffs not checked: %s (ran against %s only)", s, eligible[0].Name)
	}

	mark := srv.coord.logMark()
	runs := make([]*Run, len(eligible))
	var wg sync.WaitGroup
	for i, tg := range eligible {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = RunScenario(sc, tg, shared, tables)
		}()
	}
	wg.Wait()

	// check-assignment: both servers' assignments, side by side in the log.
	for _, r := range runs {
		for _, n := range r.Notes() {
			t.Logf("[%s] %s", r.Target.Name, n)
		}
	}
	failed := false
	for _, r := range runs {
		for _, f := range r.Failures {
			t.Errorf("[%s] %s", r.Target.Name, f)
			failed = true
		}
	}
	if len(runs) == 2 {
		for _, d := range Compare(sc, runs[0], runs[1]) {
			t.Error(d)
			failed = true
		}
		// Exceptions explain standalone coordinatord; in gateway mode many of them are answered
		// by the upstream and so not hit, which says nothing about standalone behaviour.
		if !failed && !srv.Coord.Gateway {
			for _, s := range Stale(sc) {
				t.Error(s)
			}
		}
	}
	if t.Failed() {
		if logs := warnings(srv.coord.logsSince(mark)); len(logs) > 0 {
			t.Logf("coordinatord logged meanwhile:\n  %s", strings.Join(logs, "\n  "))
		}
	}
}

// warnings keeps the log lines above INFO.
func warnings(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, `"level":"info"`) && !strings.Contains(l, `"level":"debug"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestScenarioFilesParse keeps every scenario file and table loadable without any server.
func TestScenarioFilesParse(t *testing.T) {
	files, _ := loadAll(t)
	n := 0
	for _, f := range files {
		n += len(f.Scenarios)
	}
	t.Logf("%d scenario files, %d scenarios", len(files), n)
}

var docRow = regexp.MustCompile("(?m)^\\|\\s*`([a-z0-9][a-z0-9-]*)`\\s*\\|")

const docHeading = "## Differences the conformance harness accepts"

// docSection returns the text from the heading to the next heading of the same level.
func docSection(doc, heading string) (string, bool) {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	rest := doc[i+1+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// TestDifferencesAreDocumented: every difference id a scenario or table uses has a row in
// docs/conformance.md, and every such row is still used.
func TestDifferencesAreDocumented(t *testing.T) {
	files, tables := loadAll(t)
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	// Only the harness's section counts: other tables of the page may start rows with code too.
	section, ok := docSection(string(doc), docHeading)
	if !ok {
		t.Fatalf("docs/conformance.md has no section %q", docHeading)
	}
	documented := map[string]bool{}
	for _, m := range docRow.FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	used := map[string]string{}
	for _, f := range files {
		for tag, lines := range f.Tags() {
			used[tag] = fmt.Sprintf("%s:%d", f.Name, lines[0])
		}
	}
	for _, tb := range tables {
		for tag, lines := range tb.Tags() {
			used[tag] = fmt.Sprintf("%s:%d", tb.File, lines[0])
		}
	}
	for _, tag := range sortedNames(used) {
		if !documented[tag] {
			t.Errorf("%s: difference [%s] has no row \"| `%s` | ...\" in docs/conformance.md", used[tag], tag, tag)
		}
	}
	for _, tag := range sortedNames(documented) {
		if _, ok := used[tag]; !ok {
			t.Errorf("docs/conformance.md explains difference `%s`, which no scenario or table uses any more; remove the row", tag)
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestAPITableDraft prints testdata/apiversions.table as it would be for the servers running
// now, keeping the ids and reasons of rows that are already there. Maintainers use it when
// coordinatord starts serving an API or the reference broker changes version:
//
//	CONFORMANCE=1 CONFORMANCE_TABLE_DRAFT=1 go test ./test/conformance -run APITableDraft -v
func TestAPITableDraft(t *testing.T) {
	if os.Getenv("CONFORMANCE_TABLE_DRAFT") == "" {
		t.Skip("set CONFORMANCE_TABLE_DRAFT=1 (with CONFORMANCE=1) to print a draft of apiversions.table")
	}
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	if srv.Kafka == nil {
		t.Fatal(srv.kafkaSkip)
	}
	old, err := LoadAPITable(filepath.Join(testdata, srv.Coord.table("apiversions.table")))
	if err != nil {
		old = &APITable{Rows: map[int16]*APIRow{}}
	}
	keys := map[int16]bool{}
	for k := range srv.Kafka.APIs {
		keys[k] = true
	}
	for k := range srv.Coord.APIs {
		keys[k] = true
	}
	var b strings.Builder
	for _, k := range sortedKeys(keys) {
		col := func(m map[int16][2]int16) string {
			if r, ok := m[k]; ok {
				return rangeText(&r)
			}
			return "-"
		}
		kc, cc := col(srv.Kafka.APIs), col(srv.Coord.APIs)
		line := fmt.Sprintf("%-4d %-42s %-7s %-7s", k, apiName(k), kc, cc)
		if kc != cc {
			tag, why := "[TODO]", ""
			if row := old.Rows[k]; row != nil && row.Tag != "" {
				tag, why = "["+row.Tag+"]", row.Why
			}
			line += " " + tag + " " + why
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	t.Logf("draft:\n%s", b.String())
}
