package handlers

import (
	"context"
	"errors"
	"go.uber.org/zap"

	"github.com/coordinatord/coordinatord/internal/state/meta"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// availabilityCode maps a shard runtime error to the coordinator code Kafka uses for it
// (spec coordinator-apis §5.4): loading is COORDINATOR_LOAD_IN_PROGRESS; a FAILED shard is
// NOT_COORDINATOR, as Kafka answers for a coordinator partition in its FAILED state (the code
// exists at every version of every API that reaches a shard); a closed or overloaded shard or a
// write that was not made durable is COORDINATOR_NOT_AVAILABLE, and so is a request whose
// context ended first: Kafka maps a coordinator timeout to it, and the Java consumer treats
// REQUEST_TIMED_OUT on JoinGroup, SyncGroup and Heartbeat as fatal. Clients retry both after
// finding the coordinator again. Records too large for the log are UNKNOWN_SERVER_ERROR, as
// Kafka's CoordinatorOperationExceptionHelper answers RECORD_LIST_TOO_LARGE: retrying the same
// request cannot help (commit paths use commitWriteCode instead).
func availabilityCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, runtime.ErrRecordTooLarge):
		return kerr.UnknownServerError.Code
	case errors.Is(err, runtime.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, runtime.ErrFailed):
		return kerr.NotCoordinator.Code
	default:
		return kerr.CoordinatorNotAvailable.Code
	}
}

// catalog returns the durable topic catalog. While the metadata shard is active it is the
// snapshot the shard published after its last durable change, read with one atomic load: the
// commit and heartbeat paths never queue behind the single metadata shard. Otherwise the shard
// answers, so that a loading or failed shard still yields its own error code.
func (t *Table) catalog(ctx context.Context) (*meta.Snapshot, error) {
	if p := t.deps.Catalog; p != nil && t.deps.Meta.State() == runtime.StateActive {
		if snap := p.Load(); snap != nil {
			return snap, nil
		}
	}
	v, err := t.deps.Meta.Read(ctx, meta.Read)
	if err != nil {
		return nil, err
	}
	return v.(*meta.Snapshot), nil
}

// catalogKnowing reads the catalog and, when it lacks a topic the request names and the
// catalog can be refreshed (gateway mode: the upstream may have created the topic a moment
// ago), refreshes it once and reads again, so a commit right after an upstream CreateTopics is
// not refused with UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID.
func (t *Table) catalogKnowing(ctx context.Context, names []string, ids [][16]byte) (*meta.Snapshot, error) {
	snap, err := t.catalog(ctx)
	if err != nil || t.deps.RefreshCatalog == nil {
		return snap, err
	}
	missing := false
	for _, n := range names {
		if _, ok := snap.Topic(n); !ok && n != "" {
			missing = true
		}
	}
	for _, id := range ids {
		if _, ok := snap.TopicByID(id); !ok && id != [16]byte{} {
			missing = true
		}
	}
	if !missing {
		return snap, nil
	}
	if err := t.deps.RefreshCatalog(ctx); err != nil {
		t.log.Debug("catalog refresh for an unknown topic failed", zap.Error(err))
		return snap, nil
	}
	return t.catalog(ctx)
}

func strPtr(s string) *string { return &s }
