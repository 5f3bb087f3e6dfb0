// Package shard places groups on shards and composes the group state machines of one shard.
package shard

import "unicode/utf16"

// For returns the shard that owns groupID among n shards. It is exactly Kafka's placement of a
// group on a __consumer_offsets partition — abs(String.hashCode(groupID)) % n, with Kafka's
// Utils.abs mapping Integer.MIN_VALUE to 0 — so that operators reason about placement the same
// way and transaction markers addressed to partition N reach shard N.
func For(groupID string, n int32) int32 {
	return javaAbs(javaStringHash(groupID)) % n
}

// javaStringHash is java.lang.String.hashCode: a polynomial over UTF-16 code units, so a
// character outside the BMP counts as its two surrogates. Invalid UTF-8 ranges as U+FFFD, which
// is also what Java's UTF-8 decoder makes of it when the broker reads the group id.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func javaAbs(n int32) int32 {
	if n == -1<<31 {
		return 0
	}
	if n < 0 {
		return -n
	}
	return n
}
