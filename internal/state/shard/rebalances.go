package shard

import (
	"fmt"
	"strings"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/prometheus/client_golang/prometheus"
)

// RecentRebalances is how many rebalances the console keeps per group.
const RecentRebalances = 10

// Rebalance is one epoch (streams, consumer) or generation (classic) bump of a group, as the
// console's group page lists it.
type Rebalance struct {
	Epoch int32
	At    time.Time
	Cause string
}

// rebalanceLedger is what a shard remembers of its groups' recent rebalances, in memory only:
// the console's "recent rebalances" and coordinatord_rebalances_total. It lives on the shard
// goroutine (nothing here is locked). A write's records reach the machine when the operation
// runs, before they are durable: a bump waits in pending until the runtime reports its offset
// durable, so only durable rebalances count; a reload (which drops what was never made durable)
// forgets pending bumps and never counts the log's history again.
type rebalanceLedger struct {
	live     bool
	pending  []pendingBump // in offset order: records are replayed in log order
	recent   map[string][]Rebalance
	counter  *prometheus.CounterVec // nil: not counted
	clock    func() time.Time
	maxGroup int
}

type pendingBump struct {
	offset int64
	typ    string
	group  string
	// forgotten: the group was deleted after this bump; it still counts, but is not listed.
	forgotten bool
	Rebalance
}

func newRebalanceLedger(counter *prometheus.CounterVec) *rebalanceLedger {
	return &rebalanceLedger{recent: map[string][]Rebalance{}, counter: counter, clock: time.Now, maxGroup: RecentRebalances}
}

// reset starts a load: bumps not yet durable are gone with the machine.
func (l *rebalanceLedger) reset() {
	l.live = false
	clear(l.pending)
	l.pending = l.pending[:0]
}

// bumped notes that the machine replayed a group's epoch bump at offset.
func (l *rebalanceLedger) bumped(offset int64, typ, group string, epoch int32, cause func() string) {
	if l == nil || !l.live {
		return
	}
	l.pending = append(l.pending, pendingBump{offset: offset, typ: typ, group: group, Rebalance: Rebalance{Epoch: epoch, At: l.clock(), Cause: cause()}})
}

// durable counts and lists the bumps at offsets up to upTo, now durable.
func (l *rebalanceLedger) durable(upTo int64) {
	i := 0
	for ; i < len(l.pending) && l.pending[i].offset <= upTo; i++ {
		b := l.pending[i]
		if l.counter != nil {
			l.counter.WithLabelValues(b.typ).Inc()
		}
		if b.forgotten {
			continue
		}
		h := append(l.recent[b.group], b.Rebalance)
		if len(h) > l.maxGroup {
			h = append(h[:0], h[len(h)-l.maxGroup:]...)
		}
		l.recent[b.group] = h
	}
	clear(l.pending[:i])
	l.pending = l.pending[i:]
}

// forget drops a deleted group's history, so that the ledger holds only live groups.
func (l *rebalanceLedger) forget(group string) {
	if l == nil {
		return
	}
	delete(l.recent, group)
	for i := range l.pending {
		if l.pending[i].group == group {
			l.pending[i].forgotten = true
		}
	}
}

// bumpBase is what a streams or consumer group looked like at its last epoch bump, kept per
// machine so that the next bump can say what changed.
type bumpBase struct {
	members       int
	hash          int64
	topologyEpoch int32
}

// observe wraps Replay for the records that carry a group's epoch or generation: it compares
// the group before and after the record and tells the ledger about a bump.
func (m *Machine) observe(offset int64, kind records.Kind, rec log.Record, replay func() error) error {
	r, err := records.ReadKey(rec.Key, kind)
	if err != nil {
		return replay()
	}
	group := r.String()
	if r.Err() != nil {
		return replay()
	}
	switch kind {
	case records.KindClassicGroup:
		var oldGen int32
		if g := m.Classic.Group(group); g != nil {
			oldGen = g.Generation
		}
		if err := replay(); err != nil {
			return err
		}
		g := m.Classic.Group(group)
		if g == nil {
			delete(m.bumpBases, group)
			m.rebalances.forget(group)
			return nil
		}
		m.epochBump(offset, "classic", group, oldGen, g.Generation, bumpBase{members: len(g.Members), topologyEpoch: -1})
	case records.KindStreamsGroupMetadata:
		var oldEpoch int32
		if g := m.Streams.Group(group); g != nil {
			oldEpoch = g.Epoch
		}
		if err := replay(); err != nil {
			return err
		}
		g := m.Streams.Group(group)
		if g == nil {
			delete(m.bumpBases, group)
			m.rebalances.forget(group)
			return nil
		}
		topo := int32(-1)
		if g.Topology != nil {
			topo = g.Topology.Epoch
		}
		m.epochBump(offset, "streams", group, oldEpoch, g.Epoch, bumpBase{members: len(g.Members), hash: g.MetadataHash, topologyEpoch: topo})
	case records.KindConsumerGroupMetadata:
		var oldEpoch int32
		if g := m.Consumer.Groups[group]; g != nil {
			oldEpoch = g.Epoch
		}
		if err := replay(); err != nil {
			return err
		}
		g := m.Consumer.Groups[group]
		if g == nil {
			delete(m.bumpBases, group)
			m.rebalances.forget(group)
			return nil
		}
		m.epochBump(offset, "consumer", group, oldEpoch, g.Epoch, bumpBase{members: len(g.Members), hash: g.MetadataHash, topologyEpoch: -1})
	default:
		return replay()
	}
	return nil
}

// epochBump records a group's epoch (generation) bump, saying what changed since its last bump.
// A streams or consumer bump's member records precede its group metadata record in the same
// batch, so the members counted here are the new ones; a classic record carries its members.
func (m *Machine) epochBump(offset int64, typ, group string, oldEpoch, epoch int32, now bumpBase) {
	before, seen := m.bumpBases[group]
	if seen && epoch <= oldEpoch {
		// Records that rewrite a group without a bump (a classic state change, a stored
		// description epoch) leave the base at the last bump.
		return
	}
	if !seen && epoch == 0 {
		// Generation 0 completed no rebalance: whoever it lists is joining the first one.
		now.members = 0
	}
	m.bumpBases[group] = now
	if epoch <= oldEpoch {
		return
	}
	m.rebalances.bumped(offset, typ, group, epoch, func() string {
		if !seen {
			return fmt.Sprintf("group created (%d members)", now.members)
		}
		var causes []string
		switch d := now.members - before.members; {
		case d > 0:
			causes = append(causes, fmt.Sprintf("%d member(s) joined", d))
		case d < 0:
			causes = append(causes, fmt.Sprintf("%d member(s) left", -d))
		}
		if now.topologyEpoch != before.topologyEpoch {
			causes = append(causes, fmt.Sprintf("topology epoch %d", now.topologyEpoch))
		}
		if now.hash != before.hash {
			causes = append(causes, "topic metadata changed")
		}
		if len(causes) == 0 {
			if typ == "classic" {
				return "members rejoined"
			}
			return "member metadata changed (subscription, rack, client tags or replaced member)"
		}
		return strings.Join(causes, ", ")
	})
}

// RecentRebalancesOf reads a group's recent rebalances, oldest first (a copy).
func RecentRebalancesOf(group string) func(m *Machine) (any, error) {
	return func(m *Machine) (any, error) {
		if m.rebalances == nil {
			return []Rebalance(nil), nil
		}
		return append([]Rebalance(nil), m.rebalances.recent[group]...), nil
	}
}
