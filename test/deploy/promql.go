package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coordinatord/coordinatord/test/metricsdoc"
)

// This file holds as much PromQL as the label checks need: a tokenizer and a parser for the
// expressions deploy/ writes (selectors, aggregations with by/without, function calls, binary
// operators with on/ignoring/group_*, ranges, subqueries, offset, @), and a pass that follows
// which labels each subexpression's series carry. promtool has already checked the syntax;
// Prometheus' own parser is not in this module's graph and would bring in hundreds of modules.

type tokenKind int

const (
	tokIdent tokenKind = iota
	tokNumber
	tokString
	tokPunct
	tokEOF
)

type token struct {
	kind tokenKind
	text string // a string token's value, unquoted
}

func tokenize(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(expr) && (isIdentStart(expr[j]) || isDigit(expr[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, expr[i:j]})
			i = j
		case isDigit(c) || c == '.':
			j := i + 1
			for j < len(expr) && (isDigit(expr[j]) || isIdentStart(expr[j]) || expr[j] == '.') && expr[j] != ':' {
				j++
			}
			toks = append(toks, token{tokNumber, expr[i:j]})
			i = j
		case c == '"' || c == '\'' || c == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
				}
				b.WriteByte(expr[j])
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, token{tokString, b.String()})
			i = j + 1
		default:
			if i+1 < len(expr) {
				if two := expr[i : i+2]; two == "==" || two == "!=" || two == "=~" || two == "!~" || two == ">=" || two == "<=" {
					toks = append(toks, token{tokPunct, two})
					i += 2
					continue
				}
			}
			if !strings.ContainsRune("=<>+-*/%^(){}[],:@", rune(c)) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, token{tokPunct, string(c)})
			i++
		}
	}
	return append(toks, token{kind: tokEOF}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

type nodeKind int

const (
	nodeSelector nodeKind = iota
	nodeAggregate
	nodeCall
	nodeBinary
	nodeNumber
	nodeString
)

type matcher struct{ name, op, value string }

type node struct {
	kind     nodeKind
	name     string // metric, aggregation operator, function or binary operator
	matchers []matcher
	str      string // a string literal's value

	grouping []string // by/without labels, or on/ignoring labels of a binary operator
	without  bool     // without, or ignoring
	hasGroup bool     // a by/without or on/ignoring clause was given
	include  []string // group_left/group_right labels
	joinSide string   // "group_left", "group_right" or ""

	args []*node // call and aggregation arguments; lhs and rhs of a binary operator
}

type parser struct {
	toks []token
	pos  int
}

func parsePromQL(expr string) (*node, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tokEOF {
		return nil, fmt.Errorf("unexpected %q after the expression", p.peek().text)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token { t := p.toks[p.pos]; p.pos++; return t }

func (p *parser) expect(text string) error {
	if t := p.next(); t.text != text || t.kind == tokString {
		return fmt.Errorf("expected %q, got %q", text, t.text)
	}
	return nil
}

var precedence = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<": 3, ">": 3, "<=": 3, ">=": 3,
	"+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6,
}

func (p *parser) binaryOp() (string, int) {
	t := p.peek()
	if t.kind == tokString {
		return "", 0
	}
	prec, ok := precedence[t.text]
	if !ok {
		return "", 0
	}
	return t.text, prec
}

func (p *parser) expr(minPrec int) (*node, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, prec := p.binaryOp()
		if prec == 0 || prec < minPrec {
			return lhs, nil
		}
		p.next()
		bin := &node{kind: nodeBinary, name: op}
		if p.peek().text == "bool" {
			p.next()
		}
		if t := p.peek().text; t == "on" || t == "ignoring" {
			p.next()
			bin.hasGroup, bin.without = true, t == "ignoring"
			if bin.grouping, err = p.labelList(); err != nil {
				return nil, err
			}
		}
		if t := p.peek().text; t == "group_left" || t == "group_right" {
			p.next()
			bin.joinSide = t
			if p.peek().text == "(" {
				if bin.include, err = p.labelList(); err != nil {
					return nil, err
				}
			}
		}
		next := prec + 1
		if op == "^" {
			next = prec // right-associative
		}
		rhs, err := p.expr(next)
		if err != nil {
			return nil, err
		}
		bin.args = []*node{lhs, rhs}
		lhs = bin
	}
}

func (p *parser) unary() (*node, error) {
	if t := p.peek(); t.kind == tokPunct && (t.text == "-" || t.text == "+") {
		p.next()
		return p.unary()
	}
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	return n, p.postfix()
}

// postfix skips what changes the time a series is read at, not its labels: [range],
// [range:step], offset and @.
func (p *parser) postfix() error {
	for {
		switch t := p.peek(); {
		case t.kind == tokPunct && t.text == "[":
			for p.peek().text != "]" || p.peek().kind == tokString {
				if p.next().kind == tokEOF {
					return fmt.Errorf("unclosed [")
				}
			}
			p.next()
		case t.kind == tokIdent && t.text == "offset":
			p.next()
			if p.peek().text == "-" {
				p.next()
			}
			p.next()
		case t.kind == tokPunct && t.text == "@":
			p.next()
			p.next()
			if p.peek().text == "(" {
				p.next()
				p.next()
			}
		default:
			return nil
		}
	}
}

var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

func (p *parser) primary() (*node, error) {
	t := p.next()
	switch {
	case t.kind == tokNumber:
		return &node{kind: nodeNumber}, nil
	case t.kind == tokString:
		return &node{kind: nodeString, str: t.text}, nil
	case t.kind == tokPunct && t.text == "(":
		n, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		return n, p.expect(")")
	case t.kind == tokPunct && t.text == "{":
		n := &node{kind: nodeSelector}
		return n, p.matchers(n)
	case t.kind == tokIdent && (t.text == "Inf" || t.text == "NaN" || t.text == "inf" || t.text == "nan"):
		return &node{kind: nodeNumber}, nil
	case t.kind == tokIdent && aggregations[t.text] && (p.peek().text == "(" || p.peek().text == "by" || p.peek().text == "without"):
		n := &node{kind: nodeAggregate, name: t.text}
		if err := p.grouping(n); err != nil {
			return nil, err
		}
		args, err := p.callArgs()
		if err != nil {
			return nil, err
		}
		n.args = args
		return n, p.grouping(n)
	case t.kind == tokIdent && p.peek().text == "(":
		args, err := p.callArgs()
		return &node{kind: nodeCall, name: t.text, args: args}, err
	case t.kind == tokIdent:
		n := &node{kind: nodeSelector, name: t.text}
		if p.peek().text == "{" {
			p.next()
			return n, p.matchers(n)
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected %q", t.text)
}

func (p *parser) grouping(n *node) error {
	t := p.peek().text
	if t != "by" && t != "without" {
		return nil
	}
	p.next()
	labels, err := p.labelList()
	n.grouping, n.without, n.hasGroup = labels, t == "without", true
	return err
}

func (p *parser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var labels []string
	for p.peek().text != ")" {
		t := p.next()
		if t.kind != tokIdent && t.kind != tokString {
			return nil, fmt.Errorf("expected a label name, got %q", t.text)
		}
		labels = append(labels, t.text)
		if p.peek().text == "," {
			p.next()
		}
	}
	p.next()
	return labels, nil
}

func (p *parser) callArgs() ([]*node, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var args []*node
	for p.peek().text != ")" {
		a, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.peek().text == "," {
			p.next()
		} else if p.peek().text != ")" {
			return nil, fmt.Errorf("expected , or ) in arguments, got %q", p.peek().text)
		}
	}
	p.next()
	return args, nil
}

func (p *parser) matchers(n *node) error {
	for p.peek().text != "}" {
		name := p.next()
		if name.kind != tokIdent && name.kind != tokString {
			return fmt.Errorf("expected a label name in {}, got %q", name.text)
		}
		op := p.next()
		value := p.next()
		if op.kind != tokPunct || value.kind != tokString {
			return fmt.Errorf("bad matcher %s%s%s", name.text, op.text, value.text)
		}
		if name.kind == tokString { // {"metric_name", ...}: the name as a bare string
			n.name = name.text
			p.pos -= 2
			continue
		}
		n.matchers = append(n.matchers, matcher{name.text, op.text, value.text})
		if p.peek().text == "," {
			p.next()
		}
	}
	p.next()
	return nil
}

// labelSet is what a subexpression's series are known to carry. any: not known (a series
// coordinatord does not define); scalar: a number, no series.
type labelSet struct {
	any, scalar bool
	names       map[string]bool
	from        []string // the series they come from, for messages
}

func (s labelSet) has(name string) bool { return s.any || s.scalar || s.names[name] }

func (s labelSet) describe() string {
	from := strings.Join(slices.Compact(slices.Sorted(slices.Values(s.from))), ", ")
	if from == "" {
		from = "the expression"
	}
	return fmt.Sprintf("%s (labels: %s)", from, strings.Join(slices.Sorted(maps.Keys(s.names)), ", "))
}

func newSet(from []string, names ...string) labelSet {
	s := labelSet{names: map[string]bool{}, from: from}
	for _, n := range names {
		s.names[n] = true
	}
	return s
}

func (s labelSet) with(names ...string) labelSet {
	out := newSet(s.from, names...)
	out.any = s.any
	for n := range s.names {
		out.names[n] = true
	}
	return out
}

func (s labelSet) without(names ...string) labelSet {
	out := s.with()
	for _, n := range names {
		delete(out.names, n)
	}
	return out
}

// labelChecker holds deploy/ to the metrics table: every label a selector, a by/without, an
// on/ignoring or a label function names exists on the series it is applied to, and every value
// compared with = or != is one the table lists for a closed label.
type labelChecker struct {
	series map[string]metricsdoc.Series
	// Labels Prometheus attaches to every scraped series, whatever the target serves.
	targetLabels []string
	problems     []string
}

func (c *labelChecker) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// seriesOf returns the table row for a name as queried: a histogram's _bucket (with le),
// _sum and _count are its own row's.
func (c *labelChecker) seriesOf(name string) (metricsdoc.Series, []string, bool) {
	if s, ok := c.series[name]; ok {
		return s, nil, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if s, ok := c.series[base]; ok && s.Type == "histogram" {
				if suffix == "_bucket" {
					return s, []string{"le"}, true
				}
				return s, nil, true
			}
		}
	}
	return metricsdoc.Series{}, nil, false
}

func (c *labelChecker) labels(n *node) labelSet {
	switch n.kind {
	case nodeNumber, nodeString:
		return labelSet{scalar: true}
	case nodeSelector:
		return c.selector(n)
	case nodeAggregate:
		return c.aggregate(n)
	case nodeCall:
		return c.call(n)
	case nodeBinary:
		return c.binary(n)
	}
	return labelSet{any: true}
}

func (c *labelChecker) selector(n *node) labelSet {
	s, extra, ok := c.seriesOf(n.name)
	if !ok {
		// Not coordinatord's (TestDeployNamesOnlyServedSeries reports an unknown coordinatord_ name).
		return labelSet{any: true}
	}
	set := newSet([]string{n.name}, append(append(s.LabelNames(), extra...), c.targetLabels...)...)
	for _, m := range n.matchers {
		if m.name == "__name__" {
			continue
		}
		if !set.has(m.name) {
			c.problem("%s{%s%s%q}: label %q is not a label of %s", n.name, m.name, m.op, m.value, m.name, set.describe())
			continue
		}
		l, ok := s.Label(m.name)
		if !ok || l.Values == nil || m.op != "=" && m.op != "!=" || m.op == "!=" && m.value == "" {
			continue // a target label, an open one, a regex, or "has the label"
		}
		if !slices.Contains(l.Values, m.value) {
			c.problem("%s{%s%s%q}: %q is not a value coordinatord gives %s (docs/operations.md lists: %s)",
				n.name, m.name, m.op, m.value, m.value, m.name, strings.Join(l.Values, ", "))
		}
	}
	return set
}

func (c *labelChecker) requireLabels(where string, in labelSet, names []string) {
	for _, name := range names {
		if !in.has(name) {
			c.problem("%s: label %q is not on %s", where, name, in.describe())
		}
	}
}

func (c *labelChecker) aggregate(n *node) labelSet {
	if len(n.args) == 0 {
		return labelSet{any: true}
	}
	if len(n.args) > 1 {
		c.labels(n.args[0]) // topk's k, quantile's φ, count_values' label: checked for their own selectors
	}
	in := c.labels(n.args[len(n.args)-1])
	clause := "by"
	if n.without {
		clause = "without"
	}
	c.requireLabels(fmt.Sprintf("%s %s (%s)", n.name, clause, strings.Join(n.grouping, ", ")), in, n.grouping)
	switch {
	case n.name == "topk" || n.name == "bottomk" || n.name == "limitk" || n.name == "limit_ratio":
		return in
	case n.without:
		return in.without(append(n.grouping, "__name__")...)
	}
	out := newSet(in.from, n.grouping...)
	if n.name == "count_values" && n.args[0].kind == nodeString {
		out.names[n.args[0].str] = true
	}
	return out
}

func (c *labelChecker) call(n *node) labelSet {
	sets := make([]labelSet, len(n.args))
	for i, a := range n.args {
		sets[i] = c.labels(a)
	}
	str := func(i int) string {
		if i < len(n.args) && n.args[i].kind == nodeString {
			return n.args[i].str
		}
		return ""
	}
	switch n.name {
	case "label_replace": // (v, dst, replacement, src, regex)
		if src := str(3); src != "" {
			c.requireLabels(fmt.Sprintf("label_replace(..., %q)", src), sets[0], []string{src})
		}
		return sets[0].with(str(1))
	case "label_join": // (v, dst, separator, src...)
		for i := 3; i < len(n.args); i++ {
			c.requireLabels(fmt.Sprintf("label_join(..., %q)", str(i)), sets[0], []string{str(i)})
		}
		return sets[0].with(str(1))
	case "sort_by_label", "sort_by_label_desc":
		for i := 1; i < len(n.args); i++ {
			c.requireLabels(fmt.Sprintf("%s(..., %q)", n.name, str(i)), sets[0], []string{str(i)})
		}
		return sets[0]
	case "histogram_quantile", "histogram_fraction":
		last := sets[len(sets)-1]
		c.requireLabels(n.name, last, []string{"le"})
		return last.without("le")
	case "vector", "time", "scalar", "pi":
		return labelSet{scalar: n.name != "vector", names: map[string]bool{}}
	case "absent", "absent_over_time":
		return labelSet{any: true}
	}
	for _, s := range sets {
		if !s.scalar {
			return s
		}
	}
	return labelSet{scalar: true}
}

func (c *labelChecker) binary(n *node) labelSet {
	l, r := c.labels(n.args[0]), c.labels(n.args[1])
	if l.scalar {
		return r
	}
	if r.scalar {
		return l
	}
	if n.hasGroup {
		clause := "on"
		if n.without {
			clause = "ignoring"
		}
		where := fmt.Sprintf("%s %s (%s)", n.name, clause, strings.Join(n.grouping, ", "))
		c.requireLabels(where, l, n.grouping)
		c.requireLabels(where, r, n.grouping)
	}
	switch {
	case n.joinSide == "group_left":
		c.requireLabels(fmt.Sprintf("group_left (%s)", strings.Join(n.include, ", ")), r, n.include)
		return l.with(n.include...)
	case n.joinSide == "group_right":
		c.requireLabels(fmt.Sprintf("group_right (%s)", strings.Join(n.include, ", ")), l, n.include)
		return r.with(n.include...)
	case n.name == "or":
		out := l.with(slices.Collect(maps.Keys(r.names))...)
		out.any = l.any || r.any
		out.from = append(slices.Clone(l.from), r.from...)
		return out
	}
	return l
}

// checkExpr parses expr and returns every label problem in it, and the labels its result has.
func (c *labelChecker) checkExpr(expr string) (labelSet, []string, error) {
	n, err := parsePromQL(expr)
	if err != nil {
		return labelSet{}, nil, err
	}
	c.problems = nil
	out := c.labels(n)
	return out, c.problems, nil
}
