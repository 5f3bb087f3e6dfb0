package shard

import "testing"

// Expected values computed with the JDK: String.hashCode and Kafka's Utils.abs.
func TestForMatchesKafka(t *testing.T) {
	cases := []struct {
		id        string
		hash      int32
		of50, of7 int32
	}{
		{"", 0, 0, 0},
		{"g", 103, 3, 5},
		{"group-1", 293427299, 49, 4},
		{"my-streams-app", -1550722138, 38, 0},
		{"consumer-group-42", 277006467, 17, 3},
		{"Ünïcødé-grüppe", 2063181706, 6, 5},
		{"日本語グループ", -305235731, 31, 3},
		{"🦄emoji", 398763776, 26, 5},              // surrogate pair
		{"polygenelubricants", -2147483648, 0, 0}, // Integer.MIN_VALUE maps to 0, not a negative shard
		{"GydZG_", -2147483648, 0, 0},
		{"DESIGNING WORKHOUSES", -2147483648, 0, 0},
	}
	for _, c := range cases {
		if h := javaStringHash(c.id); h != c.hash {
			t.Errorf("hash(%q) = %d, Java says %d", c.id, h, c.hash)
		}
		if s := For(c.id, 50); s != c.of50 {
			t.Errorf("For(%q, 50) = %d, Kafka says %d", c.id, s, c.of50)
		}
		if s := For(c.id, 7); s != c.of7 {
			t.Errorf("For(%q, 7) = %d, Kafka says %d", c.id, s, c.of7)
		}
	}
}

func FuzzForInRange(f *testing.F) {
	f.Add("group", int32(50))
	f.Fuzz(func(t *testing.T, id string, n int32) {
		if n <= 0 {
			return
		}
		if s := For(id, n); s < 0 || s >= n {
			t.Fatalf("For(%q, %d) = %d", id, n, s)
		}
	})
}
