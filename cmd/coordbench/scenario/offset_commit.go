package scenario

import (
	"context"
	"fmt"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(offsetCommit{}) }

const (
	offsetCommitTopic      = "coordbench-offsets"
	offsetCommitPartitions = 4
)

// offsetCommit: every client commits offsets for its own group (a standalone group: generation
// -1, no member id, as a consumer that assigns partitions itself does), every partition of one
// topic per request, with a fresh offset each time. Teardown fetches every group's offsets back
// and fails the window if any is not the last one committed.
type offsetCommit struct{}

func (offsetCommit) Name() string { return "offset-commit" }
func (offsetCommit) Description() string {
	return fmt.Sprintf("One operation is an OffsetCommit of %d partitions of one topic for the client's own "+
		"group (generation -1, no member: a standalone consumer's commit), on its own connection to the "+
		"group's coordinator. Afterwards OffsetFetch checks every group holds its last commit. An acknowledged "+
		"commit does not mean the same everywhere: coordinatord (default `log.flush.interval.ms=0`) fsyncs "+
		"before it answers; Kafka appends to its one-replica `__consumer_offsets` without fsync (it relies on "+
		"replication, here none); kfake keeps offsets in memory.", offsetCommitPartitions)
}
func (offsetCommit) Needs() []int16        { return []int16{8, 9, 10} }
func (offsetCommit) DefaultClients() []int { return []int{1, 8, 64} }

func (offsetCommit) Setup(ctx context.Context, env *Env) (Instance, error) {
	canCreate, err := targetCreatesTopics(ctx, env)
	if err != nil {
		return nil, err
	}
	id, err := ensureTopic(ctx, env, offsetCommitTopic, offsetCommitPartitions, canCreate)
	if err != nil {
		return nil, err
	}
	groups := make([]string, env.Clients)
	for i := range groups {
		groups[i] = fmt.Sprintf("%s-oc-%d", env.Tag, i)
	}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return dialCoordinator(ctx, env, groups[i], i)
	})
	if err != nil {
		return nil, err
	}
	return &offsetCommitRun{env: env, conns: conns, groups: groups, topicID: id,
		next: make([]int64, env.Clients)}, nil
}

type offsetCommitRun struct {
	env     *Env
	conns   []*kconn.Conn
	groups  []string
	topicID [16]byte
	next    []int64 // per client: the offset of its next commit; only client i touches next[i]
}

func (o *offsetCommitRun) Op(ctx context.Context, i int) error {
	o.next[i]++
	var info *Info
	if i == 0 {
		info = o.env.Info
	}
	return commitStandalone(ctx, o.conns[i], o.groups[i], o.topicID, allCommitPartitions, o.next[i], info)
}

// allCommitPartitions are the partitions of offsetCommitTopic an offset-commit request names.
var allCommitPartitions = func() []int32 {
	ps := make([]int32, offsetCommitPartitions)
	for p := range ps {
		ps[p] = int32(p)
	}
	return ps
}()

// commitStandalone commits offset for partitions of offsetCommitTopic in group as a standalone
// consumer does (generation -1, no member id); info, when set, records the version used.
func commitStandalone(ctx context.Context, c *kconn.Conn, group string, topicID [16]byte, partitions []int32, offset int64, info *Info) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic, t.TopicID = offsetCommitTopic, topicID
	for _, p := range partitions {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, offset
		t.Partitions = append(t.Partitions, pp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	resp, err := c.Request(ctx, req)
	if err != nil {
		return err
	}
	if info != nil {
		info.Version(req)
	}
	for _, rt := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := errorCode("offset commit", rp.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *offsetCommitRun) Teardown(ctx context.Context) error {
	defer closeAll(o.conns)
	bad := 0
	var firstErr error
	for i, c := range o.conns {
		if o.next[i] == 0 {
			continue // never committed (e.g. a very short window)
		}
		got, err := fetchOffsets(ctx, c, o.groups[i], o.topicID, o.env.Info)
		if err != nil {
			return err
		}
		for p := range int32(offsetCommitPartitions) {
			if got[p] != o.next[i] {
				bad++
				if firstErr == nil {
					firstErr = fmt.Errorf("group %s partition %d: fetched offset %d, last committed %d", o.groups[i], p, got[p], o.next[i])
				}
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d committed offsets not read back: %w", bad, firstErr)
	}
	return nil
}

// fetchOffsets reads back group's offsets for every partition of offsetCommitTopic.
func fetchOffsets(ctx context.Context, c *kconn.Conn, group string, topicID [16]byte, info *Info) (map[int32]int64, error) {
	parts := make([]int32, offsetCommitPartitions)
	for p := range parts {
		parts[p] = int32(p)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: offsetCommitTopic, Partitions: parts}}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberEpoch = group, -1
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: offsetCommitTopic, TopicID: topicID, Partitions: parts}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp, err := c.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("offset fetch %s: %w", group, err)
	}
	info.Version(req)
	r := resp.(*kmsg.OffsetFetchResponse)
	out := map[int32]int64{}
	if req.GetVersion() >= 8 {
		if len(r.Groups) != 1 {
			return nil, fmt.Errorf("offset fetch %s: %d groups in answer", group, len(r.Groups))
		}
		if err := errorCode("offset fetch "+group, r.Groups[0].ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range r.Groups[0].Topics {
			for _, p := range t.Partitions {
				if err := errorCode("offset fetch "+group, p.ErrorCode); err != nil {
					return nil, err
				}
				out[p.Partition] = p.Offset
			}
		}
		return out, nil
	}
	if err := errorCode("offset fetch "+group, r.ErrorCode); err != nil {
		return nil, err
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if err := errorCode("offset fetch "+group, p.ErrorCode); err != nil {
				return nil, err
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}
