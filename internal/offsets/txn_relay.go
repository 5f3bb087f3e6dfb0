package offsets

// OpenProducerEpochs maps every producer with staged offsets on this shard to the highest epoch
// it staged with: what the gateway's marker relay must resolve after a restart.
func (s *State) OpenProducerEpochs() map[int64]int16 {
	out := make(map[int64]int16, len(s.txns))
	for pid, t := range s.txns {
		for _, topics := range t.groups {
			for _, parts := range topics {
				for _, p := range parts {
					if e, ok := out[pid]; !ok || p.ProducerEpoch > e {
						out[pid] = p.ProducerEpoch
					}
				}
			}
		}
	}
	return out
}
