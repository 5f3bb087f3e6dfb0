package conformance

// The scenario file format (README.md in this directory has the full description):
//
//	scenario <name>
//	requires <Api>...
//	call <conn> <Api> v<N>[-<M>] [corr=N] [client=S|null] [timeout=D]
//	  <request JSON>
//	expect[@target]
//	  <JSON subset of the response>
//	capture <var> <path>
//	diff [apikeys=<file>]
//	  <path> [<tag>] <why>
//
// Directives start at column 0; indented lines are the body of the directive above them; lines
// whose first non-blank character is # are comments.

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Targets are the servers a scenario runs against.
const (
	Coordinatord = "coordinatord"
	Kafka        = "kafka"
)

// File is one parsed scenario file.
type File struct {
	Name      string // base name, e.g. metadata.txt
	Scenarios []*Scenario
	// Servers names the pair of servers the file runs against: "" the shared pair, or one of
	// ServerPairs (a file-level "servers <name>" line before the first scenario).
	Servers string
}

// ServerPairs are the names a "servers" line takes.
var ServerPairs = []string{ServersAuthorizer, ServersConsumerMaxSize, ServersSASL}

// ServersAuthorizer is the pair started with StandardAuthorizer and
// allow.everyone.if.no.acl.found=true on both servers: a plaintext client is User:ANONYMOUS,
// allowed everything until a scenario's own ACLs (on its own ${run} names) deny it something.
const ServersAuthorizer = "authorizer"

// ServersConsumerMaxSize is the pair started with group.consumer.max.size=2 on both servers, so
// that a scenario fills a consumer group with two members instead of Kafka's default 2^31-1,
// and group.consumer.assignment.interval.ms=0, so that every join's epoch is computed at once
// and does not depend on how fast the scenario runs. A pair of its own, so the shared pair
// keeps the defaults every other scenario answers with.
const ServersConsumerMaxSize = "consumer-max-size"

// ServersSASL is the pair with StandardAuthorizer, allow.everyone.if.no.acl.found=false,
// super.users=User:ANONYMOUS on the plaintext listener and a SASL_PLAINTEXT listener with
// SCRAM-SHA-256 users (saslUsers): a connection a scenario logs in with `login` is that user's,
// denied whatever no ACL allows it, while a plaintext connection is the super user that creates
// the ACLs.
const ServersSASL = "sasl"

// Scenario is a named script of steps run against every target.
type Scenario struct {
	File     string
	Line     int
	Name     string
	Requires []int16
	// Mode limits the scenario to coordinatord standalone or in gateway mode ("" = both):
	// what a gateway forwards (Metadata, CreateTopics, ApiVersions' upstream part) answers as
	// the upstream does, not as standalone coordinatord.
	Mode  string
	Steps []*Step
}

// Modes of coordinatord under test (the mode directive).
const (
	ModeStandalone = "standalone"
	ModeGateway    = "gateway"
)

// Step is one directive that does something on a connection (or to the scenario's variables).
type Step struct {
	Line int
	Op   string // call send recv frame raw eof close closed quiet sleep set login
	Only string // run on this target only ("" = every target)
	Tag  string // difference id, required with Only

	Conn     string
	Key      int16 // -1 when not given (recv without an API)
	Versions []int16
	Corr     *int32
	Client   *string // header client id; nil with ClientSet = null
	// ClientSet says Client was given explicitly (client=null sets ClientSet with Client nil).
	ClientSet bool
	Flexible  *bool
	JSON      string
	Hex       []byte
	Dur       time.Duration // quiet, sleep
	Timeout   time.Duration
	Until     time.Duration // call: repeat until the expectations hold, for at most this long
	Var       string        // set; login: the user
	Value     string        // set

	Checks []*Check
}

// Check is an assertion on the response of the step it follows.
type Check struct {
	Line    int
	Kind    string // expect capture diff check-assignment
	Only    string
	Tag     string
	JSON    string
	Var     string
	Path    string
	APIKeys string // diff: ApiKeys compared against this table file
	Excepts []*Except
	// Sorts are arrays whose order the protocol leaves open (Kafka answers some from hash
	// sets); both responses are sorted by the named field before they are compared.
	Sorts []*Sort
	// Tasks is check-assignment's topology: subtopology id -> number of tasks.
	Tasks map[string]int
	// Active is check-assignment's active=<n> (-1 when not given).
	Active int
	// Keeps and Within are check-assignment's keeps=<var> and within=<var>: variables holding
	// a task list (captured ActiveTasks) that a heartbeat's ActiveTasks must contain, or must
	// lie within: the sticky assignor's promise that a member losing tasks keeps the rest and
	// a member gaining tasks keeps what it had.
	Keeps, Within string
}

// Sort orders the array at Path by the value of Field.
type Sort struct {
	Path  []string
	Field string
}

// Except is a response path where a diff is allowed to differ, with the id of the row in
// docs/conformance.md that explains why.
type Except struct {
	Line int
	Path []string
	Tag  string
	// Select, when set, drops the elements of the array at Path whose field equals a value
	// from both responses before they are compared ("Topics[Topic=__consumer_offsets]").
	Select *Selector
	// Hit is set when the except covered a real difference during a run; one that never does is
	// stale and fails the run, so the docs do not keep explaining a difference that is gone.
	Hit bool
}

var (
	tagPattern  = regexp.MustCompile(`^\[([a-z0-9][a-z0-9-]*)\]$`)
	namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

type line struct {
	n    int
	text string
	body []bodyLine
}

type bodyLine struct {
	n    int
	text string
}

// LoadDir parses every *.txt scenario file in dir, sorted by name.
func LoadDir(dir string) ([]*File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var files []*File
	for _, p := range paths {
		f, err := ParseFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// ParseFile parses one scenario file.
func ParseFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(filepath.Base(path), string(data))
}

// Parse parses scenario text; name is used in error messages.
func Parse(name, text string) (*File, error) {
	var lines []*line
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		t := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(t)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if t[0] == ' ' || t[0] == '\t' {
			if len(lines) == 0 {
				return nil, fmt.Errorf("%s:%d: indented line with no directive above it", name, n)
			}
			last := lines[len(lines)-1]
			last.body = append(last.body, bodyLine{n, trimmed})
			continue
		}
		lines = append(lines, &line{n: n, text: t})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	p := &parser{file: &File{Name: name}, name: name}
	for _, l := range lines {
		if err := p.directive(l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, l.n, err)
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.file, nil
}

type parser struct {
	file *File
	name string
	cur  *Scenario
}

func (p *parser) finish() error {
	seen := map[string]int{}
	for _, s := range p.file.Scenarios {
		if prev, ok := seen[s.Name]; ok {
			return fmt.Errorf("%s:%d: scenario %q already defined at line %d", p.name, s.Line, s.Name, prev)
		}
		seen[s.Name] = s.Line
		if len(s.Steps) == 0 {
			return fmt.Errorf("%s:%d: scenario %q has no steps", p.name, s.Line, s.Name)
		}
	}
	return nil
}

// splitDirective separates "op[@target] args... [tag] free text".
func splitDirective(text string) (op, only string, args []string, tag string, err error) {
	fields := strings.Fields(text)
	op = fields[0]
	if i := strings.IndexByte(op, '@'); i >= 0 {
		op, only = op[:i], op[i+1:]
		if only != Coordinatord && only != Kafka {
			return "", "", nil, "", fmt.Errorf("unknown target %q (want %s or %s)", only, Coordinatord, Kafka)
		}
	}
	for i, f := range fields[1:] {
		if m := tagPattern.FindStringSubmatch(f); m != nil {
			return op, only, fields[1 : 1+i], m[1], nil
		}
	}
	return op, only, fields[1:], "", nil
}

func (p *parser) directive(l *line) error {
	op, only, args, tag, err := splitDirective(l.text)
	if err != nil {
		return err
	}
	if op == "scenario" {
		name := strings.TrimSpace(strings.TrimPrefix(l.text, "scenario"))
		if name == "" {
			return fmt.Errorf("scenario needs a name")
		}
		if len(l.body) > 0 {
			return fmt.Errorf("scenario takes no indented body")
		}
		p.cur = &Scenario{File: p.name, Line: l.n, Name: name}
		p.file.Scenarios = append(p.file.Scenarios, p.cur)
		return nil
	}
	if p.cur == nil {
		if op == "servers" && len(l.body) == 0 && len(args) == 1 && slices.Contains(ServerPairs, args[0]) && p.file.Servers == "" {
			p.file.Servers = args[0]
			return nil
		}
		if op == "servers" {
			return fmt.Errorf("servers needs one of %s, once, before the first scenario", strings.Join(ServerPairs, ", "))
		}
		return fmt.Errorf("%q before the first scenario line", op)
	}
	if only != "" && tag == "" {
		return fmt.Errorf("%s@%s needs a [tag] naming the row of docs/conformance.md that explains the difference", op, only)
	}
	switch op {
	case "mode":
		if len(args) != 1 || (args[0] != ModeStandalone && args[0] != ModeGateway) {
			return fmt.Errorf("mode needs %s or %s", ModeStandalone, ModeGateway)
		}
		if p.cur.Mode != "" {
			return fmt.Errorf("mode given twice")
		}
		p.cur.Mode = args[0]
		return nil
	case "requires":
		if len(args) == 0 {
			return fmt.Errorf("requires needs API names")
		}
		for _, a := range args {
			k, err := apiKey(a)
			if err != nil {
				return err
			}
			p.cur.Requires = append(p.cur.Requires, k)
		}
		return nil
	case "expect", "capture", "diff", "check-assignment":
		return p.check(l, op, only, args, tag)
	}
	st := &Step{Line: l.n, Op: op, Only: only, Tag: tag, Key: -1}
	if err := p.step(st, l, args); err != nil {
		return err
	}
	p.cur.Steps = append(p.cur.Steps, st)
	return nil
}

func (p *parser) step(st *Step, l *line, args []string) error {
	needConn := func() error {
		if len(args) == 0 || strings.Contains(args[0], "=") {
			return fmt.Errorf("%s needs a connection name", st.Op)
		}
		st.Conn = args[0]
		args = args[1:]
		return nil
	}
	noBody := func() error {
		if len(l.body) > 0 {
			return fmt.Errorf("%s takes no indented body", st.Op)
		}
		return nil
	}
	switch st.Op {
	case "call", "send":
		if err := needConn(); err != nil {
			return err
		}
		if len(args) < 2 {
			return fmt.Errorf("%s needs: %s <conn> <Api> v<N>", st.Op, st.Op)
		}
		k, err := apiKey(args[0])
		if err != nil {
			return err
		}
		st.Key = k
		if st.Versions, err = versions(args[1]); err != nil {
			return err
		}
		if st.Op == "send" && len(st.Versions) > 1 {
			return fmt.Errorf("send takes one version; use call for a range")
		}
		if err := st.options(args[2:], "corr", "client", "timeout", "until"); err != nil {
			return err
		}
		if st.Until > 0 && st.Op == "send" {
			return fmt.Errorf("until works with call only")
		}
		st.JSON = joinBody(l.body)
		if st.JSON == "" {
			st.JSON = "{}"
		}
	case "recv":
		if err := needConn(); err != nil {
			return err
		}
		if len(args) >= 2 && !strings.Contains(args[0], "=") {
			k, err := apiKey(args[0])
			if err != nil {
				return err
			}
			st.Key = k
			if st.Versions, err = versions(args[1]); err != nil || len(st.Versions) != 1 {
				return fmt.Errorf("recv takes one version: %q", args[1])
			}
			args = args[2:]
		}
		if err := st.options(args, "timeout"); err != nil {
			return err
		}
		return noBody()
	case "frame":
		if err := needConn(); err != nil {
			return err
		}
		if err := st.options(args, "key", "version", "corr", "client", "flexible"); err != nil {
			return err
		}
		if st.Key < 0 || len(st.Versions) != 1 {
			return fmt.Errorf("frame needs key=K and version=V")
		}
		b, err := hexBody(l.body)
		if err != nil {
			return err
		}
		st.Hex = b
	case "raw":
		if err := needConn(); err != nil {
			return err
		}
		if err := st.options(args); err != nil {
			return err
		}
		b, err := hexBody(l.body)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return fmt.Errorf("raw needs hex bytes in an indented body")
		}
		st.Hex = b
	case "login":
		if err := needConn(); err != nil {
			return err
		}
		if len(args) != 1 || strings.Contains(args[0], "=") {
			return fmt.Errorf("login needs: login <conn> <user>")
		}
		st.Var = args[0]
		return noBody()
	case "eof", "close":
		if err := needConn(); err != nil {
			return err
		}
		if err := st.options(args); err != nil {
			return err
		}
		return noBody()
	case "closed":
		if err := needConn(); err != nil {
			return err
		}
		if err := st.options(args, "timeout"); err != nil {
			return err
		}
		return noBody()
	case "quiet":
		if err := needConn(); err != nil {
			return err
		}
		if len(args) != 1 {
			return fmt.Errorf("quiet needs: quiet <conn> <duration>")
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		st.Dur = d
		return noBody()
	case "sleep":
		if len(args) != 1 {
			return fmt.Errorf("sleep needs a duration")
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		st.Dur = d
		return noBody()
	case "set":
		if len(args) < 2 || !namePattern.MatchString(args[0]) {
			return fmt.Errorf("set needs: set <name> <value>")
		}
		st.Var = args[0]
		st.Value = strings.Join(args[1:], " ")
		return noBody()
	default:
		return fmt.Errorf("unknown directive %q", st.Op)
	}
	return nil
}

func (st *Step) options(args []string, allowed ...string) error {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !contains(allowed, k) {
			if len(allowed) == 0 {
				return fmt.Errorf("%s takes no option %q", st.Op, a)
			}
			return fmt.Errorf("%s: unknown argument %q (options: %s)", st.Op, a, strings.Join(allowed, "= "))
		}
		switch k {
		case "corr":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("corr: %w", err)
			}
			c := int32(n)
			st.Corr = &c
		case "client":
			st.ClientSet = true
			if v != "null" {
				s := v
				st.Client = &s
			}
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("timeout: %w", err)
			}
			st.Timeout = d
		case "until":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("until: %w", err)
			}
			st.Until = d
		case "key":
			k, err := apiKey(v)
			if err != nil {
				return err
			}
			st.Key = k
		case "version":
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil {
				return fmt.Errorf("version: %w", err)
			}
			st.Versions = []int16{int16(n)}
		case "flexible":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("flexible: %w", err)
			}
			st.Flexible = &b
		}
	}
	return nil
}

func (p *parser) check(l *line, kind, only string, args []string, tag string) error {
	steps := p.cur.Steps
	if len(steps) == 0 || (steps[len(steps)-1].Op != "call" && steps[len(steps)-1].Op != "recv") {
		return fmt.Errorf("%s must follow a call or recv step", kind)
	}
	st := steps[len(steps)-1]
	c := &Check{Line: l.n, Kind: kind, Only: only, Tag: tag}
	switch kind {
	case "expect":
		if len(args) > 0 {
			return fmt.Errorf("expect takes its JSON in an indented body")
		}
		c.JSON = joinBody(l.body)
		if c.JSON == "" {
			return fmt.Errorf("expect needs a JSON body")
		}
	case "capture":
		if len(args) != 2 || !namePattern.MatchString(args[0]) {
			return fmt.Errorf("capture needs: capture <name> <path>")
		}
		if len(l.body) > 0 {
			return fmt.Errorf("capture takes no indented body")
		}
		c.Var, c.Path = args[0], args[1]
	case "check-assignment":
		if only != "" {
			return fmt.Errorf("check-assignment checks every target; it cannot be limited to one")
		}
		if tag == "" {
			return fmt.Errorf("check-assignment needs a [tag] naming the row of docs/conformance.md that explains why the task lists are not diffed")
		}
		if len(l.body) > 0 {
			return fmt.Errorf("check-assignment takes no indented body")
		}
		var rest []string
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "keeps="); ok && namePattern.MatchString(v) {
				c.Keeps = v
			} else if v, ok := strings.CutPrefix(a, "within="); ok && namePattern.MatchString(v) {
				c.Within = v
			} else {
				rest = append(rest, a)
			}
		}
		tasks, active, err := taskCounts(rest)
		if err != nil {
			return err
		}
		c.Tasks, c.Active = tasks, active
	case "diff":
		if only != "" {
			return fmt.Errorf("diff compares targets; it cannot be limited to one")
		}
		if st.Only != "" {
			return fmt.Errorf("diff after a step that runs on %s only", st.Only)
		}
		for _, a := range args {
			k, v, ok := strings.Cut(a, "=")
			if !ok || k != "apikeys" {
				return fmt.Errorf("diff: unknown argument %q (option: apikeys=<table file>)", a)
			}
			c.APIKeys = v
		}
		for _, b := range l.body {
			fs := strings.Fields(b.text)
			if fs[0] == "sort" {
				if len(fs) != 4 || fs[2] != "by" {
					return fmt.Errorf("line %d: want: sort <path> by <field>", b.n)
				}
				c.Sorts = append(c.Sorts, &Sort{Path: strings.Split(fs[1], "."), Field: fs[3]})
				continue
			}
			if len(fs) < 2 {
				return fmt.Errorf("line %d: diff exception needs: <path> [tag] <why>", b.n)
			}
			m := tagPattern.FindStringSubmatch(fs[1])
			if m == nil {
				return fmt.Errorf("line %d: diff exception %q needs a [tag] after the path", b.n, fs[0])
			}
			e := &Except{Line: b.n, Tag: m[1]}
			path, sel, err := parseExceptPath(fs[0])
			if err != nil {
				return fmt.Errorf("line %d: %w", b.n, err)
			}
			e.Path, e.Select = path, sel
			c.Excepts = append(c.Excepts, e)
		}
	}
	st.Checks = append(st.Checks, c)
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func joinBody(body []bodyLine) string {
	var b strings.Builder
	for _, l := range body {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}

func hexBody(body []bodyLine) ([]byte, error) {
	var s strings.Builder
	for _, l := range body {
		t := l.text
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = t[:i]
		}
		s.WriteString(strings.Join(strings.Fields(t), ""))
	}
	b, err := hex.DecodeString(s.String())
	if err != nil {
		return nil, fmt.Errorf("bad hex body: %w", err)
	}
	return b, nil
}

var apiKeys = func() map[string]int16 {
	m := map[string]int16{}
	for k := int16(0); k < 1000; k++ {
		if kmsg.RequestForKey(k) != nil {
			m[kmsg.NameForKey(k)] = k
		}
	}
	return m
}()

// apiKey resolves an API name as kmsg spells it (Metadata, FindCoordinator) or a number.
func apiKey(s string) (int16, error) {
	if k, ok := apiKeys[s]; ok {
		return k, nil
	}
	if n, err := strconv.ParseInt(s, 10, 16); err == nil && n >= 0 {
		return int16(n), nil
	}
	return 0, fmt.Errorf("unknown API %q (use kmsg's name, e.g. Metadata, or a number)", s)
}

// apiName is the kmsg name of key, or the number when kmsg does not know it.
func apiName(k int16) string {
	if kmsg.RequestForKey(k) != nil {
		return kmsg.NameForKey(k)
	}
	return "key " + strconv.Itoa(int(k))
}

func versions(s string) ([]int16, error) {
	if !strings.HasPrefix(s, "v") {
		return nil, fmt.Errorf("version %q: want v<N> or v<N>-<M>", s)
	}
	lo, hi, isRange := strings.Cut(s[1:], "-")
	a, err := strconv.ParseInt(lo, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", s, err)
	}
	b := a
	if isRange {
		if b, err = strconv.ParseInt(hi, 10, 16); err != nil || b < a {
			return nil, fmt.Errorf("version range %q", s)
		}
	}
	var out []int16
	for v := a; v <= b; v++ {
		out = append(out, int16(v))
	}
	return out, nil
}

// Tags lists every difference id the file refers to, with the line of each use.
func (f *File) Tags() map[string][]int {
	out := map[string][]int{}
	add := func(tag string, line int) {
		if tag != "" {
			out[tag] = append(out[tag], line)
		}
	}
	for _, s := range f.Scenarios {
		for _, st := range s.Steps {
			add(st.Tag, st.Line)
			for _, c := range st.Checks {
				add(c.Tag, c.Line)
				for _, e := range c.Excepts {
					add(e.Tag, e.Line)
				}
			}
		}
	}
	return out
}

// Selector picks array elements by the value of one of their fields: Field=value (equal),
// Field~regexp (matches), Field!~regexp (does not match). Values may use ${variables}.
type Selector struct {
	Field, Op, Value string
}

var selectorPattern = regexp.MustCompile(`^([A-Za-z0-9_*]+)\[([A-Za-z0-9_]+)(=|~|!~)([^\]]*)\]$`)

// parseExceptPath splits "A.*.B" into segments; the last segment may carry a selector,
// "Topics[Topic=__consumer_offsets]".
func parseExceptPath(text string) ([]string, *Selector, error) {
	var segs []string
	depth, start := 0, 0
	for i, r := range text {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				segs = append(segs, text[start:i])
				start = i + 1
			}
		}
	}
	segs = append(segs, text[start:])
	for i, s := range segs {
		if s == "" {
			return nil, nil, fmt.Errorf("empty segment in path %q", text)
		}
		if strings.ContainsAny(s, "[]") {
			m := selectorPattern.FindStringSubmatch(s)
			if m == nil || i != len(segs)-1 {
				return nil, nil, fmt.Errorf("bad selector in %q: only the last segment may select, as Name[Field=value]", text)
			}
			segs[i] = m[1]
			if m[3] != "=" {
				if _, err := regexp.Compile(m[4]); err != nil {
					return nil, nil, fmt.Errorf("selector in %q: %w", text, err)
				}
			}
			return segs, &Selector{Field: m[2], Op: m[3], Value: m[4]}, nil
		}
	}
	return segs, nil, nil
}
