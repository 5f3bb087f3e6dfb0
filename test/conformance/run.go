package conformance

// Running a scenario against one target: each step in order on that target's connections,
// expect and capture checks as the responses arrive, and every response kept (raw and
// normalized) so diff checks can compare the targets once all of them have run.

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Target is one server under test and what the harness learned about it at start.
type Target struct {
	Name      string
	Addr      string
	Host      string
	Port      int32
	NodeID    int32
	ClusterID string
	// APIs is what the server advertises in ApiVersions: key -> [min, max].
	APIs map[int16][2]int16

	// Gateway mode (CONFORMANCE_GATEWAY=1): coordinatord in front of the reference broker.
	// Upstream maps each upstream broker's node id to its gateway port, as Metadata lists it.
	Gateway  bool
	Upstream map[int32]int32
	// RunSuffix makes this target's ${run} its own: in gateway mode both targets create
	// topics (and transactional ids) in the same broker, so their names must not collide.
	// Normalization maps the target's names back to the shared run's.
	RunSuffix string
	// SASLAddr is the SASL_PLAINTEXT listener of the SASL pair (empty elsewhere).
	SASLAddr string
}

const (
	defaultClientID   = "conformance"
	defaultRecvWait   = 15 * time.Second
	defaultClosedWait = 5 * time.Second
)

// Probe connects to a server and records its advertised APIs, node id and cluster id; with
// gateway, also the upstream brokers coordinatord lists beside itself.
func Probe(name, addr string, gateway bool) (*Target, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return nil, err
	}
	t := &Target{Name: name, Addr: addr, Host: host, Port: int32(port), APIs: map[int16][2]int16{}}
	c, err := dial("probe", addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	client := defaultClientID
	st := &Step{}

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "coordinatord-conformance", "1.0"
	if err := c.sendRequest(st, av, 3, &client); err != nil {
		return nil, err
	}
	b, err := c.next(defaultRecvWait)
	if err != nil {
		return nil, fmt.Errorf("probe %s ApiVersions: %w", name, err)
	}
	r, _, err := readResponse(b, 18, 3, nil)
	if err != nil {
		return nil, fmt.Errorf("probe %s ApiVersions: %w", name, err)
	}
	avr := r.(*kmsg.ApiVersionsResponse)
	if avr.ErrorCode != 0 {
		return nil, fmt.Errorf("probe %s ApiVersions: error %s", name, errorName(int64(avr.ErrorCode)))
	}
	for _, k := range avr.ApiKeys {
		t.APIs[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{}
	if err := c.sendRequest(st, md, 1, &client); err != nil {
		return nil, err
	}
	if b, err = c.next(defaultRecvWait); err != nil {
		return nil, fmt.Errorf("probe %s Metadata: %w", name, err)
	}
	// v1 names the brokers; v2 adds the cluster id.
	if r, _, err = readResponse(b, 3, 1, nil); err != nil {
		return nil, fmt.Errorf("probe %s Metadata: %w", name, err)
	}
	mr := r.(*kmsg.MetadataResponse)
	t.NodeID = -1
	for _, br := range mr.Brokers {
		if br.Host == host && br.Port == t.Port {
			t.NodeID = br.NodeID
		}
	}
	if gateway {
		t.Gateway, t.RunSuffix, t.Upstream = true, "g", map[int32]int32{}
		for _, br := range mr.Brokers {
			if br.NodeID != t.NodeID {
				t.Upstream[br.NodeID] = br.Port
			}
		}
		if len(t.Upstream) == 0 {
			return nil, fmt.Errorf("probe %s: gateway Metadata lists no upstream broker", name)
		}
	}
	if t.NodeID < 0 {
		return nil, fmt.Errorf("probe %s: no broker at %s in Metadata", name, addr)
	}
	if err := c.sendRequest(st, md, 2, &client); err != nil {
		return nil, err
	}
	if b, err = c.next(defaultRecvWait); err != nil {
		return nil, fmt.Errorf("probe %s Metadata: %w", name, err)
	}
	if r, _, err = readResponse(b, 3, 2, nil); err != nil {
		return nil, fmt.Errorf("probe %s Metadata: %w", name, err)
	}
	if cid := r.(*kmsg.MetadataResponse).ClusterID; cid != nil {
		t.ClusterID = *cid
	}
	return t, nil
}

// table is the API table a diff names, for this target: in gateway mode coordinatord's
// column is the gateway's (gateway-<name>) where that file exists.
func (t *Target) table(name string) string {
	if t.Gateway {
		return "gateway-" + name
	}
	return name
}

// Mode is coordinatord's mode (the mode directive); the reference broker has none.
func (t *Target) Mode() string {
	switch {
	case t.Name != Coordinatord:
		return ""
	case t.Gateway:
		return ModeGateway
	}
	return ModeStandalone
}

// missing names the required APIs the target does not advertise.
func (t *Target) missing(keys []int16) []string {
	var out []string
	for _, k := range keys {
		if _, ok := t.APIs[k]; !ok {
			out = append(out, apiName(k))
		}
	}
	return out
}

type resultKey struct {
	step    int
	version int16
}

type result struct {
	raw  any
	norm any
}

// Run is one scenario executed against one target.
type Run struct {
	Target   *Target
	Scenario *Scenario
	// Failures are this target's broken expectations and protocol surprises, one line each.
	Failures []string
	// Reached is how many steps ran before the run stopped (len(Steps) when it finished).
	Reached int

	vars     map[string]string
	captured []string // variable names set by capture, in order
	conns    map[string]*clientConn
	results  map[resultKey]*result
	tables   map[string]*APITable
	notes    map[resultKey]string // check-assignment: the assignment seen at each step
}

// RunScenario executes sc against t. shared holds run-wide variables (e.g. run).
func RunScenario(sc *Scenario, t *Target, shared map[string]string, tables map[string]*APITable) *Run {
	r := &Run{
		Target: t, Scenario: sc,
		vars:    map[string]string{},
		conns:   map[string]*clientConn{},
		results: map[resultKey]*result{},
		tables:  tables,
		notes:   map[resultKey]string{},
	}
	for k, v := range shared {
		r.vars[k] = v
	}
	if t.RunSuffix != "" {
		r.vars["run"] += t.RunSuffix
	}
	r.vars["target"] = t.Name
	r.vars["node"] = strconv.Itoa(int(t.NodeID))
	r.vars["host"] = t.Host
	r.vars["port"] = strconv.Itoa(int(t.Port))
	r.vars["cluster"] = t.ClusterID
	// broker is the node that leads partitions: coordinatord itself standalone, the upstream
	// broker behind a gateway (whose own node only coordinates groups).
	r.vars["broker"], r.vars["broker_port"] = r.vars["node"], r.vars["port"]
	for id, port := range t.Upstream {
		r.vars["broker"], r.vars["broker_port"] = strconv.Itoa(int(id)), strconv.Itoa(int(port))
	}
	defer func() {
		for _, c := range r.conns {
			c.close()
		}
	}()
	for i, st := range sc.Steps {
		if st.Only != "" && st.Only != t.Name {
			r.Reached = i + 1
			continue
		}
		if err := r.step(i, st); err != nil {
			r.fail(st.Line, "%s: %v", stepText(st), err)
			return r
		}
		r.Reached = i + 1
	}
	return r
}

// Notes are the assignments check-assignment saw, in step order.
func (r *Run) Notes() []string {
	keys := make([]resultKey, 0, len(r.notes))
	for k := range r.notes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].step != keys[j].step {
			return keys[i].step < keys[j].step
		}
		return keys[i].version < keys[j].version
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = r.notes[k]
	}
	return out
}

func (r *Run) fail(line int, format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf("%s:%d: %s", r.Scenario.File, line, fmt.Sprintf(format, args...)))
}

func stepText(st *Step) string {
	switch st.Op {
	case "call", "send":
		v := fmt.Sprintf("v%d", st.Versions[0])
		if len(st.Versions) > 1 {
			v = fmt.Sprintf("v%d-%d", st.Versions[0], st.Versions[len(st.Versions)-1])
		}
		return fmt.Sprintf("%s %s %s %s", st.Op, st.Conn, apiName(st.Key), v)
	case "frame":
		return fmt.Sprintf("frame %s key=%d version=%d", st.Conn, st.Key, st.Versions[0])
	case "sleep":
		return "sleep " + st.Dur.String()
	case "set":
		return "set " + st.Var
	}
	return st.Op + " " + st.Conn
}

var varPattern = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// subst replaces ${name} with the variable's value; an unknown name is an error.
func (r *Run) subst(text string) (string, error) {
	var missing []string
	out := varPattern.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := r.vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variable ${%s}", strings.Join(missing, "}, ${"))
	}
	return out, nil
}

func (r *Run) conn(name string) (*clientConn, error) {
	if c, ok := r.conns[name]; ok {
		return c, nil
	}
	c, err := dial(name, r.Target.Addr)
	if err != nil {
		return nil, err
	}
	r.conns[name] = c
	return c, nil
}

// login opens a connection on the target's SASL listener and logs in there as the step's user.
func (r *Run) login(st *Step) error {
	if _, ok := r.conns[st.Conn]; ok {
		return fmt.Errorf("login %s: the connection is open already; log in first", st.Conn)
	}
	if r.Target.SASLAddr == "" {
		return fmt.Errorf("login %s: %s has no SASL listener (a file headed servers %s has)", st.Conn, r.Target.Name, ServersSASL)
	}
	c, err := dial(st.Conn, r.Target.SASLAddr)
	if err != nil {
		return err
	}
	if err := loginSCRAM(c, st.Var, saslPassword(st.Var)); err != nil {
		c.close()
		return err
	}
	// The login's requests took correlation ids 1..n: the scenario's go on from there.
	r.conns[st.Conn] = c
	return nil
}

func clientID(st *Step) *string {
	if st.ClientSet {
		return st.Client
	}
	s := defaultClientID
	return &s
}

func (r *Run) step(i int, st *Step) error {
	switch st.Op {
	case "set":
		v, err := r.subst(st.Value)
		if err != nil {
			return err
		}
		r.vars[st.Var] = v
		return nil
	case "sleep":
		time.Sleep(st.Dur)
		return nil
	case "login":
		return r.login(st)
	}
	c, err := r.conn(st.Conn)
	if err != nil {
		return err
	}
	switch st.Op {
	case "call", "send":
		text, err := r.subst(st.JSON)
		if err != nil {
			return err
		}
		j, err := parseJSON(text)
		if err != nil {
			return fmt.Errorf("request JSON: %w", err)
		}
		for _, v := range st.Versions {
			req := kmsg.RequestForKey(st.Key)
			if err := fill(req, j); err != nil {
				return err
			}
			deadline := time.Now().Add(st.Until)
			for {
				if err := c.sendRequest(st, req, v, clientID(st)); err != nil {
					return err
				}
				if st.Op == "send" {
					return nil
				}
				fails, err := r.receive(i, st, c, st.Key, v)
				if err != nil {
					return fmt.Errorf("v%d: %w", v, err)
				}
				// until=D: ask again until the expectations hold (a server that is still
				// creating an internal topic, a rebalance that has not finished).
				if len(fails) == 0 || time.Now().After(deadline) {
					r.Failures = append(r.Failures, fails...)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		return nil
	case "recv":
		key, version := st.Key, int16(-1)
		if len(st.Versions) == 1 {
			version = st.Versions[0]
		}
		if key < 0 && len(c.pending) == 0 {
			return fmt.Errorf("nothing was sent on %s; say which API and version to decode (recv %s <Api> v<N>)", st.Conn, st.Conn)
		}
		if key < 0 {
			key, version = c.pending[0].key, c.pending[0].version
		}
		fails, err := r.receive(i, st, c, key, version)
		r.Failures = append(r.Failures, fails...)
		return err
	case "frame":
		return c.sendFrame(st, clientID(st))
	case "raw":
		return c.write(st.Hex)
	case "eof":
		if tc, ok := c.nc.(*net.TCPConn); ok {
			return tc.CloseWrite()
		}
		return nil
	case "close":
		c.close()
		delete(r.conns, st.Conn)
		return nil
	case "closed":
		wait := st.Timeout
		if wait == 0 {
			wait = defaultClosedWait
		}
		b, err := c.next(wait)
		switch {
		case err == errClosed:
			c.close()
			delete(r.conns, st.Conn)
			return nil
		case errors.Is(err, errNoResponse):
			return fmt.Errorf("the server kept the connection open for %s", wait)
		case err != nil:
			return err
		}
		return fmt.Errorf("the server answered (%d bytes: %s) instead of closing the connection", len(b), abbrevHex(b))
	case "quiet":
		b, err := c.next(st.Dur)
		switch {
		case errors.Is(err, errNoResponse):
			return nil // nothing arrived: as expected
		case err == errClosed:
			return fmt.Errorf("the server closed the connection")
		case err != nil:
			return err
		}
		return fmt.Errorf("a response arrived (%d bytes: %s) where none was expected", len(b), abbrevHex(b))
	}
	return fmt.Errorf("unknown step %q", st.Op)
}

func abbrevHex(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("%x...", b[:24])
	}
	return fmt.Sprintf("%x", b)
}

// receive reads one response on c, decodes it as key at version, and runs the step's checks;
// it returns the checks that failed.
func (r *Run) receive(i int, st *Step, c *clientConn, key, version int16) (fails []string, err error) {
	failf := func(line int, format string, args ...any) {
		fails = append(fails, fmt.Sprintf("%s:%d: %s", r.Scenario.File, line, fmt.Sprintf(format, args...)))
	}
	var wantCorr *int32
	if len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		wantCorr = &p.corr
		if version < 0 {
			version = p.version
		}
	}
	wait := st.Timeout
	if wait == 0 {
		wait = defaultRecvWait
	}
	b, err := c.next(wait)
	if err != nil {
		return nil, err
	}
	resp, body, err := readResponse(b, key, version, wantCorr)
	if err != nil {
		return nil, err
	}
	if extra := trailing(body, resp); extra != 0 {
		failf(st.Line, "%s v%d: the response is %d bytes longer than its decoded fields", stepText(st), version, extra)
	}
	raw := toTree(resp)
	for _, ck := range st.Checks {
		if ck.Kind == "capture" && (ck.Only == "" || ck.Only == r.Target.Name) {
			v, err := lookup(raw, ck.Path)
			if err != nil {
				return nil, fmt.Errorf("capture %s: %w", ck.Var, err)
			}
			text, err := scalarText(v)
			if err != nil {
				return nil, fmt.Errorf("capture %s: %w", ck.Var, err)
			}
			r.vars[ck.Var] = text
			r.captured = append(r.captured, ck.Var)
		}
	}
	norm := r.normalize(raw)
	r.results[resultKey{i, version}] = &result{raw: raw, norm: norm}
	for _, ck := range st.Checks {
		if ck.Kind != "check-assignment" {
			continue
		}
		fs, note := checkAssignment(raw, key, ck.Tasks, ck.Active)
		fs = append(fs, r.checkSticky(raw, key, ck)...)
		for _, f := range fs {
			failf(ck.Line, "%s v%d: %s", stepText(st), version, f)
		}
		r.notes[resultKey{i, version}] = fmt.Sprintf("%s:%d: %s v%d: %s", r.Scenario.File, ck.Line, stepText(st), version, note)
		// Which member holds which task is not compared (only how many): the id is checked
		// like any other by TestDifferencesAreDocumented.
		maskTasks(norm, key)
	}
	for _, ck := range st.Checks {
		if ck.Only != "" && ck.Only != r.Target.Name {
			continue
		}
		switch ck.Kind {
		case "expect":
			text, err := r.subst(ck.JSON)
			if err != nil {
				return nil, fmt.Errorf("expect: %w", err)
			}
			want, err := parseJSON(text)
			if err != nil {
				return nil, fmt.Errorf("expect JSON (line %d): %w", ck.Line, err)
			}
			for _, m := range match(want, raw, "") {
				failf(ck.Line, "%s v%d: expect: %s", stepText(st), version, m)
			}
		case "diff":
			if ck.APIKeys != "" {
				tb := r.tables[r.Target.table(ck.APIKeys)]
				if tb == nil {
					return nil, fmt.Errorf("diff: table %s was not loaded", ck.APIKeys)
				}
				if ms := tb.Check(r.Target.Name, raw); len(ms) > 0 {
					failf(ck.Line, "%s v%d: ApiKeys differ from %s (update the table, with a row in docs/conformance.md for a new difference):\n    %s",
						stepText(st), version, ck.APIKeys, strings.Join(ms, "\n    "))
				}
			}
		}
	}
	return fails, nil
}

// trailing reports how many bytes of the body the decoded response did not account for, by
// encoding it again: a server that writes fields a version does not have shows up here even
// though the decoder tolerates trailing bytes.
func trailing(body []byte, resp kmsg.Response) int {
	return len(body) - len(resp.AppendTo(nil))
}
