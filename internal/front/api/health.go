package api

import (
	"net/http"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchdev/hutch/client"
)

// health answers GET /v1/health: the daemon's version, its runtimes, warm
// pools and teardowns, to every caller. The administrator also reads the
// data dir's disk space and the daemon's latest warnings and errors; other
// keys do not, as log records may name any workspace's sandboxes and the
// host's disk is no workspace's business.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	core := s.m.Health(r.Context())
	h := client.Health{Status: "ok", Version: s.version, Deleting: core.Deleting, Goroutines: runtime.NumGoroutine()}
	h.DefaultRuntime, h.DefaultReason = core.Default, core.DefaultReason
	for _, b := range core.Backends {
		h.Backends = append(h.Backends, client.BackendHealth(b))
	}
	h.Pools = []client.PoolHealth{}
	for _, p := range core.Pools {
		h.Pools = append(h.Pools, client.PoolHealth(p))
	}
	h.Builds = s.templateBuilds(callerOf(r.Context()))
	if callerOf(r.Context()).admin {
		h.Disk = s.diskHealth()
		h.RecentErrors = s.recentErrors()
	}
	writeJSON(w, http.StatusOK, h)
}

// diskHealth is the space on the data dir's filesystem, or nil when it
// cannot be told. How much of it Hutch's own files take is left out: no
// figure of it is kept, and walking templates, sandboxes' layers and
// volumes on every call would cost more than a health check may.
func (s *Server) diskHealth() *client.DiskHealth {
	if s.dataDir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.dataDir, &st); err != nil {
		// Not a warning: it would be kept among the recent errors on
		// every call. The answer says nothing of the disk instead.
		s.log.Debug("statfs of the data dir", "data_dir", s.dataDir, "error", err)
		return nil
	}
	bsize := uint64(st.Bsize) // #nosec G115 -- a block size is positive
	return &client.DiskHealth{Path: s.dataDir, TotalBytes: st.Blocks * bsize, FreeBytes: st.Bavail * bsize}
}

// recentErrors are the daemon's latest warnings and errors, oldest first;
// empty, not nil, when there were none, so that the answer tells "none"
// apart from "not yours to see".
func (s *Server) recentErrors() []client.LogRecord {
	out := []client.LogRecord{}
	if s.recent == nil {
		return out
	}
	for _, rec := range s.recent.Records() {
		out = append(out, client.LogRecord{Time: rec.Time, Level: rec.Level.String(), Message: rec.Message, Attrs: rec.Attrs})
	}
	return out
}

// templateBuilds are the template builds under way that c sees: the
// shared templates' and its workspace's.
func (s *Server) templateBuilds(c caller) []client.TemplateBuild {
	out := []client.TemplateBuild{}
	if s.templates == nil {
		return out
	}
	now := time.Now()
	for _, b := range s.templates.Builds() {
		if !c.seesTemplate(b.Name) {
			continue
		}
		out = append(out, client.TemplateBuild{
			Template: c.shown(b.Name), Step: b.Last.Step, Done: b.Last.Done, Total: b.Last.Total, Message: b.Last.Message,
			ElapsedS: int(now.Sub(b.Began).Seconds()), LeftS: int(b.Left(now).Seconds()), Description: b.Describe(now),
		})
	}
	return out
}
