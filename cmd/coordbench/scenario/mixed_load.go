package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
)

func init() {
	Register(mixedLoad{busy: true})
	Register(mixedLoad{busy: false})
}

// mixedCommitters is how many connections commit offsets for the other group at full rate,
// each its own partition: enough that a commit is always waiting for an fsync in the shard.
const mixedCommitters = 4

// Group names of one window: "Aa" and "BB" have the same Java String.hashCode, so the two
// names do too and land in the same __consumer_offsets partition — the same coordinatord
// shard — whatever the target's partition count.
const (
	mixedHeartbeatSuffix = "-mixAa"
	mixedCommitSuffix    = "-mixBB"
)

// mixedLoad: steady KIP-848 heartbeats of one group, timed, while (busy) another group of the
// same shard commits offsets at full rate on connections of its own, untimed; mixed-load-idle
// is the same window without the commits, the baseline the busy p99 is compared with (issue
// 12: not above it by more than 20%). A heartbeat that appends nothing must not wait for the
// other group's fsyncs.
type mixedLoad struct{ busy bool }

func (s mixedLoad) Name() string {
	if s.busy {
		return "mixed-load"
	}
	return "mixed-load-idle"
}

func (s mixedLoad) Description() string {
	common := fmt.Sprintf("N members (one per client and connection) of one new KIP-848 consumer group subscribed to a "+
		"%d-partition topic settle as in consumer-heartbeat; the timed operation is a steady-state heartbeat "+
		"(member epoch only).", consumerPartitions)
	if !s.busy {
		return common + " Nothing else runs: this is the idle-shard baseline for mixed-load's heartbeat p99."
	}
	return common + fmt.Sprintf(" Meanwhile %d more connections commit offsets (standalone, generation -1, one "+
		"partition each) back to back for another group whose id has the same Java hash, so it lives in the same "+
		"coordinator shard (the same `__consumer_offsets` partition on Kafka); those commits are not timed, "+
		"`commits_per_s` is their rate. Compare the heartbeat p99 with mixed-load-idle's: a heartbeat that "+
		"changes nothing should not wait for the other group's fsyncs.", mixedCommitters)
}

func (mixedLoad) Needs() []int16        { return []int16{8, 9, 10, 68} }
func (mixedLoad) DefaultClients() []int { return []int{8} }

func (s mixedLoad) Setup(ctx context.Context, env *Env) (Instance, error) {
	canCreate, err := targetCreatesTopics(ctx, env)
	if err != nil {
		return nil, err
	}
	if _, err := ensureTopic(ctx, env, consumerTopic, consumerPartitions, canCreate); err != nil {
		return nil, err
	}
	topicID, err := ensureTopic(ctx, env, offsetCommitTopic, offsetCommitPartitions, canCreate)
	if err != nil {
		return nil, err
	}
	g, err := dialConsumerGroup(ctx, env, env.Tag+mixedHeartbeatSuffix)
	if err != nil {
		return nil, err
	}
	run := &mixedLoadRun{g: g, env: env, group: env.Tag + mixedCommitSuffix, topicID: topicID}
	if _, err := g.settle(ctx); err != nil {
		g.close()
		return nil, fmt.Errorf("%d members joining: %w", env.Clients, err)
	}
	if s.busy {
		if env.CommitAddr != "" {
			elsewhere := *env
			elsewhere.Addr = env.CommitAddr
			run.env = &elsewhere
			creates, err := targetCreatesTopics(ctx, run.env)
			if err == nil {
				run.topicID, err = ensureTopic(ctx, run.env, offsetCommitTopic, offsetCommitPartitions, creates)
			}
			if err != nil {
				g.close()
				return nil, fmt.Errorf("the committers' server %s: %w", env.CommitAddr, err)
			}
		}
		if err := run.startCommitters(ctx); err != nil {
			g.close()
			return nil, err
		}
	}
	return run, nil
}

type mixedLoadRun struct {
	g       *consumerGroup
	env     *Env
	group   string // the committers' group
	topicID [16]byte

	conns   []*kconn.Conn
	stop    chan struct{}
	wg      sync.WaitGroup
	commits atomic.Int64
	last    []int64 // per committer: its last acknowledged offset
	errs    []error
	started time.Time
}

func (r *mixedLoadRun) startCommitters(ctx context.Context) error {
	conns, err := dialAll(ctx, mixedCommitters, func(ctx context.Context, k int) (*kconn.Conn, error) {
		return dialCoordinator(ctx, r.env, r.group, r.env.Clients+k)
	})
	if err != nil {
		return err
	}
	r.conns, r.stop = conns, make(chan struct{})
	r.last, r.errs = make([]int64, mixedCommitters), make([]error, mixedCommitters)
	r.started = time.Now()
	for k, c := range conns {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			part := []int32{int32(k % offsetCommitPartitions)}
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				off := r.last[k] + 1
				if err := commitStandalone(context.Background(), c, r.group, r.topicID, part, off, nil); err != nil {
					r.errs[k] = err
					return
				}
				r.last[k] = off
				r.commits.Add(1)
			}
		}()
	}
	return nil
}

func (r *mixedLoadRun) Op(ctx context.Context, i int) error {
	return r.g.heartbeat(ctx, r.g.members[i], true)
}

func (r *mixedLoadRun) Teardown(ctx context.Context) error {
	defer r.g.close()
	var errs []error
	if r.stop != nil {
		close(r.stop)
		r.wg.Wait()
		r.env.Info.Extra("commits_per_s", float64(r.commits.Load())/time.Since(r.started).Seconds())
		defer closeAll(r.conns)
		for k, err := range r.errs {
			if err != nil {
				errs = append(errs, fmt.Errorf("committer %d: %w", k, err))
			}
		}
		if len(errs) == 0 {
			got, err := fetchOffsets(ctx, r.conns[0], r.group, r.topicID, r.env.Info)
			if err != nil {
				return err
			}
			for k, want := range r.last {
				if p := int32(k % offsetCommitPartitions); want > 0 && got[p] != want {
					errs = append(errs, fmt.Errorf("group %s partition %d: fetched offset %d, last committed %d", r.group, p, got[p], want))
				}
			}
		}
	}
	for _, m := range r.g.members {
		m.epoch = -1 // leave
		if err := r.g.heartbeat(ctx, m, true); err != nil {
			errs = append(errs, fmt.Errorf("leave: %w", err))
			break
		}
	}
	return errors.Join(errs...)
}
