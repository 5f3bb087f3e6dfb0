package metricsdoc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A closed label lists its values in parentheses, with prose around them; an open one does not;
// a row with no labels has none.
func TestParseReadsLabelsAndTheirValues(t *testing.T) {
	doc := "| series | type | labels | meaning |\n| --- | --- | --- | --- |\n" +
		"| `coordinatord_a_total` | counter | `api`, `result` (`ok`, `failed`: it did not (see below), `aborted`) | x \\| y |\n" +
		"| `coordinatord_b` | gauge | | z |\n"
	series, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	a := series["coordinatord_a_total"]
	if !slices.Equal(a.LabelNames(), []string{"api", "result"}) || a.Type != "counter" {
		t.Fatalf("coordinatord_a_total: %+v", a)
	}
	if api, _ := a.Label("api"); api.Values != nil {
		t.Errorf("api is open, got values %v", api.Values)
	}
	if result, _ := a.Label("result"); !slices.Equal(result.Values, []string{"ok", "failed", "aborted"}) {
		t.Errorf("result values %v", result.Values)
	}
	if b, ok := series["coordinatord_b"]; !ok || len(b.Labels) != 0 {
		t.Errorf("coordinatord_b: %+v %v", b, ok)
	}
	if _, err := Parse("| `coordinatord_c` | gauge | `kind` (`x` |\n"); err == nil {
		t.Error("an unclosed parenthesis passed")
	}
}

// The real page parses, and its closed labels are the ones deploy/ filters on.
func TestOperationsPageParses(t *testing.T) {
	series, err := Read("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(series) < 40 {
		t.Fatalf("only %d series", len(series))
	}
	loads, _ := series["coordinatord_shard_loads_total"].Label("result")
	if !slices.Equal(loads.Values, []string{"ok", "failed", "aborted"}) {
		t.Errorf("coordinatord_shard_loads_total result values %v", loads.Values)
	}
}

func TestConstValuesReadsOneTypesStringConstants(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\ntype reason string\n\nconst (\n\tA reason = \"a b\"\n\tB        = \"untyped\"\n\tC reason = `c`\n)\n\nconst D string = \"d\"\n"
	os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nconst T reason = \"test\"\n"), 0o644)
	got, err := ConstValues(dir, "reason")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a b", "c"}) {
		t.Fatalf("values %q, want the two typed constants outside tests", got)
	}
}
