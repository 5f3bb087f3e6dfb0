//go:build race

package kafkalog

// raceEnabled: under the race detector sync.Pool drops a random share of what is put back.
const raceEnabled = true
