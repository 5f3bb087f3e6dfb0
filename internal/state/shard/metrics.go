package shard

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/prometheus/client_golang/prometheus"
)

// GroupMetrics are the group-level series: coordinatord_groups (by type and state),
// coordinatord_rebalances_total (by type) and the age of open transactions.
//
// The groups gauge is counted at scrape time, one ReadOp per shard, rather than kept up to
// date by the machines: the states Kafka lists for streams and consumer groups (Assigning,
// Reconciling, Stable, NotReady) are derived from member epochs against the target assignment,
// so a transition has no single place in Replay to hook without deriving the state again on
// every member record. A scrape costs each shard one pass over its groups (the id lists a
// ListGroups walks, without building its listing), answered on the shard's own goroutine; shards read in parallel, each bounded by ScrapeTimeout, and a shard that is not
// active or does not answer in time is left out of that scrape rather than delaying it.
type GroupMetrics struct {
	rebalances *prometheus.CounterVec
	groups     *prometheus.Desc
	oldestTxn  *prometheus.Desc
	groupTxn   *prometheus.Desc

	mu  sync.Mutex
	set *Set
}

// ScrapeTimeout bounds how long a scrape waits for one shard's group count.
const ScrapeTimeout = time.Second

// OldestTxnGroups is how many groups, the oldest open transactions first, get a series of
// their own: enough to name a hanging transaction's group, few enough that a client opening
// transactions in many groups cannot grow the scrape.
const OldestTxnGroups = 10

// groupStates are Kafka's state names per group type; each is reported, 0 when no group is
// in it, so that a dashboard's series do not come and go.
var groupStates = map[string][]string{
	"classic":  {classic.Empty.String(), classic.PreparingRebalance.String(), classic.CompletingRebalance.String(), classic.Stable.String(), classic.Dead.String()},
	"consumer": {"Empty", "Assigning", "Reconciling", "Stable"},
	"streams":  {"Empty", "NotReady", "Assigning", "Reconciling", "Stable"},
}

// NewGroupMetrics creates the series and registers them on reg (nil: not registered); pass it
// to NewSet as SetOptions.GroupMetrics.
func NewGroupMetrics(reg prometheus.Registerer) *GroupMetrics {
	g := &GroupMetrics{
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordinatord_rebalances_total",
			Help: "Durable group rebalances by group type: classic generation bumps, streams and consumer group epoch bumps.",
		}, []string{"type"}),
		groups: prometheus.NewDesc("coordinatord_groups",
			"Groups by type (classic, consumer, streams) and Kafka's state name, counted at scrape time.", []string{"type", "state"}, nil),
		oldestTxn: prometheus.NewDesc("coordinatord_txn_oldest_open_age_seconds",
			"Age of the oldest open transaction holding staged offsets in any group (since its earliest staged offset), 0 when none.", nil, nil),
		groupTxn: prometheus.NewDesc("coordinatord_group_txn_oldest_open_age_seconds",
			"Age of the oldest open transaction of a group, for the groups with the oldest open transactions only.", []string{"group"}, nil),
	}
	for _, t := range []string{"classic", "consumer", "streams"} {
		g.rebalances.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(g.rebalances, g)
	}
	return g
}

func (g *GroupMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.groups
	ch <- g.oldestTxn
	ch <- g.groupTxn
}

func (g *GroupMetrics) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	set := g.set
	g.mu.Unlock()
	if set == nil {
		return
	}
	counts := map[[2]string]int{}
	for t, states := range groupStates {
		for _, s := range states {
			counts[[2]string{t, s}] = 0
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	n := set.Count()
	results := make([]map[[2]string]int, n)
	txns := make([]map[string]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := set.Shard(i).Read(ctx, CountGroups); err == nil {
				results[i] = v.(map[[2]string]int)
			}
			if v, err := set.Shard(i).Read(ctx, oldestOpenTxns); err == nil {
				txns[i] = v.(map[string]int64)
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		for k, v := range r {
			counts[k] += v
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(g.groups, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
	g.collectTxnAges(ch, txns, time.Now())
}

type groupSince struct {
	group string
	since int64
}

func (g *GroupMetrics) collectTxnAges(ch chan<- prometheus.Metric, perShard []map[string]int64, now time.Time) {
	var all []groupSince
	for _, m := range perShard {
		for group, since := range m {
			all = append(all, groupSince{group, since})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].since != all[j].since {
			return all[i].since < all[j].since
		}
		return all[i].group < all[j].group
	})
	age := func(since int64) float64 { return max(0, float64(now.UnixMilli()-since)/1000) }
	oldest := 0.0
	if len(all) > 0 {
		oldest = age(all[0].since)
	}
	ch <- prometheus.MustNewConstMetric(g.oldestTxn, prometheus.GaugeValue, oldest)
	for _, gs := range all[:min(len(all), OldestTxnGroups)] {
		ch <- prometheus.MustNewConstMetric(g.groupTxn, prometheus.GaugeValue, age(gs.since), gs.group)
	}
}

// oldestOpenTxns maps each group of a shard holding staged offsets to the start of its
// oldest open transaction.
func oldestOpenTxns(m *Machine) (any, error) { return m.Offsets.OldestOpenTxnSince(), nil }

// CountGroups counts a shard's groups by type and listed state, as ListGroups lists them
// (a group with only committed offsets is an Empty classic group).
func CountGroups(m *Machine) (any, error) {
	out := map[[2]string]int{}
	for _, id := range m.Classic.Groups() {
		out[[2]string{"classic", m.Classic.Group(id).State.String()}]++
	}
	for id := range m.Streams.Groups {
		out[[2]string{"streams", m.Streams.ListedState(id)}]++
	}
	for id := range m.Consumer.Groups {
		out[[2]string{"consumer", m.Consumer.ListedState(id)}]++
	}
	for _, id := range m.Offsets.Groups() {
		if !m.Classic.Has(id) && !m.ownedByOtherType(id) {
			out[[2]string{"classic", classic.Empty.String()}]++
		}
	}
	return out, nil
}
