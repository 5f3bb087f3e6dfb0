package membership

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// refusalsToRemove is how many probes in a row must be refused before a peer is removed: one
// refusal can be a port being re-bound by a restart on the same address.
const refusalsToRemove = 2

// maxProbesInFlight bounds the dials of one round: a cluster has a handful of nodes, and a
// round waits for all of its dials (each ends within the probe interval) before the next.
const maxProbesInFlight = 8

// peerState is what the watch knows of one member of the assignment.
type peerState struct {
	// reached: a probe connected once. Only a peer reached before is judged by a refusal, so a
	// wrong advertised address (refused from here, never reachable) does not evict a live node
	// over and over.
	reached  bool
	refusals int
	// removed: this node's LeaveGroup for it was answered (removed, or already gone); it is not
	// sent again while the stale assignment still lists the member.
	removed bool
	// unreachableLogged: the WARN about an address refused from the start was logged.
	unreachableLogged bool
}

// probeResult classifies one dial of a peer's listener.
type probeResult int

const (
	probeAccepted probeResult = iota
	// probeRefused: ECONNREFUSED, nothing listens on the port. A stopped (SIGSTOP) or slow
	// process still completes the handshake through its kernel's backlog, so a live process
	// is never refused.
	probeRefused
	// probeUnknown: a timeout, no route, any other error: the peer may be alive behind a lost
	// network or a machine may have lost power; the session timeout decides.
	probeUnknown
)

// dialProbe connects to addr and closes the connection at once.
func dialProbe(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func classify(err error) probeResult {
	switch {
	case err == nil:
		return probeAccepted
	case errors.Is(err, syscall.ECONNREFUSED):
		return probeRefused
	default:
		return probeUnknown
	}
}

// watchPeers probes every other node of the latest assignment each PeerProbeInterval, and
// removes from the upstream group a member whose listener it reached before and that is now
// refused twice in a row: its process is gone, and the upstream would otherwise keep its
// shards unserved until the session timeout.
func (m *Membership) watchPeers() {
	t := time.NewTicker(m.o.PeerProbeInterval)
	defer t.Stop()
	// A LeaveGroup or dial in flight ends with the membership.
	ctx, cancel := m.stopContext()
	defer cancel()
	peers := map[string]*peerState{} // by member id; only members of the latest assignment
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.newView:
		}
		a := m.view.Load()
		if a == nil {
			clear(peers)
			continue
		}
		self := m.selfMember()
		var targets []Node
		listed := map[string]bool{}
		for _, n := range a.Nodes {
			if n.Member == "" || n.Member == self {
				continue
			}
			listed[n.Member] = true
			targets = append(targets, n)
			if peers[n.Member] == nil {
				peers[n.Member] = &peerState{}
			}
		}
		for member := range peers {
			if !listed[member] {
				delete(peers, member) // gone from the assignment: no longer probed
			}
		}
		results := m.probeAll(ctx, targets)
		for i, n := range targets {
			p := peers[n.Member]
			switch results[i] {
			case probeAccepted:
				p.reached, p.refusals = true, 0
			case probeRefused:
				p.refusals++
			case probeUnknown:
				// Proves nothing either way, and breaks a streak of refusals: only refusals
				// in a row count.
				p.refusals = 0
			}
			if results[i] == probeRefused && !p.reached && !p.unreachableLogged {
				p.unreachableLogged = true
				m.lg.Warn("a coordinatord node's advertised listener refuses connections from this node; it is left to log.kafka.session.timeout.ms (check advertised.listeners)",
					zap.Int32("node", n.ID), zap.String("address", net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))))
			}
			if p.reached && !p.removed && p.refusals >= refusalsToRemove {
				p.removed = m.removePeer(ctx, n, p.refusals)
			}
		}
	}
}

// probeAll dials every target, at most maxProbesInFlight at a time, each within the probe
// interval, and waits for all of them.
func (m *Membership) probeAll(ctx context.Context, targets []Node) []probeResult {
	out := make([]probeResult, len(targets))
	timeout := m.o.PeerProbeInterval
	sem := make(chan struct{}, maxProbesInFlight)
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i] = classify(m.o.Probe(ctx, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))))
		}()
	}
	wg.Wait()
	return out
}

// removePeer sends the LeaveGroup that removes a dead member, and has this node heartbeat at
// once so it learns of the rebalance and rejoins without waiting for its next beat. True once
// the group answered for the member (removed, or unknown: already gone, by another node's
// probe or the session timeout); false to try again at the next probe.
func (m *Membership) removePeer(ctx context.Context, n Node, refusals int) bool {
	addr := net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
	ctx, cancel := context.WithTimeout(ctx, m.o.SessionTimeout)
	resp, err := m.o.Request(ctx, leaveRequest(m.o.Group, n.Member))
	cancel()
	if err != nil {
		m.lg.Warn("could not remove a dead coordinatord node from the upstream group; retrying at the next probe",
			zap.Int32("node", n.ID), zap.String("address", addr), zap.Error(err))
		return false
	}
	lr := resp.(*kmsg.LeaveGroupResponse)
	// One member was named: its error (v3+), or the top-level one (v0-v2, or the whole
	// request refused).
	code := lr.ErrorCode
	for _, r := range lr.Members {
		if code == 0 {
			code = r.ErrorCode
		}
	}
	switch err := kerr.ErrorForCode(code); {
	case err == nil:
		m.peersRemoved.Inc()
		m.lg.Warn("removed a dead coordinatord node from the upstream group: its listener refused connections; its shards move now instead of after log.kafka.session.timeout.ms",
			zap.String("group", m.o.Group), zap.Int32("node", n.ID), zap.String("address", addr), zap.String("member", n.Member),
			zap.Int("refused_probes", refusals))
	case errors.Is(err, kerr.UnknownMemberID):
		m.lg.Info("a dead coordinatord node had already left the upstream group", zap.Int32("node", n.ID), zap.String("member", n.Member))
	default:
		m.lg.Warn("the upstream group refused to remove a dead coordinatord node; retrying at the next probe",
			zap.Int32("node", n.ID), zap.String("address", addr), zap.Error(err))
		return false
	}
	m.beatNow()
	return true
}

// beatNow has the heartbeat loop beat at once: if the group is rebalancing (the member just
// removed), the answer is REBALANCE_IN_PROGRESS and this node rejoins; if it already rejoined
// past that, the beat is answered and nothing changes (a forced rejoin would start one more
// rebalance).
func (m *Membership) beatNow() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// probeNow has the peer watch probe at once: a new assignment names nodes this node may not
// have reached yet, and only a reached node can be judged dead; probed at the next tick, a
// node killed within the interval after this node joined would be left to the session
// timeout.
func (m *Membership) probeNow() {
	select {
	case m.newView <- struct{}{}:
	default:
	}
}

func (m *Membership) selfMember() string {
	if p := m.self.Load(); p != nil {
		return *p
	}
	return ""
}
