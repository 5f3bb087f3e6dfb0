// Package log defines the storage seam under every shard: an append-only, per-shard sequence of
// key/value records with strictly increasing offsets. Backends (the embedded segmented log, a
// Kafka topic) implement it; the shard runtime is the only caller.
//
// Durability is asynchronous: Append only hands records to the backend's syncer and returns the
// offsets they will have; the backend later reports, through Callbacks, the highest offset that is
// durable or the error that made the log unusable. A success answered to a client must wait for
// that report.
package log

import (
	"errors"
	"fmt"
)

// Record is one key/value fact. A nil Value is a tombstone: it deletes Key.
type Record struct {
	Key   []byte
	Value []byte
}

// Tombstone reports whether the record deletes its key.
func (r Record) Tombstone() bool { return r.Value == nil }

// Callbacks carry the backend's asynchronous reports to the shard. They are called from the
// backend's own goroutines and must not block for long: the runtime posts them to its inbox.
type Callbacks struct {
	// Durable reports that every record up to and including offset is durable.
	Durable func(offset int64)
	// Failed reports that appends can no longer be made durable. Records appended after the last
	// Durable report are lost; nothing past it may be acknowledged. It is the last report: the
	// backend calls no callback afterwards and every later Append returns an error matching
	// ErrFailed.
	Failed func(err error)
	// Lost reports a recoverable write error (for example ENOSPC while writing). Every record
	// handed to the backend and not yet reported durable, offsets err.First through err.Last, is
	// gone: it will never be reported durable and will not be replayed. The backend has already
	// cut its storage back to the last durable record and stays usable, but until the shard calls
	// resume every Append fails with err, so nothing computed from the lost records can reach the
	// log. The shard drops its speculative state, fails the operations waiting on offsets
	// >= err.First with a retriable error, then calls resume (from the shard goroutine). Offsets
	// are not reused: the next Append after resume continues after err.Last.
	//
	// Lost may be nil; the backend then reports such an error through Failed and stays failed,
	// which is safe but gives up a shard a full disk could have kept.
	Lost func(err *WriteError, resume func())
}

// Backend opens the log of one shard.
type Backend interface {
	Open(shard int32, cb Callbacks) (Log, error)
}

// Log is one shard's record log. Load, Append and Close are called from a single goroutine (the
// shard's); Compact runs on another one, concurrently with Append, one call at a time, and Close
// waits for it.
type Log interface {
	// Load replays every durable record in offset order and returns the offset the next appended
	// record will get. fn returning an error stops the load with that error.
	Load(fn func(offset int64, rec Record) error) (next int64, err error)
	// Append hands a batch to the syncer without waiting for the disk and returns the offset of
	// its last record. The batch is the unit of atomicity: after a crash either all of it is
	// there or none. It fails at once if the log has failed or is closed.
	Append(recs []Record) (last int64, err error)
	// Compact rewrites sealed history so that only the newest record per key remains and old
	// tombstones are dropped; replay time then follows live state, not history. It does nothing
	// when there is nothing to drop. Records appended meanwhile are unaffected, and it returns
	// early (ErrClosed) when Close is called.
	Compact() error
	// Close waits for in-flight appends to become durable (or fail) and releases the log.
	Close() error
}

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("log closed")

// ErrFailed is matched (errors.Is) by the error Append returns once the log has failed for good
// (see Callbacks.Failed). The shard must go FAILED; only reopening the log can recover.
var ErrFailed = errors.New("log failed")

// BatchChecker is implemented by backends that limit the size of a batch. The shard calls it
// before it applies an operation's records to its speculative state, so that a batch the log
// would refuse is turned down without disturbing anything else on the shard.
type BatchChecker interface {
	// CheckBatch returns an error matching ErrBatchTooLarge if Append would refuse recs for
	// their size.
	CheckBatch(recs []Record) error
}

// ErrBatchTooLarge is matched by the error Append returns for a batch whose encoding exceeds the
// backend's batch size limit. Nothing was appended and the log is still usable.
var ErrBatchTooLarge = errors.New("batch too large")

// WriteError is a recoverable write failure: the records at offsets First through Last were
// handed to the backend but will never be durable. See Callbacks.Lost. It is retriable: the
// same operation may succeed once the cause (usually a full disk) is gone.
type WriteError struct {
	Shard       int32
	First, Last int64
	Err         error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("shard %d: write failed, offsets %d..%d lost: %v", e.Shard, e.First, e.Last, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Retriable reports that the operation that produced these records may be retried.
func (e *WriteError) Retriable() bool { return true }

// CorruptError reports stored log data that failed verification where recovery must not repair
// it by truncation (anywhere but the torn tail of the newest segment). The shard goes FAILED; an
// operator inspects File at byte Offset (`coordinatord log verify`).
type CorruptError struct {
	Shard  int32
	File   string // path of the file holding the bad data
	Offset int64  // byte offset of the bad batch or header within File
	Reason string // what check failed, e.g. "crc mismatch"
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("shard %d: corrupt log %s at byte %d: %s", e.Shard, e.File, e.Offset, e.Reason)
}

// LoadAborter is implemented by logs whose Load can wait long (on a remote cluster): AbortLoad,
// called from another goroutine, makes a Load in progress return an error soon, without
// making anything durable or fencing anyone afterwards.
type LoadAborter interface {
	AbortLoad()
}

// ReplayGate is implemented by logs whose Load waits on a remote cluster before it replays
// anything (the kafka log's fence and marker): the gate set before Load is called once that
// wait is over, before the first record, so that a bound on concurrent replays (the runtime's
// load slots, sized for the CPU) is not held by loads waiting on the network. An error from
// the gate ends the Load with it. Logs without it replay from the start of Load.
type ReplayGate interface {
	SetReplayGate(gate func() error)
}

// Abandoner is implemented by logs whose Close waits for a write in flight to a remote cluster:
// Abandon, called from another goroutine once nobody waits for that write any more (the shard
// was disowned, or its Close ran out of time), gives it up at once and sends nothing more, so
// that a write held back by an outage cannot reach the cluster once it is back, when a new
// owner may have loaded the shard. The write is never reported durable; whether it became
// visible is decided as after a crash.
type Abandoner interface {
	Abandon()
}
