package conformance

// An API table lists, for every API key either server advertises, the version range Apache
// Kafka advertises and the one coordinatord advertises. ApiVersions answers are checked
// against it (each server against its own column), so both the fact that coordinatord serves
// fewer APIs than Kafka and every version gap are written down, each row that differs with
// the id of its explanation in docs/conformance.md. Without the reference broker the
// coordinatord column is still checked.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// APIRow is one line of an API table. A nil range means "not advertised".
type APIRow struct {
	Line  int
	Key   int16
	Name  string
	Kafka *[2]int16
	Coord *[2]int16
	Tag   string
	Why   string
}

// APITable is a parsed table file.
type APITable struct {
	File string
	Rows map[int16]*APIRow
}

// LoadAPITable parses a table file: "key name kafka coordinatord [tag] why", ranges as
// "min-max" or "-" when not advertised.
func LoadAPITable(path string) (*APITable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &APITable{File: filepath.Base(path), Rows: map[int16]*APIRow{}}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 4 {
			return nil, fmt.Errorf("%s:%d: want: key name kafka-range coordinatord-range [tag] why", t.File, n)
		}
		k, err := strconv.ParseInt(fs[0], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: key: %w", t.File, n, err)
		}
		row := &APIRow{Line: n, Key: int16(k), Name: fs[1]}
		if row.Kafka, err = parseRange(fs[2]); err != nil {
			return nil, fmt.Errorf("%s:%d: kafka column: %w", t.File, n, err)
		}
		if row.Coord, err = parseRange(fs[3]); err != nil {
			return nil, fmt.Errorf("%s:%d: coordinatord column: %w", t.File, n, err)
		}
		if len(fs) > 4 {
			m := tagPattern.FindStringSubmatch(fs[4])
			if m == nil {
				return nil, fmt.Errorf("%s:%d: fifth column must be a [tag], got %q", t.File, n, fs[4])
			}
			row.Tag = m[1]
			row.Why = strings.Join(fs[5:], " ")
		}
		differs := rangeText(row.Kafka) != rangeText(row.Coord)
		switch {
		case differs && row.Tag == "":
			return nil, fmt.Errorf("%s:%d: %s differs (kafka %s, coordinatord %s) and needs a [tag] explained in docs/conformance.md", t.File, n, row.Name, rangeText(row.Kafka), rangeText(row.Coord))
		case !differs && row.Tag != "":
			return nil, fmt.Errorf("%s:%d: %s does not differ; drop the tag", t.File, n, row.Name)
		case row.Kafka == nil && row.Coord == nil:
			return nil, fmt.Errorf("%s:%d: a row must name a range for at least one server", t.File, n)
		}
		if _, dup := t.Rows[row.Key]; dup {
			return nil, fmt.Errorf("%s:%d: key %d listed twice", t.File, n, row.Key)
		}
		t.Rows[row.Key] = row
	}
	return t, sc.Err()
}

func parseRange(s string) (*[2]int16, error) {
	if s == "-" {
		return nil, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err := strconv.ParseInt(lo, 10, 16)
	if err != nil {
		return nil, err
	}
	b, err := strconv.ParseInt(hi, 10, 16)
	if err != nil || b < a {
		return nil, fmt.Errorf("bad range %q", s)
	}
	return &[2]int16{int16(a), int16(b)}, nil
}

func rangeText(r *[2]int16) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%d-%d", r[0], r[1])
}

func (t *APITable) column(target string, row *APIRow) *[2]int16 {
	if target == Kafka {
		return row.Kafka
	}
	return row.Coord
}

// Check compares the ApiKeys of one ApiVersions response tree with the target's column and
// returns one line per key that does not match.
func (t *APITable) Check(target string, resp any) []string {
	got := map[int16][2]int16{}
	keys, _ := lookup(resp, "ApiKeys")
	arr, _ := keys.([]any)
	for _, e := range arr {
		o, ok := e.(*Obj)
		if !ok {
			continue
		}
		k, _ := o.Vals["ApiKey"].(int64)
		lo, _ := o.Vals["MinVersion"].(int64)
		hi, _ := o.Vals["MaxVersion"].(int64)
		got[int16(k)] = [2]int16{int16(lo), int16(hi)}
	}
	var out []string
	all := map[int16]bool{}
	for k := range got {
		all[k] = true
	}
	for k := range t.Rows {
		all[k] = true
	}
	for _, k := range sortedKeys(all) {
		var want *[2]int16
		name := apiName(k)
		if row := t.Rows[k]; row != nil {
			want = t.column(target, row)
			name = row.Name
		}
		var have *[2]int16
		if g, ok := got[k]; ok {
			have = &g
		}
		if rangeText(want) != rangeText(have) {
			out = append(out, fmt.Sprintf("%d %s: %s advertises %s, the table says %s", k, name, target, rangeText(have), rangeText(want)))
		}
	}
	return out
}

// Differences renders the rows where the two servers differ, for the test log.
func (t *APITable) Differences() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "    key\tapi\tkafka 4.4\tcoordinatord\tid\n")
	keys := map[int16]bool{}
	for k := range t.Rows {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		row := t.Rows[k]
		if row.Tag == "" {
			continue
		}
		fmt.Fprintf(w, "    %d\t%s\t%s\t%s\t%s\n", row.Key, row.Name, rangeText(row.Kafka), rangeText(row.Coord), row.Tag)
	}
	w.Flush()
	return strings.TrimRight(b.String(), "\n")
}

// Tags lists the difference ids the table refers to, with their lines.
func (t *APITable) Tags() map[string][]int {
	out := map[string][]int{}
	for _, r := range t.Rows {
		if r.Tag != "" {
			out[r.Tag] = append(out[r.Tag], r.Line)
		}
	}
	return out
}

func sortedKeys(m map[int16]bool) []int16 {
	out := make([]int16, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
