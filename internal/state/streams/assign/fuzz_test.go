package assign

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// byteReader hands out bytes of the fuzz input, zeros once it runs out.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) intn(n int) int { return int(r.next()) % n }

// inputFromBytes builds an arbitrary input: up to 4 subtopologies of up to 15 tasks, up to 11
// members on up to 6 processes, standby and warm-up configs that may be negative, and current
// tasks (any role, partitions possibly out of range or negative) with offsets.
func inputFromBytes(data []byte) Input {
	r := &byteReader{b: data}
	var in Input
	nsubs := 1 + r.intn(4)
	for i := range nsubs {
		b := r.next()
		in.Subtopologies = append(in.Subtopologies, Subtopology{ID: fmt.Sprint(i), Tasks: int32(b % 16), Stateful: b&0x80 != 0})
	}
	in.Configs = Configs{
		NumStandbyReplicas:    int32(int8(r.next())) % 5,
		MaxWarmupReplicas:     int32(int8(r.next())) % 6,
		AcceptableRecoveryLag: int64(int8(r.next())),
	}
	nmembers := r.intn(12)
	nprocs := 1 + r.intn(6)
	for i := range nmembers {
		m := Member{ID: fmt.Sprintf("m%d", i), ProcessID: fmt.Sprintf("p%d", r.intn(nprocs))}
		for range r.intn(16) {
			role := r.intn(4)
			sub := in.Subtopologies[r.intn(nsubs)].ID
			p := int32(int8(r.next())) % 17
			switch role {
			case 0:
				m.Active = addTask(m.Active, sub, p)
			case 1:
				m.Standby = addTask(m.Standby, sub, p)
			case 2:
				m.Warmup = addTask(m.Warmup, sub, p)
			case 3:
				if m.TaskOffsets == nil {
					m.TaskOffsets, m.TaskEndOffsets = map[Task]int64{}, map[Task]int64{}
				}
				m.TaskOffsets[Task{sub, p}] = int64(int8(r.next()))
				m.TaskEndOffsets[Task{sub, p}] = int64(int8(r.next()))
			}
		}
		in.Members = append(in.Members, m)
	}
	return in
}

// FuzzAssign checks the invariants of spec §6.4 (and the warm-up budget of §6.7) and determinism
// for both assignors on inputs built from arbitrary bytes.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0x86, 1, 2, 10, 3, 3, 4, 0, 0, 0, 1, 0, 2, 3, 0, 3, 5, 50, 60, 1, 1, 2, 0})
	f.Add([]byte{3, 0x8f, 0x0f, 0x85, 0x03, 2, 3, 100, 11, 5, 15, 0, 0, 1, 2, 0, 1, 3, 2, 0, 4, 1, 1, 7, 3, 2, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := inputFromBytes(data)
		for _, a := range assignors {
			out, err := a.Assign(in)
			if err != nil {
				if len(in.Members) == 0 && errors.Is(err, ErrNoMembers) {
					continue
				}
				t.Fatalf("%s: %v", a.Name(), err)
			}
			if err := checkInvariants(in, out); err != nil {
				t.Fatalf("%s: %v\n%s", a.Name(), err, render(out))
			}
			if again, _ := a.Assign(in); !reflect.DeepEqual(out, again) {
				t.Fatalf("%s: not deterministic", a.Name())
			}
			if _, ok := a.(Sticky); ok && NeedsFollowUp(out) {
				t.Fatalf("sticky assigned warm-ups")
			}
		}
	})
}
