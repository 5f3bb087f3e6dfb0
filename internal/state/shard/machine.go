package shard

import (
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/classic"
	"github.com/coordinatord/coordinatord/internal/state/consumer"
	"github.com/coordinatord/coordinatord/internal/state/log"
	"github.com/coordinatord/coordinatord/internal/state/records"
	"github.com/coordinatord/coordinatord/internal/state/streams"
)

// Machine is everything one group shard holds. Replay routes each record to the part that owns
// its kind; that routing is the only place the parts meet on the load path.
type Machine struct {
	Offsets *offsets.State
	// Classic are the shard's classic (JoinGroup/SyncGroup) groups.
	Classic *classic.State
	// Streams are the shard's Kafka Streams groups (KIP-1071).
	Streams *streams.State
	// Consumer are the shard's KIP-848 consumer groups.
	Consumer *consumer.State
	// UnknownKinds counts records of kinds this build does not know (written by a newer
	// version); they are skipped so that a downgrade still loads, and reported after load.
	UnknownKinds int
	// PinTopologyDescriptions is set when a topology description plugin is configured: the
	// offsets sweep then keeps streams groups whose description the plugin may hold (streams
	// topology-description §6.4). Configuration, not state.
	PinTopologyDescriptions bool
	// GroupConfigs are the group-level config overrides by group id (GROUP config resources).
	GroupConfigs map[string]map[string]string
	// OnMigration is told of every online migration and refusal (log line and metric,
	// online-migration §8). Configuration, not state; nil in tests that do not look.
	OnMigration func(MigrationEvent)
	// StreamsConfig and ClassicConfig are the broker's streams and classic group configuration,
	// for the operations and timers of online migration that start without a handler.
	// Configuration, not state; zero values mean Kafka's defaults.
	StreamsConfig streams.Config
	ClassicConfig classic.Config
	// ConsumerConfig is the broker's consumer group configuration, for the classic-protocol
	// members of consumer groups (online migration). Zero value: Kafka's defaults.
	ConsumerConfig consumer.Config
	// Catalog is the topic catalog as the shard sees it now, for work that starts without a
	// request (a downgrade decided by a timer or a LeaveGroup names the members' partitions
	// through it). Configuration, not state; nil returns and a nil func mean none.
	Catalog func() consumer.Catalog

	// rebalances is the shard's in-memory rebalance history and counter, shared by its durable
	// and speculative machines (nil in machines built outside a Set: nothing is recorded).
	rebalances *rebalanceLedger
	// bumpBases is each group's shape at its last epoch bump, derived by Replay, so that a bump
	// can say what changed.
	bumpBases map[string]bumpBase
}

// NewMachine returns an empty shard machine.
func NewMachine() *Machine {
	return &Machine{Offsets: offsets.New(), Classic: classic.New(), Streams: streams.New(), Consumer: consumer.New(), GroupConfigs: map[string]map[string]string{}, bumpBases: map[string]bumpBase{}}
}

// Replay implements runtime.Machine.
func (m *Machine) Replay(offset int64, rec log.Record) error {
	kind, err := records.KindOf(rec.Key)
	if err != nil {
		return err
	}
	switch kind {
	case records.KindOffsetCommit, records.KindTxnOffset, records.KindTxnProducer:
		return m.Offsets.Replay(offset, rec)
	case records.KindStreamsGroupMetadata:
		return m.observe(offset, kind, rec, func() error { return m.Streams.Replay(rec) })
	case records.KindConsumerGroupMetadata:
		return m.observe(offset, kind, rec, func() error { return m.Consumer.Replay(rec) })
	case records.KindClassicGroup:
		return m.observe(offset, kind, rec, func() error { return m.Classic.Replay(offset, rec) })
	case records.KindStreamsMemberMetadata, records.KindStreamsTargetMetadata,
		records.KindStreamsTargetMember, records.KindStreamsCurrentMember, records.KindStreamsTopology,
		records.KindStreamsClassicMember:
		return m.Streams.Replay(rec)
	case records.KindConsumerMemberMetadata, records.KindConsumerTargetMetadata,
		records.KindConsumerTargetMember, records.KindConsumerCurrentMember, records.KindConsumerClassicMember:
		return m.Consumer.Replay(rec)
	case records.KindGroupConfig:
		return m.replayGroupConfig(rec)
	default:
		m.UnknownKinds++
		return nil
	}
}
