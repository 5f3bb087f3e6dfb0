package main

import (
	"time"

	"github.com/coordinatord/coordinatord/internal/config"
	"github.com/coordinatord/coordinatord/internal/state/streams"
	"github.com/coordinatord/coordinatord/internal/state/streams/assign"
)

// streamsConfig turns the group.streams.* keys into the streams state machine's configuration,
// with the built-in task assignors.
func streamsConfig(cfg *config.Config) streams.Config {
	s := cfg.StreamsGroup
	ms := func(v int32) time.Duration { return time.Duration(v) * time.Millisecond }
	return streams.Config{
		SessionTimeout: ms(s.SessionTimeoutMs), HeartbeatInterval: ms(s.HeartbeatIntervalMs), MaxSize: s.MaxSize,
		NumStandbyReplicas: s.NumStandbyReplicas, InitialRebalanceDelay: ms(s.InitialRebalanceDelayMs),
		AssignmentInterval: ms(s.AssignmentIntervalMs), Assignors: s.Assignors, RackAwareTags: s.RackAwareAssignmentTags,
		TaskOffsetInterval: ms(s.TaskOffsetIntervalMs), NumWarmupReplicas: s.NumWarmupReplicas,
		AcceptableRecoveryLag: s.AcceptableRecoveryLag, Lookup: assign.Lookup,
	}
}
