package shard

// The offsets retention sweep (spec coordinator-apis §3.5). Each shard has a timer, armed when
// the shard loads and re-armed by every run, that expires offsets every
// offsets.retention.check.interval.ms and deletes Empty groups left with nothing. The same tick
// removes the offsets of topics deleted from the catalog: a shard operation cannot read the
// metadata shard, so the tick reads a catalog snapshot off the shard goroutine (Ctx.Go) and
// feeds the result back as a second operation.

import (
	"context"
	"sort"
	"time"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"go.uber.org/zap"
)

// RetentionConfig configures the sweep.
type RetentionConfig struct {
	Retention          time.Duration // offsets.retention.minutes
	CheckInterval      time.Duration // offsets.retention.check.interval.ms
	ProducerExpiration time.Duration // producer.id.expiration.ms
	// Topics returns a catalog snapshot's lookup; it runs off the shard goroutine. Nil
	// disables dropping the offsets of deleted topics.
	Topics func(ctx context.Context) (offsets.TopicLookup, error)
	Logger *zap.Logger
}

const (
	retentionTimer    = "offsets.retention"
	retentionMore     = "offsets.retention.more"
	droppedTopicsMore = "offsets.dropped-topics.more"
	// sweepBatchRecords bounds the tombstones one sweep operation appends, so that one
	// operation's work stays short; the rest follow in further operations at once. The records
	// go in as many log batches as message.max.bytes requires (divisible).
	sweepBatchRecords = 4096
)

func (cfg RetentionConfig) logger() *zap.Logger {
	if cfg.Logger == nil {
		return zap.NewNop()
	}
	return cfg.Logger
}

// ArmRetention starts the shard's retention timer; call it from OnLoaded.
func ArmRetention(c *runtime.Ctx[*Machine], cfg RetentionConfig) {
	c.Schedule(retentionTimer, cfg.CheckInterval, retentionTick(cfg))
}

func retentionTick(cfg RetentionConfig) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		c.Schedule(retentionTimer, cfg.CheckInterval, retentionTick(cfg))
		if cfg.Topics != nil {
			c.Go(func(ctx context.Context) runtime.WriteOp[*Machine] {
				at := time.Now()
				exists, err := cfg.Topics(ctx)
				if err != nil {
					cfg.logger().Warn("offsets retention: catalog unavailable; offsets of deleted topics are dropped at the next check", zap.Error(err))
					return nil
				}
				return DropDeletedTopicOffsets(cfg, exists, at)
			})
		}
		return ExpireOffsets(cfg)(c, m)
	}
}

// ExpireOffsets is one retention pass over every group of the shard: expired offsets get
// tombstones, an Empty group with no offset and no open transaction left is deleted, and
// producers idle for producer.id.expiration.ms with nothing staged are forgotten.
func ExpireOffsets(cfg RetentionConfig) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		now := c.Now().UnixMilli()
		var d divisible
		expired, deleted := 0, 0
		for _, g := range m.sweepGroups() {
			if len(d.recs) >= sweepBatchRecords {
				c.Schedule(retentionMore, 0, ExpireOffsets(cfg))
				break
			}
			rules, ok := m.offsetRules(g)
			if !ok {
				continue
			}
			allGone := !m.Offsets.HasCommitted(g) && !m.Offsets.HasOpenTxns(g)
			if rules.ExpireBase != nil {
				var tomb []log.Record
				tomb, allGone = m.Offsets.Expire(g, offsets.ExpireRules{Subscribed: rules.Subscribed, Base: rules.ExpireBase}, now, cfg.Retention.Milliseconds())
				d.each(tomb...)
				expired += len(tomb)
			}
			if allGone && rules.Empty && rules.DeleteRecords != nil {
				d.whole(rules.DeleteRecords()...)
				deleted++
			}
		}
		if len(d.recs) < sweepBatchRecords && cfg.ProducerExpiration > 0 {
			d.each(m.Offsets.ExpireProducers(now, cfg.ProducerExpiration.Milliseconds())...)
		}
		if expired > 0 || deleted > 0 {
			lg, shard := cfg.logger(), c.ShardID()
			c.AfterDurable(func() {
				lg.Info("expired committed offsets", zap.Int32("shard", shard), zap.Int("offsets", expired), zap.Int("groups_deleted", deleted))
			})
		}
		return runtime.Result{Records: d.recs, Units: d.units}
	}
}

// DropDeletedTopicOffsets removes every group's committed and staged offsets of topics absent
// from a catalog snapshot taken at snapshotAt.
func DropDeletedTopicOffsets(cfg RetentionConfig, exists offsets.TopicLookup, snapshotAt time.Time) runtime.WriteOp[*Machine] {
	return func(c *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		recs := m.Offsets.DropDeletedTopics(exists, snapshotAt.UnixMilli())
		if len(recs) > sweepBatchRecords {
			recs = recs[:sweepBatchRecords]
			c.Schedule(droppedTopicsMore, 0, DropDeletedTopicOffsets(cfg, exists, snapshotAt))
		}
		if n := len(recs); n > 0 {
			lg, shard := cfg.logger(), c.ShardID()
			c.AfterDurable(func() {
				lg.Info("removed offsets of deleted topics", zap.Int32("shard", shard), zap.Int("offsets", n))
			})
		}
		var d divisible
		d.each(recs...)
		return runtime.Result{Records: d.recs, Units: d.units}
	}
}

// sweepGroups lists, sorted and once each, every group with offsets and every group a group
// type owns.
func (m *Machine) sweepGroups() []string {
	ids := m.Offsets.Groups()
	seen := make(map[string]bool, len(ids))
	for _, g := range ids {
		seen[g] = true
	}
	for _, t := range m.offsetGroupTypes() {
		for _, g := range t.groups() {
			if !seen[g] {
				seen[g] = true
				ids = append(ids, g)
			}
		}
	}
	sort.Strings(ids)
	return ids
}
