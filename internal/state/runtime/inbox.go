package runtime

import "sync"

// inboxFirstRing is the ring an inbox allocates on its first event: a shard under steady load
// rarely holds more than a few events per connection sending to it.
const inboxFirstRing = 16

// inbox is a shard's lane of operations, timer fires and async results. Its ring starts empty,
// doubles up to the bound as a burst needs, and halves once a stretch of use filled at most a
// quarter of it. A fixed buffer of the bound (a channel of 4096 events, 96 bytes each) was 20 MB
// of a 50-shard node's heap whether or not anything was ever queued, and with the GC's growth
// target (GOGC) that heap counts twice in the resident memory of a node holding 1M offsets.
//
// Only the shard goroutine takes events out; any goroutine puts them in.
type inbox[M Machine] struct {
	mu    sync.Mutex
	ring  []event[M] // len is the capacity; events are ring[head], ring[head+1], ... (wrapping)
	head  int
	n     int
	bound int
	// closed: the shard has stopped; nothing is queued any more.
	closed bool
	// waiting counts posters blocked on room (offer refuses instead of waiting).
	waiting int
	// peak and taken describe the stretch of use since the ring last changed or was judged:
	// the most events it held, and how many were taken out.
	peak, taken int

	// ready holds a token once something was queued since the shard last looked, in this inbox
	// or in the shard's priority lane (Shard.post): the shard waits on it alone.
	ready chan struct{}
	// room holds a token once an event was taken out of a full inbox that a poster waits on.
	room chan struct{}
}

func newInbox[M Machine](bound int) *inbox[M] {
	return &inbox[M]{bound: bound, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// put queues e unless the inbox is full or closed. Called with mu held.
func (q *inbox[M]) put(e event[M]) {
	if q.n == len(q.ring) {
		q.resize(min(max(2*len(q.ring), inboxFirstRing), q.bound))
	}
	q.ring[q.at(q.n)] = e
	q.n++
	q.peak = max(q.peak, q.n)
}

// at is the ring index of the i-th queued event (i < len(ring)).
func (q *inbox[M]) at(i int) int {
	i += q.head
	if i >= len(q.ring) {
		i -= len(q.ring)
	}
	return i
}

// resize moves the queued events to the start of a ring of size c (c >= n).
func (q *inbox[M]) resize(c int) {
	ring := make([]event[M], c)
	for i := range q.n {
		ring[i] = q.ring[q.at(i)]
	}
	q.ring, q.head = ring, 0
	q.peak, q.taken = q.n, 0
}

// wake leaves the shard a token; one is enough however many events came with it.
func (q *inbox[M]) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// offer queues e without waiting: false when the inbox holds its bound already; closed when the
// shard has stopped (e was not queued either way).
func (q *inbox[M]) offer(e event[M]) (queued, closed bool) {
	q.mu.Lock()
	if q.closed || q.n >= q.bound {
		closed = q.closed
		q.mu.Unlock()
		return false, closed
	}
	q.put(e)
	q.mu.Unlock()
	q.wake()
	return true, false
}

// post queues e, waiting for room while the inbox is full, and gives up once stop is closed or
// the shard has stopped.
func (q *inbox[M]) post(e event[M], stop <-chan struct{}) {
	q.mu.Lock()
	for !q.closed && q.n >= q.bound {
		q.waiting++
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-stop:
			q.mu.Lock()
			q.waiting--
			q.mu.Unlock()
			return
		}
		q.mu.Lock()
		q.waiting--
	}
	closed := q.closed
	if !closed {
		q.put(e)
	}
	// One token wakes one poster: pass it on while there is room for the next, or once closed
	// (each poster then gives up in turn).
	more := q.waiting > 0 && (closed || q.n < q.bound)
	q.mu.Unlock()
	if !closed {
		q.wake()
	}
	if more {
		q.signalRoom()
	}
}

func (q *inbox[M]) signalRoom() {
	select {
	case q.room <- struct{}{}:
	default:
	}
}

// take removes the oldest event; false when there is none. Only the shard goroutine calls it.
func (q *inbox[M]) take() (event[M], bool) {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return event[M]{}, false
	}
	e := q.ring[q.head]
	q.ring[q.head] = event[M]{} // the op's closure and reply slot are not kept alive by the ring
	q.head = q.at(1)
	wasFull := q.n == q.bound
	q.n--
	q.taken++
	if q.n == 0 {
		q.head = 0
		q.judge()
	}
	wake := wasFull && q.waiting > 0
	q.mu.Unlock()
	if wake {
		q.signalRoom()
	}
	return e, true
}

// judge runs when the inbox has just emptied: after a stretch of at least a ring's worth of
// events that never filled more than a quarter of it, the ring halves (a burst's ring does not
// stay for good, and steady traffic that fits never reallocates); otherwise a new stretch starts.
func (q *inbox[M]) judge() {
	if q.taken < len(q.ring) {
		return
	}
	if len(q.ring) > inboxFirstRing && q.peak <= len(q.ring)/4 {
		q.resize(len(q.ring) / 2)
		return
	}
	q.peak, q.taken = 0, 0
}

// len is the number of queued events.
func (q *inbox[M]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// close refuses every later event and returns the ones still queued, oldest first.
func (q *inbox[M]) close() []event[M] {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	left := make([]event[M], 0, q.n)
	for i := range q.n {
		left = append(left, q.ring[q.at(i)])
	}
	q.ring, q.n, q.head = nil, 0, 0
	if q.waiting > 0 {
		q.signalRoom() // each woken poster sees closed and passes the token on; see post
	}
	return left
}
