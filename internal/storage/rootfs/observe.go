package rootfs

// Observers hear of the changes that make a template's sandboxes out of
// date: the lifecycle core keeps a warm pool of sandboxes made from
// templates and knows which versions its sandboxes use, so it replaces the
// pool's sandboxes of a version that is no longer current and prunes the
// versions nobody uses. Builds, pulls, imports and snapshots (whoever
// starts them) all end in Commit, and removals in Remove: the store is the
// one place that sees every change.

// observer is one registration of Observe.
type observer struct {
	id int
	fn func(name string)
}

// Observe registers fn, called with a template's name after the template's
// current version changed (Commit made a new one current: a build, a pull,
// an import, a snapshot) or after the template was removed. It returns
// stop, which ends the registration: changes made after it are not heard,
// though a call already under way may end after stop returns (an observer
// must not outlive what it calls into: the core stops at Close).
//
// fn runs on the goroutine that made the change, before the call that made
// it (Commit, Remove) returns, and outside the store's lock, so it may call
// the store's methods; when several changes happen at once (builds of two
// names), fn is called for each on its own goroutine, concurrently.
// Observers are called one after another, in the order they registered. A
// slow observer holds up the build or removal that called it.
func (s *Store) Observe(fn func(name string)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextObserver++
	id := s.nextObserver
	s.observers = append(s.observers, observer{id: id, fn: fn})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, o := range s.observers {
			if o.id == id {
				// A new slice: a notify under way keeps the one it copied.
				s.observers = append(s.observers[:i:i], s.observers[i+1:]...)
				return
			}
		}
	}
}

// changed tells the observers that template name changed. The caller does
// not hold s.mu.
func (s *Store) changed(name string) {
	s.mu.Lock()
	observers := s.observers
	s.mu.Unlock()
	for _, o := range observers {
		o.fn(name)
	}
}
