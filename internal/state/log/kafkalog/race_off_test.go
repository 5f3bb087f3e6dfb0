//go:build !race

package kafkalog

const raceEnabled = false
