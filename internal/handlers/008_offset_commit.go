package handlers

import (
	"context"
	"github.com/coordinatord/coordinatord/internal/acl"

	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/shard"
	"github.com/coordinatord/coordinatord/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit stores committed offsets (spec coordinator-apis §3.2): partitions of unknown
// topics are refused one by one, the group's rules decide for the rest, and a success is only
// answered once the commit is durable.
func (t *Table) offsetCommit(ctx context.Context, r *wire.Request) kmsg.Response {
	req := r.Body.(*kmsg.OffsetCommitRequest)

	if !t.groupAllowed(r, req.Group, acl.OpRead) {
		return commitFailed(req, req.ResponseKind().(*kmsg.OffsetCommitResponse), kerr.GroupAuthorizationFailed.Code)
	}
	retention := int64(-1)
	if r.Version >= 2 && r.Version <= 4 && req.RetentionTimeMillis != -1 {
		retention = req.RetentionTimeMillis
	}
	// Every slice here is sized once from the request: appending partition by partition was
	// most of this handler's allocations on the commit hot path.
	total := 0
	for _, rt := range req.Topics {
		total += len(rt.Partitions)
	}
	// A commit names one topic nearly always: its per-topic slices then live on the stack.
	var oneTopic [1]commitTopic
	topics := oneTopic[:]
	if len(req.Topics) != 1 {
		topics = make([]commitTopic, len(req.Topics))
	}
	all := make([]shard.CommitPartition, 0, total)
	for i, rt := range req.Topics {
		start := len(all)
		for _, p := range rt.Partitions {
			all = append(all, shard.CommitPartition{
				TopicPartition: offsets.TopicPartition{Partition: p.Partition},
				Offset:         p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, RetentionMs: retention,
			})
		}
		topics[i] = commitTopic{name: rt.Topic, id: rt.TopicID, parts: all[start:len(all):len(all)]}
	}
	// One array holds every partition's code, in request order, and after them the group's
	// answers for the partitions passed on, which the shard op writes in place (CommitRequest.Codes).
	codeArray := make([]int16, 2*total)
	var oneCodes [1][]int16
	codesInto := oneCodes[:]
	if len(req.Topics) != 1 {
		codesInto = nil
	}
	snap, catErr := t.catalogForCommit(ctx, r.Version >= 10, topics)
	codes, commit := resolveCommit(snap, catErr, availabilityCode, r.Version >= 10, topics, all, codesInto, codeArray[:total], func(topic string) bool {
		return !t.topicAllowed(r, topic, acl.OpRead)
	})

	groupCodes := codeArray[total : total+len(commit)]
	var err error
	if len(commit) > 0 {
		_, err = t.deps.Groups.For(req.Group).Write(ctx, shard.CommitOffsets(shard.CommitRequest{
			Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
			Version: r.Version, Partitions: commit, MaxMetadata: t.deps.Limits.OffsetMetadataMaxBytes,
			Codes: groupCodes,
		}))
	}
	answerCodes(codes, groupCodes, err, commitWriteCode)
	return commitAnswer(req, codes, total)
}

// smallCommitParts is how many partitions of a one-topic commit are answered from one
// allocation (commitAnswerOne); a consumer commits the partitions it owns, usually a few.
const smallCommitParts = 8

// commitAnswerOne is the answer to a commit of one topic and at most smallCommitParts
// partitions in a single object: the response, its topic and the partitions were three
// allocations on every commit (issue 12). The wire encodes the answer and keeps nothing of it.
type commitAnswerOne struct {
	resp  kmsg.OffsetCommitResponse
	topic [1]kmsg.OffsetCommitResponseTopic
	parts [smallCommitParts]kmsg.OffsetCommitResponseTopicPartition
}

// commitAnswer builds the response from every partition's code (codes[i][j] answers topic i,
// partition j of req).
func commitAnswer(req *kmsg.OffsetCommitRequest, codes [][]int16, total int) *kmsg.OffsetCommitResponse {
	var (
		resp    *kmsg.OffsetCommitResponse
		topics  []kmsg.OffsetCommitResponseTopic
		answers []kmsg.OffsetCommitResponseTopicPartition
	)
	if len(req.Topics) == 1 && total <= smallCommitParts {
		one := &commitAnswerOne{}
		resp, topics, answers = &one.resp, one.topic[:0], one.parts[:0]
	} else {
		resp = new(kmsg.OffsetCommitResponse)
		topics = make([]kmsg.OffsetCommitResponseTopic, 0, len(req.Topics))
		// Every topic's partitions in one array, as the request side does.
		answers = make([]kmsg.OffsetCommitResponseTopicPartition, 0, total)
	}
	resp.Default()
	resp.Version = req.Version
	resp.Topics = topics
	for i, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		start := len(answers)
		for j, p := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, offsetCommitCode(req.Version, codes[i][j])
			answers = append(answers, sp)
		}
		st.Partitions = answers[start:len(answers):len(answers)]
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// commitFailed answers every partition with one code: a request-wide failure, which
// OffsetCommit has no top-level field for.
func commitFailed(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, code int16) kmsg.Response {
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
