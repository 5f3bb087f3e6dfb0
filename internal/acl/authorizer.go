package acl

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config is the authorizer's configuration.
type Config struct {
	// Enabled is authorizer.class.name set: without it, as in Kafka, nothing is checked.
	Enabled bool
	// SuperUsers may do everything (super.users).
	SuperUsers []Principal
	// AllowIfNoACL allows an operation on a resource that has no ACL at all
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
	// LogInterval is how often one denial (principal, host, resource, operation) is logged at
	// most; 0 means a minute.
	LogInterval time.Duration
	Logger      *zap.Logger
	Registerer  prometheus.Registerer
}

// maxCachedDecisions bounds the decision cache: clients choose the group and topic names
// checked, so an unbounded cache would let one client grow the process without limit.
const maxCachedDecisions = 100_000

// maxLoggedKeys bounds the table of recently logged denials for the same reason.
const maxLoggedKeys = 10_000

// Authorizer answers "may this principal do this to that resource". Checks read an immutable
// set of bindings through an atomic pointer and cache their decisions next to it, so a change
// of bindings (a new set) invalidates every cached decision at once.
type Authorizer struct {
	cfg   Config
	super map[Principal]bool
	state atomic.Pointer[state]

	denied *prometheus.CounterVec

	logMu  sync.Mutex
	logged map[decisionKey]time.Time

	onDenied atomic.Pointer[func()]
}

type state struct {
	set     *Set
	version int64
	cache   atomic.Pointer[decisions]
}

type decisions struct {
	m sync.Map // decisionKey -> bool
	n atomic.Int64
}

type decisionKey struct {
	principal Principal
	host      string
	resource  ResourceType
	name      string
	op        Operation
}

// New returns an authorizer with no bindings.
func New(cfg Config) *Authorizer {
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	a := &Authorizer{cfg: cfg, super: map[Principal]bool{}, logged: map[decisionKey]time.Time{}}
	for _, p := range cfg.SuperUsers {
		a.super[p] = true
	}
	a.denied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coordinatord_authorization_denied_total",
		Help: "Requests (or parts of requests) refused because the principal lacked an ACL, by resource type and operation.",
	}, []string{"resource_type", "operation"})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(a.denied)
	}
	a.install(&state{set: NewSet(nil), version: -1})
	return a
}

// Enabled says whether checks are made at all.
func (a *Authorizer) Enabled() bool { return a != nil && a.cfg.Enabled }

func (a *Authorizer) install(s *state) {
	s.cache.Store(&decisions{})
	a.state.Store(s)
}

// Update replaces the bindings with set, read at version (the metadata log offset of the last
// ACL change it contains). An older version than the one installed is ignored, so that two
// changes finishing in either order leave the newer set in place.
func (a *Authorizer) Update(set *Set, version int64) {
	for {
		cur := a.state.Load()
		if version < cur.version {
			return
		}
		s := &state{set: set, version: version}
		s.cache.Store(&decisions{})
		if a.state.CompareAndSwap(cur, s) {
			return
		}
	}
}

// SetOnDenied makes every logged-and-counted denial (Authorize, not Allowed) call f: gateway
// mode reads the upstream's ACLs again then, so an ACL just added there applies on the
// client's retry. f must not block.
func (a *Authorizer) SetOnDenied(f func()) { a.onDenied.Store(&f) }

// Bindings is the set the authorizer currently applies.
func (a *Authorizer) Bindings() *Set { return a.state.Load().set }

// Allowed decides without logging a denial: for filtering (ListGroups, Metadata of all topics)
// and authorized-operations bitfields, where Kafka does not log either.
func (a *Authorizer) Allowed(p Principal, host string, r ResourceType, name string, op Operation) bool {
	if !a.Enabled() || a.super[p] {
		return true
	}
	s := a.state.Load()
	k := decisionKey{principal: p, host: host, resource: r, name: name, op: op}
	c := s.cache.Load()
	if v, ok := c.m.Load(k); ok {
		return v.(bool)
	}
	ok := s.set.decide(p, host, r, name, op, a.cfg.AllowIfNoACL)
	if c.n.Add(1) > maxCachedDecisions {
		s.cache.CompareAndSwap(c, &decisions{})
	} else {
		c.m.Store(k, ok)
	}
	return ok
}

// Authorize decides, and logs and counts a denial.
func (a *Authorizer) Authorize(p Principal, host string, r ResourceType, name string, op Operation) bool {
	if a.Allowed(p, host, r, name, op) {
		return true
	}
	a.deny(decisionKey{principal: p, host: host, resource: r, name: name, op: op})
	return false
}

func (a *Authorizer) deny(k decisionKey) {
	if f := a.onDenied.Load(); f != nil {
		(*f)()
	}
	a.denied.WithLabelValues(k.resource.String(), k.op.String()).Inc()
	now := time.Now()
	a.logMu.Lock()
	last, seen := a.logged[k]
	log := !seen || now.Sub(last) >= a.cfg.LogInterval
	if log {
		if len(a.logged) >= maxLoggedKeys {
			clear(a.logged)
		}
		a.logged[k] = now
	}
	a.logMu.Unlock()
	if log {
		a.cfg.Logger.Info("authorization denied", zap.Stringer("principal", k.principal), zap.String("host", k.host),
			zap.Stringer("resource_type", k.resource), zap.String("resource", k.name), zap.Stringer("operation", k.op))
	}
}

// AuthorizedOperations is the bitfield of the resource type's supported operations the
// principal may perform (bit 1<<op each), as Kafka fills authorized_operations.
func (a *Authorizer) AuthorizedOperations(p Principal, host string, r ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(r) {
		if a.Allowed(p, host, r, name, op) {
			bits |= 1 << op
		}
	}
	return bits
}
