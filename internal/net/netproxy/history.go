package netproxy

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Entry is one of a sandbox's outbound connections or DNS lookups, as its
// network log keeps it: where it went, and the rule that let it through
// or refused it.
type Entry struct {
	Time time.Time `json:"time"`
	// Kind is "dns", "tcp" or "udp"; Protocol, for TCP, what the
	// connection spoke: "http", "tls" or "tcp".
	Kind     string `json:"kind"`
	Protocol string `json:"protocol,omitempty"`
	// Name is the host name it named (a DNS question, the TLS SNI, the
	// HTTP Host); "" when none was read.
	Name string `json:"name,omitempty"`
	// Addr is the address connected to (a lookup's: the first answer);
	// "" when there was none.
	Addr string `json:"addr,omitempty"`
	Port uint16 `json:"port,omitempty"`
	// Allowed says whether it went through; Rule is the rule that decided
	// (as written, "mode" for the sandbox's mode, "always" for what no
	// policy allows), Reason a refusal's why.
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason,omitempty"`
	// BytesOut and BytesIn are what a connection carried (sandbox → host,
	// and back), once it ended.
	BytesOut int64 `json:"bytes_out,omitempty"`
	BytesIn  int64 `json:"bytes_in,omitempty"`
}

// Dest is where e went, as an allow rule names it: name:port (or
// address:port without a name); a lookup's, its name.
func (e Entry) Dest() string {
	host := e.Name
	if host == "" {
		host = e.Addr
	}
	if e.Kind == "dns" || e.Port == 0 {
		return host
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]:" + strconv.Itoa(int(e.Port))
	}
	return net.JoinHostPort(host, strconv.Itoa(int(e.Port)))
}

// maxEntries is how many entries a History keeps: the newest.
const maxEntries = 2000

// maxLearned bounds the destinations a History learns in learn mode.
const maxLearned = 10000

// History is a sandbox's network log: its latest connections and lookups,
// numbered from 1, and, while its policy is in learn mode, every
// destination it reached (what a proposed allow-list is made of).
type History struct {
	mu      sync.Mutex
	entries ring[Entry] // the newest maxEntries
	learn   bool
	learned map[string]bool // destinations reached while learning (Entry.Dest)
}

// Learning turns learning on or off; turned on, it starts anew.
func (h *History) Learning(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on && !h.learn {
		h.learned = map[string]bool{}
	}
	h.learn = on
}

// Add appends e.
func (h *History) Add(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries.add(e, maxEntries)
	if h.learn && e.Allowed && e.Kind != "dns" && len(h.learned) < maxLearned {
		h.learned[e.Dest()] = true
	}
}

// After returns the entries numbered after cursor that it still has, and
// the cursor after them.
func (h *History) After(cursor uint64) ([]Entry, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entries.after(cursor), h.entries.last
}

// Reached is every destination connections went to (Entry.Dest): those
// learned while in learn mode when it was on, else those the log still
// has.
func (h *History) Reached() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for d := range h.learned {
		seen[d] = true
	}
	if h.learned == nil {
		for _, e := range h.entries.items {
			if e.Allowed && e.Kind != "dns" {
				seen[e.Dest()] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	return out
}
