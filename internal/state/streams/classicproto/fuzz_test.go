package classicproto

import (
	"bytes"
	"errors"
	"testing"
)

// The decoders take bytes straight from clients (JoinGroup metadata) and from stored classic
// groups: whatever the input, they return a value or an ErrMalformed error, never panic, and what
// they accept re-encodes into bytes that decode to the same value.

func FuzzDecodeSubscription(f *testing.F) {
	for v := int32(1); v <= 12; v++ {
		s := bLike(v)
		s.ClientTags = []ClientTag{{"k", "v"}}
		b, _ := s.Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSubscription(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		_ = s.Validate()
		enc, err := s.Encode()
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		again, err := DecodeSubscription(enc)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v", err)
		}
		enc2, _ := again.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	for v := int32(1); v <= 11; v++ {
		b, _ := sampleAssignment(v).Encode()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAssignment(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		enc, err := a.Encode()
		if err != nil {
			// A raw NUL byte decodes to U+0000, which writeUTF spends two bytes on: a string
			// near the 65535-byte limit can outgrow it. Refusing that is the encoder's job.
			return
		}
		again, err := DecodeAssignment(enc)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v\n%x", err, enc)
		}
		enc2, _ := again.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}

func FuzzDecodeMember(f *testing.F) {
	user, _ := bLike(11).Encode()
	b, _ := EncodeMemberAssignment(3, []TopicPartition{{"input", 1}}, sampleAssignment(11))
	f.Add(append([]byte{0, 0, 0, 0, 0, 1, 0, 5, 'i', 'n', 'p', 'u', 't', 0, 0, 0, byte(len(user))}, user...))
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeMember(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("member: %v does not wrap ErrMalformed", err)
		}
		if _, _, _, err := DecodeMemberAssignment(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("assignment: %v does not wrap ErrMalformed", err)
		}
	})
}
