package netproxy

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestLog(t *testing.T) {
	var l Log
	if evs, cur := l.After(0); len(evs) != 0 || cur != 0 {
		t.Fatalf("empty log: %v, %d", evs, cur)
	}
	for i := range 3 {
		l.Add(Event{Dest: fmt.Sprint(i)})
	}
	evs, cur := l.After(1)
	if len(evs) != 2 || evs[0].Dest != "1" || evs[1].Dest != "2" || cur != 3 {
		t.Fatalf("After(1) = %v, %d", evs, cur)
	}
	// The oldest go once it holds maxEvents; a cursor before them gets
	// what is left.
	for i := 3; i < maxEvents+10; i++ {
		l.Add(Event{Dest: fmt.Sprint(i)})
	}
	evs, cur = l.After(2)
	if len(evs) != maxEvents || evs[0].Dest != "10" || cur != maxEvents+10 {
		t.Fatalf("after the log turned over: %d events from %s, cursor %d", len(evs), evs[0].Dest, cur)
	}
	if evs, _ := l.After(cur - 1); len(evs) != 1 || evs[0].Dest != fmt.Sprint(maxEvents+9) {
		t.Fatalf("the newest: %v", evs)
	}
}

func TestLogWait(t *testing.T) {
	var l Log
	l.Add(Event{Dest: "old"})
	cur := l.Last()
	got := make(chan []Event, 1)
	go func() {
		evs, _, err := l.Wait(context.Background(), cur)
		if err != nil {
			t.Error(err)
		}
		got <- evs
	}()
	time.Sleep(20 * time.Millisecond)
	l.Add(Event{Dest: "new"})
	select {
	case evs := <-got:
		if len(evs) != 1 || evs[0].Dest != "new" {
			t.Errorf("Wait = %v, want the new event", evs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not wake")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := l.Wait(ctx, l.Last()); err == nil {
		t.Error("Wait with nothing new returned before its context ended")
	}
}
