// Package assigntiming decides when a consumer or streams group whose target assignment is
// behind its epoch may compute a new one. Kafka computes at most one target per assignment
// interval (1 s by default), so a member joining a group that was just assigned waits for the
// rest of that interval. coordinatord adds a quiet time: once the group has seen no epoch bump
// and no assignment for that long, a heartbeat that changes nothing computes at once. A burst of
// joins still gets one assignment after it settles (each join moves changedAt before it asks),
// and a group changing without pause stays on Kafka's interval.
package assigntiming

import "time"

// Due reports whether a target may be computed now (all times Unix ms): never assigned
// (assignedAt 0), no interval, the interval over since assignedAt, or, with a quiet time, that
// long since both assignedAt and changedAt (the last epoch bump; 0 when unknown, as after a
// load).
func Due(assignedAt, changedAt, now int64, interval, quiet time.Duration) bool {
	if assignedAt == 0 || interval <= 0 || now >= assignedAt+interval.Milliseconds() {
		return true
	}
	q := quiet.Milliseconds()
	return q > 0 && now >= assignedAt+q && now >= changedAt+q
}
