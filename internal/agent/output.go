package agent

import (
	"slices"
	"sync"

	"github.com/hutchdev/hutch/internal/agent/agentpb/process"
)

// subscriberQueue is how many events a subscriber may have queued before the
// process's output waits for it: 4 chunks of at most 32 KiB.
const subscriberQueue = 4

// output fans a process's stdout and stderr out to the streams watching it
// (the Start stream while its client is there, and Connect streams).
//
// Delivery is synchronous: publish returns once every subscriber has queued
// the event, so a slow subscriber slows the process down (its pipe fills),
// while a subscriber whose stream has ended is dropped at once. With no
// subscriber, output is discarded: a process never blocks because nobody
// listens. Memory stays bounded by subscriberQueue chunks per subscriber.
//
// An output started with keep > 0 also keeps its last keep bytes (whole
// events; at least the newest) for subscribers that come later and ask for
// them (replay): the logs of a background process.
type output struct {
	deliverMu sync.Mutex // held for a whole delivery; end waits for it

	mu       sync.Mutex
	subs     map[*subscriber]struct{}
	ended    bool
	endEvent *process.ProcessEvent
	done     chan struct{} // closed by end

	keep      int
	kept      []*process.ProcessEvent // data events, oldest first
	keptBytes int
}

type subscriber struct {
	ch   chan *process.ProcessEvent
	quit chan struct{} // closed when the stream handler stops reading
}

func newOutput(keep int) *output {
	return &output{subs: map[*subscriber]struct{}{}, done: make(chan struct{}), keep: keep}
}

// subscribe adds a subscriber; ok is false when the output has ended. The
// caller must call unsubscribe when it stops reading.
func (o *output) subscribe() (s *subscriber, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return nil, false
	}
	s = &subscriber{ch: make(chan *process.ProcessEvent, subscriberQueue), quit: make(chan struct{})}
	o.subs[s] = struct{}{}
	return s, true
}

// replay returns the kept output and, when subscribe is set and the output
// has not ended, a new subscriber that receives everything after it:
// nothing is lost or sent twice between the two. The caller must
// unsubscribe s when not nil.
func (o *output) replay(subscribe bool) (kept []*process.ProcessEvent, s *subscriber) {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept = slices.Clone(o.kept)
	if o.ended || !subscribe {
		return kept, nil
	}
	s = &subscriber{ch: make(chan *process.ProcessEvent, subscriberQueue), quit: make(chan struct{})}
	o.subs[s] = struct{}{}
	return kept, s
}

// finalEvent returns the EndEvent once the output has ended, else nil.
func (o *output) finalEvent() *process.ProcessEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.endEvent
}

func (o *output) unsubscribe(s *subscriber) {
	o.mu.Lock()
	delete(o.subs, s)
	o.mu.Unlock()
	close(s.quit)
}

// publish delivers ev to every subscriber, waiting for each to have room.
// After end, it discards ev.
func (o *output) publish(ev *process.ProcessEvent) {
	o.deliverMu.Lock()
	defer o.deliverMu.Unlock()
	o.mu.Lock()
	if !o.ended && o.keep > 0 {
		o.remember(ev)
	}
	if o.ended || len(o.subs) == 0 {
		o.mu.Unlock()
		return
	}
	subs := make([]*subscriber, 0, len(o.subs))
	for s := range o.subs {
		subs = append(subs, s)
	}
	o.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.quit:
		}
	}
}

// end ends the output with ev (the EndEvent) once every delivery in flight
// is done. Subscribers receive ev after everything published before.
func (o *output) end(ev *process.ProcessEvent) {
	o.deliverMu.Lock()
	defer o.deliverMu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return
	}
	o.ended = true
	o.endEvent = ev
	close(o.done)
}

// remember keeps ev, dropping the oldest events beyond keep bytes; the
// caller holds o.mu.
func (o *output) remember(ev *process.ProcessEvent) {
	o.kept = append(o.kept, ev)
	o.keptBytes += dataLen(ev)
	for len(o.kept) > 1 && o.keptBytes > o.keep {
		o.keptBytes -= dataLen(o.kept[0])
		o.kept[0] = nil
		o.kept = o.kept[1:]
	}
}

func dataLen(ev *process.ProcessEvent) int {
	d := ev.GetData()
	return len(d.GetStdout()) + len(d.GetStderr())
}
