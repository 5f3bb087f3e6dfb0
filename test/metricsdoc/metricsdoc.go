// Package metricsdoc reads the metrics table of docs/operations.md: for each series its labels
// and, where the label column lists them, the values a label can take. The table is the one
// place both the server's tests (which check it against the registered collectors) and the
// deploy checks (which check the alert rules and dashboard against it) read.
package metricsdoc

import (
	"fmt"
	"os"
	"strings"
)

// Label is one label of a series. Values lists the values the label column of the docs
// enumerates, in parentheses after the label's name; nil means the set is open (an API name,
// a shard number, a broker).
type Label struct {
	Name   string
	Values []string
}

// Series is one row of the table.
type Series struct {
	Name   string
	Type   string
	Labels []Label
}

// Label returns the series' label with that name.
func (s Series) Label(name string) (Label, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l, true
		}
	}
	return Label{}, false
}

// LabelNames returns the names of the series' labels in table order.
func (s Series) LabelNames() []string {
	names := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		names[i] = l.Name
	}
	return names
}

// Read parses the metrics table of the operations page at path, keyed by series name.
func Read(path string) (map[string]Series, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}

// Parse reads every table row whose first cell is a `coordinatord_` series.
func Parse(doc string) (map[string]Series, error) {
	series := map[string]Series{}
	for i, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `coordinatord_") {
			continue
		}
		// The meaning may hold a |; the cells before it do not.
		cells := strings.SplitN(line, "|", 5)
		if len(cells) < 5 {
			return nil, fmt.Errorf("line %d: a metrics row needs series, type, labels and meaning", i+1)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		labels, err := parseLabels(cells[3])
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %v", i+1, name, err)
		}
		if _, dup := series[name]; dup {
			return nil, fmt.Errorf("line %d: %s has two rows", i+1, name)
		}
		series[name] = Series{Name: name, Type: strings.TrimSpace(cells[2]), Labels: labels}
	}
	return series, nil
}

// parseLabels reads a label cell: `name` for an open label, `name` (`v1`, `v2`: what v2 means)
// for a closed one. A backticked word outside parentheses is a label, inside them a value of
// the label before; the prose around them is for the reader.
func parseLabels(cell string) ([]Label, error) {
	var labels []Label
	depth := 0
	for i := 0; i < len(cell); i++ {
		switch cell[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", cell)
			}
		case '`':
			end := strings.IndexByte(cell[i+1:], '`')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ` in %q", cell)
			}
			word := cell[i+1 : i+1+end]
			i += end + 1
			switch {
			case depth == 0:
				labels = append(labels, Label{Name: word})
			case len(labels) == 0:
				return nil, fmt.Errorf("value %q before any label in %q", word, cell)
			default:
				l := &labels[len(labels)-1]
				l.Values = append(l.Values, word)
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", cell)
	}
	return labels, nil
}
