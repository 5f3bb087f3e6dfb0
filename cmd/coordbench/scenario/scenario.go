// Package scenario holds coordbench's workloads. A scenario says which API keys it needs, sets
// up one measurement window (connections, topics, groups), runs one operation per call for a
// simulated client, and tears the window down, reporting any figures of its own (such as the
// time a group took to settle). Each scenario lives in its own file and registers itself in
// init, so adding a workload is adding a file.
package scenario

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scenario is one workload.
type Scenario interface {
	// Name is the CLI and report name, e.g. "offset-commit".
	Name() string
	// Description is one paragraph for the report: what one operation is and what is measured.
	Description() string
	// Needs lists the API keys a target must advertise; a target lacking any is recorded as
	// "not supported yet" instead of measured.
	Needs() []int16
	// DefaultClients are the client counts the suite measures.
	DefaultClients() []int
	// Setup prepares one window: one connection per simulated client, and whatever state the
	// operation needs. It may record figures of its own (Env.Info.Extra).
	Setup(ctx context.Context, env *Env) (Instance, error)
}

// Paced is implemented by scenarios measured at a fixed aggregate request rate instead of in a
// closed loop: the runner spreads Rate operations per second evenly over the clients, so that
// rows of different client counts are measured at the same rate (the server's CPU per
// operation depends on the rate it is driven at, not only on the work an operation does).
type Paced interface {
	// Rate is the default aggregate rate, operations per second; `--rate` overrides it.
	Rate() float64
}

// Instance is one set-up window.
type Instance interface {
	// Op runs one operation for simulated client i (0 <= i < Env.Clients) on that client's own
	// connection. The runner calls it from one goroutine per client and times each call.
	Op(ctx context.Context, i int) error
	// Teardown runs after the timed window: it may measure more (e.g. time to a stable
	// assignment after a change, recorded with Env.Info.Extra), then releases everything.
	Teardown(ctx context.Context) error
}

// Env is what a scenario gets for one window.
type Env struct {
	Target string // target name, e.g. "kafka"
	Addr   string // bootstrap host:port
	// CommitAddr, when set, is the bootstrap host:port of another server that mixed-load's
	// committers commit to, so that their server work runs in another process while the
	// machine carries the same load.
	CommitAddr string
	Clients    int
	// Tag is unique to this window; names of groups made in it start with it, so no two
	// windows (rounds, targets, warm-ups) share server state.
	Tag  string
	Info *Info
}

// Dial opens one client connection to addr (the bootstrap address when addr is "").
func (e *Env) Dial(ctx context.Context, addr string, client int) (*kconn.Conn, error) {
	if addr == "" {
		addr = e.Addr
	}
	return kconn.Dial(ctx, addr, fmt.Sprintf("coordbench-%d", client))
}

// Info collects a window's own figures. Safe for concurrent use.
type Info struct {
	mu       sync.Mutex
	Extras   map[string]float64
	Versions map[string]int16
}

// Extra records a scenario-specific figure; the name ends in its unit (join_stable_ms).
func (in *Info) Extra(name string, v float64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.Extras == nil {
		in.Extras = map[string]float64{}
	}
	in.Extras[name] = v
}

// Version records the version a request was sent at.
func (in *Info) Version(req kmsg.Request) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.Versions == nil {
		in.Versions = map[string]int16{}
	}
	in.Versions[kmsg.NameForKey(req.Key())] = req.GetVersion()
}

var (
	regMu    sync.Mutex
	registry = map[string]Scenario{}
)

// Register adds a scenario; a duplicate name is a programming error.
func Register(s Scenario) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[s.Name()]; dup {
		panic("scenario: duplicate name " + s.Name())
	}
	registry[s.Name()] = s
}

// Order is the order the suite and the report use; scenarios not listed follow by name.
var Order = []string{"metadata", "find-coordinator", "offset-commit", "offset-commit-10k-groups", "classic-join",
	"streams-heartbeat", "streams-heartbeat-scaling", "streams-heartbeat-paced", "consumer-heartbeat", "mixed-load-idle", "mixed-load", "produce-1k", "produce-64k", "fetch-1k", "fetch-64k"}

// All returns every registered scenario of the default suite in Order.
func All() []Scenario { return InSuite("") }

// InSuite returns the registered scenarios of one suite ("" is the default one) in Order.
func InSuite(suite string) []Scenario {
	regMu.Lock()
	defer regMu.Unlock()
	rank := func(n string) int {
		for i, o := range Order {
			if o == n {
				return i
			}
		}
		return len(Order)
	}
	out := make([]Scenario, 0, len(registry))
	for _, s := range registry {
		in := ""
		if su, ok := s.(Suited); ok {
			in = su.Suite()
		}
		if in == suite {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := rank(out[i].Name()), rank(out[j].Name())
		if ri != rj {
			return ri < rj
		}
		return out[i].Name() < out[j].Name()
	})
	return out
}

// Get finds a scenario by name.
func Get(name string) (Scenario, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// Missing lists the keys of needs that conn's server does not advertise, as "Name (key)".
func Missing(conn *kconn.Conn, needs []int16) []string {
	var out []string
	for _, k := range needs {
		if !conn.Supports(k) {
			out = append(out, fmt.Sprintf("%s (%d)", kmsg.NameForKey(k), k))
		}
	}
	return out
}

// findCoordinator asks conn's server for the coordinator of group and returns its address.
func findCoordinator(ctx context.Context, conn *kconn.Conn, group string, info *Info) (string, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return "", fmt.Errorf("find coordinator of %s: %w", group, err)
	}
	if info != nil {
		info.Version(req)
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, host, port := r.ErrorCode, r.Host, r.Port
	if req.GetVersion() >= 4 {
		if len(r.Coordinators) != 1 {
			return "", fmt.Errorf("find coordinator of %s: %d coordinators in answer", group, len(r.Coordinators))
		}
		c := r.Coordinators[0]
		code, host, port = c.ErrorCode, c.Host, c.Port
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return "", fmt.Errorf("find coordinator of %s: %w", group, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// dialCoordinator opens client i's connection to the coordinator of group, asking over a
// bootstrap connection first.
func dialCoordinator(ctx context.Context, env *Env, group string, i int) (*kconn.Conn, error) {
	boot, err := env.Dial(ctx, "", i)
	if err != nil {
		return nil, err
	}
	addr, err := findCoordinator(ctx, boot, group, env.Info)
	if err != nil {
		boot.Close()
		return nil, err
	}
	if addr == boot.Addr() {
		return boot, nil
	}
	boot.Close()
	return env.Dial(ctx, addr, i)
}

// dialAll opens n connections concurrently with open, closing them all if any fails.
func dialAll(ctx context.Context, n int, open func(ctx context.Context, i int) (*kconn.Conn, error)) ([]*kconn.Conn, error) {
	conns := make([]*kconn.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16) // bounded: a burst of 64 handshakes is itself a load test
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			conns[i], errs[i] = open(ctx, i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			closeAll(conns)
			return nil, err
		}
	}
	return conns, nil
}

func closeAll(conns []*kconn.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// ErrorCode turns a non-zero Kafka error code into an error.
func errorCode(what string, code int16) error {
	if code == 0 {
		return nil // without kerr's map lookup: the timed operations' usual answer
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
