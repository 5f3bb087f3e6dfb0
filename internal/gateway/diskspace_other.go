//go:build !(linux || darwin)

package gateway

// diskSpace is unknown here (Kafka's -1).
func diskSpace(string) (total, usable int64) { return -1, -1 }
