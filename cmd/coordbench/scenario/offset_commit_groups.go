package scenario

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(offsetCommitGroups{}) }

// offsetCommitGroupCount is how many groups the commits are spread over: enough that every one
// of coordinatord's 50 shards (and every __consumer_offsets partition of a Kafka with the
// default 50) holds about 200, so the row measures commits to many groups on many shards, not
// one group per client.
const offsetCommitGroupCount = 10_000

// offsetCommitGroups: like offset-commit, but the commits go to 10 000 standalone groups, each
// owned by one client (group j by client j mod N), which visits its groups in turn. Teardown
// fetches every committed group's offsets back and fails the window on any mismatch.
type offsetCommitGroups struct{}

func (offsetCommitGroups) Name() string { return "offset-commit-10k-groups" }
func (offsetCommitGroups) Description() string {
	return fmt.Sprintf("One operation is an OffsetCommit of %d partitions of one topic (generation -1, no member) "+
		"for the next of the client's share of %d groups (group j belongs to client j mod N and the client "+
		"visits its groups in turn), so the commits are spread over every coordinator shard instead of one group "+
		"per client. Each client has one connection per coordinator of its groups (FindCoordinator v4 batches "+
		"the look-up). Afterwards OffsetFetch checks that every group committed to holds its last commit. As for "+
		"offset-commit, coordinatord fsyncs before it answers and Kafka does not.", offsetCommitPartitions, offsetCommitGroupCount)
}
func (offsetCommitGroups) Needs() []int16        { return []int16{8, 9, 10} }
func (offsetCommitGroups) DefaultClients() []int { return []int{8, 64, 256} }

func (offsetCommitGroups) Setup(ctx context.Context, env *Env) (Instance, error) {
	boot, err := env.Dial(ctx, "", -1)
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	id, err := ensureTopic(ctx, env, offsetCommitTopic, offsetCommitPartitions, boot.Supports(19))
	if err != nil {
		return nil, err
	}
	o := &offsetCommitGroupsRun{env: env, topicID: id, groups: make([]string, offsetCommitGroupCount),
		next: make([]int64, offsetCommitGroupCount), clients: make([]*groupsClient, env.Clients)}
	for j := range o.groups {
		o.groups[j] = fmt.Sprintf("%s-ocg-%d", env.Tag, j)
	}
	addrs, err := findCoordinators(ctx, boot, o.groups, env.Info)
	if err != nil {
		return nil, err
	}
	o.addrs = addrs
	for i := range o.clients {
		o.clients[i] = &groupsClient{conns: map[string]*kconn.Conn{}}
	}
	// One connection per (client, coordinator); on one node that is one per client.
	type need struct {
		client int
		addr   string
	}
	var needs []need
	for i, c := range o.clients {
		for j := i; j < len(o.groups); j += env.Clients {
			if _, ok := c.conns[addrs[j]]; !ok {
				c.conns[addrs[j]] = nil
				needs = append(needs, need{i, addrs[j]})
			}
		}
	}
	conns, err := dialAll(ctx, len(needs), func(ctx context.Context, k int) (*kconn.Conn, error) {
		return env.Dial(ctx, needs[k].addr, needs[k].client)
	})
	if err != nil {
		return nil, err
	}
	for k, n := range needs {
		o.clients[n.client].conns[n.addr] = conns[k]
	}
	return o, nil
}

// findCoordinators returns the coordinator address of every group, batching FindCoordinator
// (v4 takes many keys) where the server allows it.
func findCoordinators(ctx context.Context, boot *kconn.Conn, groups []string, info *Info) ([]string, error) {
	out := make([]string, len(groups))
	const batch = 1000
	for start := 0; start < len(groups); start += batch {
		keys := groups[start:min(start+batch, len(groups))]
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = keys[0], keys
		resp, err := boot.Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("find coordinators: %w", err)
		}
		if req.GetVersion() < 4 { // one key per request
			for k, g := range keys {
				if out[start+k], err = findCoordinator(ctx, boot, g, info); err != nil {
					return nil, err
				}
			}
			continue
		}
		info.Version(req)
		byKey := map[string]string{}
		for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
			if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
				return nil, fmt.Errorf("find coordinator of %s: %w", c.Key, err)
			}
			byKey[c.Key] = net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
		}
		for k, g := range keys {
			a, ok := byKey[g]
			if !ok {
				return nil, fmt.Errorf("find coordinator: no answer for %s", g)
			}
			out[start+k] = a
		}
	}
	return out, nil
}

type offsetCommitGroupsRun struct {
	env     *Env
	topicID [16]byte
	groups  []string
	addrs   []string // coordinator of each group
	next    []int64  // per group: its last committed offset; only the owning client touches it
	clients []*groupsClient
}

type groupsClient struct {
	conns map[string]*kconn.Conn // by coordinator address
	turn  int                    // how many commits the client has sent
}

func (o *offsetCommitGroupsRun) Op(ctx context.Context, i int) error {
	c := o.clients[i]
	j := groupOfTurn(i, c.turn, o.env.Clients, len(o.groups))
	c.turn++
	o.next[j]++
	var info *Info
	if i == 0 {
		info = o.env.Info
	}
	return commitStandalone(ctx, c.conns[o.addrs[j]], o.groups[j], o.topicID, allCommitPartitions, o.next[j], info)
}

// groupOfTurn is the group client i of n commits to at its turn-th commit: its groups are i,
// i+n, i+2n, ... below total, visited in turn.
func groupOfTurn(i, turn, n, total int) int {
	own := (total - i + n - 1) / n
	return i + (turn%own)*n
}

func (o *offsetCommitGroupsRun) Teardown(ctx context.Context) error {
	defer func() {
		for _, c := range o.clients {
			for _, conn := range c.conns {
				conn.Close()
			}
		}
	}()
	errs := make([]error, len(o.clients))
	var wg sync.WaitGroup
	for i, c := range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < len(o.groups); j += len(o.clients) {
				if o.next[j] == 0 {
					continue
				}
				got, err := fetchOffsets(ctx, c.conns[o.addrs[j]], o.groups[j], o.topicID, o.env.Info)
				if err != nil {
					errs[i] = err
					return
				}
				for _, p := range allCommitPartitions {
					if got[p] != o.next[j] {
						errs[i] = fmt.Errorf("group %s partition %d: fetched offset %d, last committed %d", o.groups[j], p, got[p], o.next[j])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	committed := 0
	for _, v := range o.next {
		if v > 0 {
			committed++
		}
	}
	o.env.Info.Extra("groups_committed", float64(committed))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
