package handlers

// distinctGroups returns ids without repeats, in first-seen order, and, only when there were
// repeats, where each requested id's answer is among the distinct ones. A group named many
// times in one request is then looked up and described once: a few bytes of request must not
// buy a copy of a large group's members per repeat. Each repeat is still answered, as Kafka
// answers every entry.
func distinctGroups(ids []string) (distinct []string, at []int) {
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		if j, ok := seen[id]; ok {
			if at == nil {
				at = make([]int, i, len(ids))
				for k := range at {
					at[k] = k
				}
			}
			at = append(at, j)
			continue
		}
		seen[id] = len(distinct)
		distinct = append(distinct, id)
		if at != nil {
			at = append(at, len(distinct)-1)
		}
	}
	return distinct, at
}

// expandAnswers lays the distinct groups' answers out in request order (see distinctGroups).
// Repeats share their first answer's nested slices, so they cost one entry each.
func expandAnswers[T any](answers []T, at []int) []T {
	if at == nil {
		return answers
	}
	out := make([]T, len(at))
	for i, j := range at {
		out[i] = answers[j]
	}
	return out
}
