package scenario

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"time"

	"github.com/coordinatord/coordinatord/cmd/coordbench/kconn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The data-path scenarios measure what a client's produce and fetch cost through coordinatord's
// gateway against straight to the upstream broker: the bytes are the upstream's business, so
// these scenarios belong to the gateway suite (`coordbench gateway`), not to the coordinator
// suite, whose targets are coordinators.

// SuiteGateway names the gateway suite (Suited.Suite).
const SuiteGateway = "gateway"

// Suited is implemented by scenarios that belong to a suite other than the default one; All
// leaves them out and InSuite lists them.
type Suited interface{ Suite() string }

// dataRecordBytes is the value size of one record; a batch of N KiB holds N records.
const dataRecordBytes = 1024

// dataPartitions: one partition per client up to 16 (the largest client count measured), so
// clients do not queue behind one partition's lock on the broker.
const dataPartitions = 16

// fetchFillBytes is how much each partition of a fetch topic holds: clients read it round and
// round, so the broker serves it from the page cache, as a consumer keeping up does.
const fetchFillBytes = 2 << 20

func init() {
	for _, kb := range []int{1, 64} {
		Register(produce{batchKiB: kb})
		Register(fetch{batchKiB: kb})
	}
}

// BatchBytes is the record payload one operation of a data-path scenario moves, 0 for others:
// the report's CPU per MiB divides by it.
func BatchBytes(s Scenario) int {
	switch d := s.(type) {
	case produce:
		return d.batchKiB * dataRecordBytes
	case fetch:
		return d.batchKiB * dataRecordBytes
	}
	return 0
}

// buildBatch encodes one uncompressed v2 record batch of n records of dataRecordBytes each,
// with its length and CRC-32C filled in, as a producer sends it.
func buildBatch(n int) []byte {
	value := make([]byte, dataRecordBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var records []byte
	for i := range n {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(len(value)))
		body = append(body, value...)
		body = binary.AppendVarint(body, 0) // no headers
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: records}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	// The CRC covers everything after itself: attributes to the end.
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// dataTopic creates topic (dataPartitions partitions, one replica) unless it exists and returns
// its id and each partition's leader address as the target advertises it.
func dataTopic(ctx context.Context, env *Env, topic string) ([16]byte, map[int32]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Addr))
	if err != nil {
		return [16]byte{}, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Produce windows grow the log without bound otherwise: small segments, and retention by size.
	_, err = adm.CreateTopic(ctx, dataPartitions, 1, map[string]*string{
		"segment.bytes":   ptr(strconv.Itoa(16 << 20)),
		"retention.bytes": ptr(strconv.Itoa(64 << 20)),
	}, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return [16]byte{}, nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	deadline := time.Now().Add(topicWait)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			if ok && td.Err == nil && len(td.Partitions) == dataPartitions && allLed(td.Partitions) {
				leaders := map[int32]string{}
				for _, p := range td.Partitions {
					for _, b := range md.Brokers {
						if b.NodeID == p.Leader {
							leaders[p.Partition] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
						}
					}
				}
				if len(leaders) == dataPartitions {
					return td.ID, leaders, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return [16]byte{}, nil, fmt.Errorf("topic %s has no leader for every partition after %s (last error %v)", topic, topicWait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ptr(s string) *string { return &s }

// produceSettled produces batch to partition p (acks=all) and returns its base offset, retrying
// the errors a just-created topic answers until its leader knows it is one.
func produceSettled(ctx context.Context, c *kconn.Conn, topic string, id [16]byte, p int32, batch []byte) (int64, error) {
	deadline := time.Now().Add(topicWait)
	for {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30000
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = topic, id
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = p, batch
		t.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
		req.Topics = []kmsg.ProduceRequestTopic{t}
		resp, err := c.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		rp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		err = kerr.ErrorForCode(rp.ErrorCode)
		if err == nil {
			return rp.BaseOffset, nil
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return 0, fmt.Errorf("produce to %s-%d: %w", topic, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produce: every client sends Produce requests (acks=1) of one batch of batchKiB records of
// 1 KiB to its own partition, on its own connection to the partition's leader.
type produce struct{ batchKiB int }

func (p produce) Name() string { return fmt.Sprintf("produce-%dk", p.batchKiB) }
func (p produce) Description() string {
	return fmt.Sprintf("One operation is a Produce request (acks=1, uncompressed) of one record batch of %d "+
		"record(s) of 1 KiB to the client's own partition of a %d-partition topic, on the client's own connection "+
		"to the partition's leader as the target advertises it (through the gateway: the leader's gateway port).",
		p.batchKiB, dataPartitions)
}
func (produce) Needs() []int16        { return []int16{0, 3, 19} }
func (produce) DefaultClients() []int { return []int{1, 16} }
func (produce) Suite() string         { return SuiteGateway }

func (p produce) Setup(ctx context.Context, env *Env) (Instance, error) {
	topic := fmt.Sprintf("coordbench-produce-%dk", p.batchKiB)
	id, leaders, err := dataTopic(ctx, env, topic)
	if err != nil {
		return nil, err
	}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return env.Dial(ctx, leaders[int32(i%dataPartitions)], i)
	})
	if err != nil {
		return nil, err
	}
	batch := buildBatch(p.batchKiB)
	for i, c := range conns {
		if _, err := produceSettled(ctx, c, topic, id, int32(i%dataPartitions), batch); err != nil {
			closeAll(conns)
			return nil, err
		}
	}
	return &produceRun{env: env, conns: conns, topic: topic, id: id, batch: batch}, nil
}

type produceRun struct {
	env   *Env
	conns []*kconn.Conn
	topic string
	id    [16]byte
	batch []byte
}

func (r *produceRun) Op(ctx context.Context, i int) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = r.topic, r.id
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = int32(i%dataPartitions), r.batch
	t.Partitions = []kmsg.ProduceRequestTopicPartition{pp}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	resp, err := r.conns[i].Request(ctx, req)
	if err != nil {
		return err
	}
	if i == 0 {
		r.env.Info.Version(req)
	}
	for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range rt.Partitions {
			if err := errorCode("produce", rp.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *produceRun) Teardown(context.Context) error {
	closeAll(r.conns)
	return nil
}

// fetch: every client reads its own partition batch by batch (partition max bytes = one batch,
// so each answer carries exactly one), wrapping to the start at the end. The topic is filled
// once, and read from the page cache afterwards.
type fetch struct{ batchKiB int }

func (f fetch) Name() string { return fmt.Sprintf("fetch-%dk", f.batchKiB) }
func (f fetch) Description() string {
	return fmt.Sprintf("One operation is a Fetch request (no fetch session, max wait 0) answered with one record batch "+
		"of %d record(s) of 1 KiB from the client's own partition of a %d-partition topic filled with %d MiB per "+
		"partition beforehand, read round and round (from the page cache), on the client's own connection to the "+
		"partition's leader as the target advertises it.", f.batchKiB, dataPartitions, fetchFillBytes>>20)
}
func (fetch) Needs() []int16        { return []int16{0, 1, 3, 19} }
func (fetch) DefaultClients() []int { return []int{1, 16} }
func (fetch) Suite() string         { return SuiteGateway }

func (f fetch) Setup(ctx context.Context, env *Env) (Instance, error) {
	topic := fmt.Sprintf("coordbench-fetch-%dk", f.batchKiB)
	id, leaders, err := dataTopic(ctx, env, topic)
	if err != nil {
		return nil, err
	}
	conns, err := dialAll(ctx, env.Clients, func(ctx context.Context, i int) (*kconn.Conn, error) {
		return env.Dial(ctx, leaders[int32(i%dataPartitions)], i)
	})
	if err != nil {
		return nil, err
	}
	r := &fetchRun{env: env, conns: conns, topic: topic, id: id, perBatch: int64(f.batchKiB),
		maxBytes: int32(f.batchKiB * dataRecordBytes), next: make([]int64, env.Clients)}
	if err := r.fill(ctx, leaders, buildBatch(f.batchKiB)); err != nil {
		closeAll(conns)
		return nil, err
	}
	return r, nil
}

type fetchRun struct {
	env      *Env
	conns    []*kconn.Conn
	topic    string
	id       [16]byte
	perBatch int64
	maxBytes int32
	next     []int64 // per client: the offset of its next fetch; only client i touches next[i]
}

// fill produces batches into every partition until it holds fetchFillBytes (once per topic: a
// later window finds it full).
func (r *fetchRun) fill(ctx context.Context, leaders map[int32]string, batch []byte) error {
	want := int64(fetchFillBytes/dataRecordBytes) / r.perBatch * r.perBatch
	for p := range int32(dataPartitions) {
		c, err := r.env.Dial(ctx, leaders[p], -1)
		if err != nil {
			return err
		}
		err = func() error {
			defer c.Close()
			for {
				base, err := produceSettled(ctx, c, r.topic, r.id, p, batch)
				if err != nil {
					return err
				}
				if base+r.perBatch >= want {
					return nil
				}
			}
		}()
		if err != nil {
			return fmt.Errorf("filling %s partition %d: %w", r.topic, p, err)
		}
	}
	return nil
}

func (r *fetchRun) Op(ctx context.Context, i int) error {
	p := int32(i % dataPartitions)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, r.maxBytes
	req.SessionEpoch = -1 // no fetch session: every request names its partition
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = r.topic, r.id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, r.next[i], r.maxBytes
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
	t.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	req.Topics = []kmsg.FetchRequestTopic{t}
	resp, err := r.conns[i].Request(ctx, req)
	if err != nil {
		return err
	}
	if i == 0 {
		r.env.Info.Version(req)
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := errorCode("fetch", fr.ErrorCode); err != nil {
		return err
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return errors.New("fetch: answer without the partition")
	}
	rp := fr.Topics[0].Partitions[0]
	if err := errorCode("fetch", rp.ErrorCode); err != nil {
		return err
	}
	if len(rp.RecordBatches) < int(r.maxBytes) {
		return fmt.Errorf("fetch at %d: %d bytes of records, want one batch of at least %d", r.next[i], len(rp.RecordBatches), r.maxBytes)
	}
	r.next[i] += r.perBatch
	if r.next[i] >= rp.HighWatermark {
		r.next[i] = rp.LogStartOffset
	}
	return nil
}

func (r *fetchRun) Teardown(context.Context) error {
	closeAll(r.conns)
	return nil
}
