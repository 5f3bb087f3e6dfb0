package segment

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Defaults, named after the config keys they stand for.
const (
	// DefaultSegmentBytes is log.segment.bytes' default (internal/config's).
	DefaultSegmentBytes = 128 << 20
	// DefaultDeleteRetention is log.cleaner.delete.retention.ms' default (Kafka's, one day).
	DefaultDeleteRetention = 24 * time.Hour
	// DefaultMinCleanableRatio is log.cleaner.min.cleanable.ratio's default (Kafka's).
	DefaultMinCleanableRatio = 0.5
	// DefaultMaxBatchBytes is message.max.bytes' default (Kafka's).
	DefaultMaxBatchBytes = 1048588

	minSegmentBytes = 4096
)

// Options configure a Store. A zero field means its default where zero is not a valid setting
// (SegmentBytes, MaxBatchBytes, Now, Logger, FS); FlushInterval and DeleteRetention take zero
// literally, as their config keys do.
type Options struct {
	// Dir is the root directory of the log (log.dirs; one directory).
	Dir string
	// Shards is the number of shards (offsets.topic.num.partitions). It is written to
	// meta.properties on first open; opening the directory with another count is refused.
	Shards int32
	// SegmentBytes is the size at which the active segment rolls (log.segment.bytes).
	SegmentBytes int64
	// FlushInterval is log.flush.interval.ms. Zero, the default, fsyncs every write before
	// reporting it durable. Any positive value is UNSAFE: appends are reported durable once
	// written to the OS, and fsynced only every FlushInterval, so a power failure or kernel crash
	// can lose acknowledged records. It is logged as unsafe when the Store opens.
	FlushInterval time.Duration
	// DeleteRetention is how long compaction keeps a tombstone after the batch holding it was
	// appended (log.cleaner.delete.retention.ms, default DefaultDeleteRetention). Zero drops a
	// tombstone at the first compaction that sees it sealed.
	DeleteRetention time.Duration
	// MinCleanableRatio is log.cleaner.min.cleanable.ratio: Compact rewrites the sealed
	// segments only when the share of their bytes not yet compacted is above it (or a compacted
	// tombstone has expired). Zero compacts whenever anything is new; the server's default is
	// DefaultMinCleanableRatio. Between 0 and 1.
	MinCleanableRatio float64
	// MaxBatchBytes caps the encoded size of one appended batch (message.max.bytes); larger
	// appends fail with log.ErrBatchTooLarge. At most MaxFrameBytes.
	MaxBatchBytes int
	// Now is the clock for batch append times and tombstone retention (default time.Now).
	Now func() time.Time
	// Logger receives recovery warnings and failures (default zap.NewNop()).
	Logger *zap.Logger
	// FS is the file system (default OSFS{}); tests pass a *MemFS.
	FS FS
	// RoundObserver, when set, is called with the number of shard groups each journal round
	// made durable with its one fsync.
	RoundObserver func(groups int)

	// Journals is the number of journals group commits go through (shard i uses journal
	// i % Journals); each makes a round of commits durable with one fsync. Zero means
	// DefaultJournals (one for the store). Ignored in the relaxed flush mode, which has no
	// journal.
	Journals int

	// JournalWait is the longest a journal round is held back for the groups the previous
	// round says are on their way (docs/storage.md, "Gathering a round"). Zero means
	// DefaultJournalWait; negative never waits.
	JournalWait time.Duration

	journalBytes int64 // journal file size that starts a new file (tests make it small)
	// gatherTimer starts the bound of one gathering wait (default: a timer); tests replace it
	// to see the waits and decide when they end.
	gatherTimer func(d time.Duration) (fired <-chan time.Time, stop func())
}

// withDefaults validates o and fills in defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("segment log: log.dirs is empty")
	}
	if o.Shards <= 0 {
		return o, fmt.Errorf("segment log: shard count %d must be positive", o.Shards)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentBytes < minSegmentBytes {
		return o, fmt.Errorf("segment log: log.segment.bytes %d below minimum %d", o.SegmentBytes, minSegmentBytes)
	}
	if o.FlushInterval < 0 {
		return o, fmt.Errorf("segment log: log.flush.interval.ms %v is negative", o.FlushInterval)
	}
	if o.DeleteRetention < 0 {
		return o, fmt.Errorf("segment log: log.cleaner.delete.retention.ms %v is negative", o.DeleteRetention)
	}
	if !(o.MinCleanableRatio >= 0 && o.MinCleanableRatio <= 1) {
		return o, fmt.Errorf("segment log: log.cleaner.min.cleanable.ratio %v outside [0, 1]", o.MinCleanableRatio)
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MaxBatchBytes < minFrameLen+4 || o.MaxBatchBytes > MaxFrameBytes {
		return o, fmt.Errorf("segment log: message.max.bytes %d outside [%d, %d]", o.MaxBatchBytes, minFrameLen+4, MaxFrameBytes)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.journalBytes == 0 {
		o.journalBytes = defaultJournalBytes
	}
	if o.Journals == 0 {
		o.Journals = DefaultJournals
	}
	if o.JournalWait == 0 {
		o.JournalWait = DefaultJournalWait
	}
	if o.Journals < 0 {
		return o, fmt.Errorf("segment log: %d journals", o.Journals)
	}
	return o, nil
}
