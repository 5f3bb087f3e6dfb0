package shard

import (
	"github.com/coordinatord/coordinatord/internal/offsets"
	"github.com/coordinatord/coordinatord/internal/state/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteOffsetsResult is OffsetDelete's answer from the group: a group-level code, or one code
// per requested partition in request order.
type DeleteOffsetsResult struct {
	Code  int16
	Codes []int16
}

// DeleteOffsets removes a group's committed and staged offsets for the given partitions (spec
// coordinator-apis §3.4): a missing or dead group is GROUP_ID_NOT_FOUND, a group whose members'
// subscriptions cannot be read is NON_EMPTY_GROUP, and partitions of topics the group is
// subscribed to get GROUP_SUBSCRIBED_TO_TOPIC. Others get NONE, whether or not an offset
// existed.
func DeleteOffsets(group string, parts []offsets.TopicPartition) runtime.WriteOp[*Machine] {
	return func(_ *runtime.Ctx[*Machine], m *Machine) runtime.Result {
		rules, exists := m.offsetRules(group)
		switch {
		case !exists || rules.Dead:
			return runtime.Result{Response: DeleteOffsetsResult{Code: kerr.GroupIDNotFound.Code}}
		case rules.NonEmpty:
			return runtime.Result{Response: DeleteOffsetsResult{Code: kerr.NonEmptyGroup.Code}}
		}
		codes := make([]int16, len(parts))
		del := make([]offsets.TopicPartition, 0, len(parts))
		seen := map[offsets.TopicPartition]bool{}
		for i, tp := range parts {
			if rules.Subscribed != nil && rules.Subscribed(tp.Topic) {
				codes[i] = kerr.GroupSubscribedToTopic.Code
				continue
			}
			if !seen[tp] {
				seen[tp] = true
				del = append(del, tp)
			}
		}
		var d divisible
		d.each(m.Offsets.DeleteRecords(group, del)...)
		return runtime.Result{Records: d.recs, Units: d.units, Response: DeleteOffsetsResult{Codes: codes}}
	}
}
