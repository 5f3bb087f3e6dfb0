package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/acl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// ACLMirrorOptions configure an ACLMirror.
type ACLMirrorOptions struct {
	// Fetch reads every ACL binding of the upstream (DescribeAcls with a match-all filter).
	Fetch      func(context.Context) ([]kmsg.DescribeACLsResponseResource, error)
	Authorizer *acl.Authorizer
	// Interval is upstream.acls.refresh.interval.ms.
	Interval time.Duration
	// MinGap bounds how often denials make the mirror read again: a client that is denied in a
	// loop must not turn into a DescribeAcls loop against the cluster.
	MinGap time.Duration
	// Timeout bounds one read.
	Timeout time.Duration
	// FollowUp is how long after a read that Reread asked for the mirror reads once more: the
	// upstream broker answering DescribeAcls may apply an ACL change a moment after the
	// broker that answered the change did.
	FollowUp   time.Duration
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// ACLMirror keeps the authorizer's bindings equal to the upstream cluster's, so that in gateway
// mode one set of ACLs (kafka-acls.sh against the cluster) governs the group APIs that
// coordinatord answers and the APIs the upstream answers.
type ACLMirror struct {
	opts     ACLMirrorOptions
	kick     chan struct{}
	urgent   chan struct{} // Reread's: no MinGap, and a follow-up read
	stop     chan struct{}
	done     chan struct{}
	start    sync.Once
	close    sync.Once
	version  int64 // only the loop (or Load before it) writes it
	failures prometheus.Counter
	bindings prometheus.Gauge

	// Guarded by mu: reads the loop has begun and ended, the error of the last one ended, and
	// a channel closed (and replaced) when one ends, which Reread waits on.
	mu        sync.Mutex
	begun     uint64
	ended     uint64
	lastErr   error
	readEnded chan struct{}
}

// NewACLMirror creates a mirror; Load reads once, Start keeps reading.
func NewACLMirror(opts ACLMirrorOptions) *ACLMirror {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MinGap <= 0 || opts.MinGap > opts.Interval {
		opts.MinGap = min(time.Second, opts.Interval)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.FollowUp <= 0 {
		opts.FollowUp = time.Second
	}
	m := &ACLMirror{opts: opts, kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1), readEnded: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordinatord_gateway_upstream_acls_refresh_failures_total",
			Help: "Reads of the upstream cluster's ACLs that failed; the bindings read last stay in force.",
		}),
		bindings: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coordinatord_gateway_upstream_acls",
			Help: "ACL bindings read from the upstream cluster and applied to the group APIs.",
		}),
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(m.failures, m.bindings)
	}
	return m
}

// Load reads the upstream's ACLs and installs them. Called before the loop starts (at start-up,
// before any client is served, so that no request is decided by an empty set).
func (m *ACLMirror) Load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	res, err := m.opts.Fetch(ctx)
	if err != nil {
		m.failures.Inc()
		return err
	}
	bs := m.bindingsOf(res)
	m.version++
	m.opts.Authorizer.Update(acl.NewSet(bs), m.version)
	m.bindings.Set(float64(len(bs)))
	return nil
}

// bindingsOf converts the upstream's answer. A binding coordinatord cannot represent (a
// principal without a type, a resource type it does not know) is left out with a warning:
// leaving out an ALLOW only denies more, and the DENYs Kafka accepts all parse.
func (m *ACLMirror) bindingsOf(res []kmsg.DescribeACLsResponseResource) []acl.Binding {
	var out []acl.Binding
	for _, r := range res {
		for _, e := range r.ACLs {
			p, err := acl.ParsePrincipal(e.Principal)
			b := acl.Binding{Resource: acl.ResourceType(r.ResourceType), Name: r.ResourceName, Pattern: acl.PatternType(r.ResourcePatternType),
				Principal: p, Host: e.Host, Operation: acl.Operation(e.Operation), Permission: acl.Permission(e.PermissionType)}
			if err == nil {
				err = b.Validate()
			}
			if err != nil {
				m.opts.Logger.Warn("upstream ACL binding left out", zap.String("resource", r.ResourceName), zap.String("principal", e.Principal), zap.Error(err))
				continue
			}
			out = append(out, b)
		}
	}
	return out
}

// Start reads the upstream's ACLs every Interval, and soon after a denial, until Close.
func (m *ACLMirror) Start() {
	m.start.Do(func() { go m.loop() })
}

// Denied asks for a read soon: the denied client may have just been granted the ACL upstream.
// It never blocks; denials while a read is pending coalesce.
func (m *ACLMirror) Denied() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Reread reads the upstream's ACLs at once, without Denied's MinGap, and returns when a read
// begun after the call has ended, with that read's error: an ACL just created or deleted
// upstream then decides this node's next request. Calls while a read is under way share the
// one read after it, so a burst of changes costs one read; a second read follows FollowUp
// later, for an upstream broker that applied the change later than the one that answered it.
// It needs the loop (Start) and returns ctx's error, or an error once the mirror is closed.
func (m *ACLMirror) Reread(ctx context.Context) error {
	m.mu.Lock()
	want := m.begun + 1
	m.mu.Unlock()
	select {
	case m.urgent <- struct{}{}:
	default:
	}
	for {
		m.mu.Lock()
		ended, err, ch := m.ended, m.lastErr, m.readEnded
		m.mu.Unlock()
		if ended >= want {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return errors.New("the upstream ACL reader has stopped")
		}
	}
}

// Close stops the loop and waits for it; a mirror never started cannot start afterwards. A
// nil mirror (no authorizer) closes as a no-op.
func (m *ACLMirror) Close() {
	if m == nil {
		return
	}
	m.close.Do(func() { close(m.stop) })
	m.start.Do(func() { close(m.done) })
	<-m.done
}

func (m *ACLMirror) loop() {
	defer close(m.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.stop
		cancel()
	}()
	tick := time.NewTimer(m.opts.Interval)
	defer tick.Stop()
	last := time.Now()
	var followUp <-chan time.Time
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		case <-followUp:
			followUp = nil
		case <-m.urgent:
			followUp = time.After(m.opts.FollowUp)
		case <-m.kick:
			if wait := m.opts.MinGap - time.Since(last); wait > 0 {
				select {
				case <-m.stop:
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		m.mu.Lock()
		m.begun++
		m.mu.Unlock()
		err := m.Load(ctx)
		m.mu.Lock()
		m.ended, m.lastErr = m.begun, err
		close(m.readEnded)
		m.readEnded = make(chan struct{})
		m.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.opts.Logger.Warn("could not read the upstream cluster's ACLs; the last ones read stay in force", zap.Error(err))
		}
		tick.Reset(m.opts.Interval)
	}
}
