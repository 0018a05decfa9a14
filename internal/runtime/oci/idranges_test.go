package oci

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Two daemons (two sandbox dirs) sharing a registry never hand out one
// range twice, also when they take at once; a released range, and the
// range of a claim whose directory went, is handed out again (by a daemon
// that starts); a range a directory had before claims existed is claimed
// for it.
func TestIDRanges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandbox directories are given to id ranges' roots")
	}
	t.Parallel()
	base := t.TempDir()
	registry := filepath.Join(base, "ids")
	dirA, dirB := filepath.Join(base, "a"), filepath.Join(base, "b")
	// A sandbox of daemon A from before claims: its directory is owned by
	// the first range.
	old := filepath.Join(dirA, "old")
	mustMkdir(t, old)
	first := idMapping{base: idBase}
	if err := os.Lchown(old, first.host(0), first.host(0)); err != nil {
		t.Fatal(err)
	}
	a := &idAllocator{registry: registry, sandboxDir: dirA}
	b := &idAllocator{registry: registry, sandboxDir: dirB}

	// A's first take claims its old sandbox's range (a daemon does so at
	// its first create); then A and B take at once.
	seen := map[uint32]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		al, dir := a, dirA
		if i%2 == 1 {
			al, dir = b, dirB
		}
		sb := filepath.Join(dir, "sb"+string(rune('0'+i)))
		mustMkdir(t, sb)
		if i == 0 {
			if _, err := al.take(sb); err != nil { // adopts "old" first
				t.Fatal(err)
			}
			seen[mustMapping(t, sb).base] = sb
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := al.take(sb)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[m.base]; dup {
				t.Errorf("range %d handed to %s and %s", m.base, other, sb)
			}
			seen[m.base] = sb
		}()
	}
	wg.Wait()
	if owner, dup := seen[first.base]; dup {
		t.Errorf("the old sandbox's range went to %s", owner)
	}
	for m, dir := range seen {
		if got := mustMapping(t, dir); got.base != m {
			t.Errorf("%s owned by %d, handed %d", dir, got.base, m)
		}
	}

	// Released, and stale: both are handed out again, lowest first.
	sb1 := filepath.Join(dirA, "sb0")
	m1 := mustMapping(t, sb1)
	if err := os.RemoveAll(sb1); err != nil {
		t.Fatal(err)
	}
	if err := a.release(m1, sb1); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dirB, "again")
	mustMkdir(t, again)
	if m, err := b.take(again); err != nil || m != m1 {
		t.Errorf("after release: %v %v, want %d", m, err, m1.base)
	}
	gone := seen[idBase+2*idRange]
	if err := os.RemoveAll(gone); err != nil { // no release: a stale claim
		t.Fatal(err)
	}
	// Taken by a daemon that starts: a running one passes over the ranges
	// it holds without reading their claims (it releases its own).
	restarted := &idAllocator{registry: registry, sandboxDir: dirA}
	stale := filepath.Join(dirA, "stale")
	mustMkdir(t, stale)
	if m, err := restarted.take(stale); err != nil || m.base != idBase+2*idRange {
		t.Errorf("after a stale claim: %v %v, want %d", m, err, idBase+2*idRange)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func mustMapping(t *testing.T, dir string) idMapping {
	t.Helper()
	m, ok := mappingOf(dir)
	if !ok {
		t.Fatalf("%s has no id range", dir)
	}
	return m
}
