package api

import (
	"context"
	"net/http"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/hook"
	"github.com/hutchdev/hutch/internal/core/template"
	"github.com/hutchdev/hutch/internal/core/volume"
	"github.com/hutchdev/hutch/internal/storage/store"
	"github.com/hutchdev/hutch/internal/trust/workspace"
)

// The API's wire types are the Go SDK's (package client): one definition of
// what goes over the wire.

// sandboxJSON is sb as c reads it: its template's and volumes' plain names.
func sandboxJSON(c caller, sb *store.Sandbox) client.Sandbox {
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	var vols []client.VolumeMount
	for _, v := range sb.Volumes {
		v.Name = c.shown(v.Name)
		vols = append(vols, client.VolumeMount(v))
	}
	return client.Sandbox{
		ID: sb.ID, Workspace: sb.Workspace, User: sb.User, Secrets: sb.Secrets,
		Template: c.shown(sb.Template), Runtime: sb.Backend, State: string(sb.State),
		StateReason: sb.StateReason, CPUs: sb.CPUs, MemoryMB: sb.MemoryMB, Pids: sb.Pids, DiskMB: sb.DiskMB,
		IdleTimeoutS: int64(sb.IdleTimeout / time.Second), IdleAction: sb.IdleAction, Key: sb.Key, Checkpoints: sb.Checkpoints, OnSuspend: sb.OnSuspend, OnResume: sb.OnResume, Metadata: meta,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: sb.ExpiresAt, Volumes: vols,
		Network: client.NetworkPolicy{Mode: string(sb.Network.Mode), Allow: sb.Network.Allow, Deny: sb.Network.Deny},
		Node:    sb.Node,
	}
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.CreateSandboxRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.IdleTimeoutS < 0 || req.MaxLifetimeS < 0 {
		writeError(w, r, s.log, errdefs.InvalidArgument("idle_timeout_s and max_lifetime_s must be positive"))
		return
	}
	opts, err := s.createOptions(r, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	opts.Network = createNetwork(req.Network)
	sb, created, err := s.m.Create(r.Context(), opts)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // the key's sandbox, there already
	}
	noteObject(r, sb.ID)
	writeJSON(w, status, sandboxJSON(callerOf(r.Context()), sb))
}

// createOptions is what a create asks of the core, in the caller's
// workspace, for its user, with the names of its templates and volumes
// as stored.
func (s *Server) createOptions(r *http.Request, req client.CreateSandboxRequest) (create.Options, error) {
	c := callerOf(r.Context())
	user, err := callUser(c, req.User)
	if err != nil {
		return create.Options{}, err
	}
	vols := volumeMounts(req.Volumes)
	for i := range vols {
		if vols[i].Name, err = c.volumeName(vols[i].Name); err != nil {
			return create.Options{}, err
		}
	}
	tmpl, snapshot := req.Template, req.FromSnapshot
	if tmpl != "" {
		if tmpl, err = s.templateRef(r.Context(), c, tmpl); err != nil {
			return create.Options{}, err
		}
	}
	if snapshot != "" {
		if snapshot, err = s.templateRef(r.Context(), c, snapshot); err != nil {
			return create.Options{}, err
		}
	}
	return create.Options{
		Workspace: c.workspace, User: user, Secrets: req.Secrets, NetworkCeiling: c.networkMode,
		Template: tmpl, Runtime: req.Runtime, CPUs: req.CPUs, MemoryMB: req.MemoryMB, Pids: req.Pids, DiskMB: req.DiskMB,
		Env: req.Env, Metadata: req.Metadata, IdleTimeout: time.Duration(req.IdleTimeoutS) * time.Second,
		IdleAction: req.IdleAction, Checkpoints: req.Checkpoints, OnSuspend: req.OnSuspend, OnResume: req.OnResume, Key: req.Key, MaxLifetime: time.Duration(req.MaxLifetimeS) * time.Second,
		Files: req.Files, FilesTar: req.FilesTar, FromSnapshot: snapshot, Volumes: vols,
	}, nil
}

// callUser is the product's user a call is for: the body's, or the
// header's (Hutch-User); both given must agree.
func callUser(c caller, body string) (string, error) {
	switch {
	case body == "":
		return c.user, nil
	case c.user != "" && c.user != body:
		return "", errdefs.InvalidArgument("user %q and header %s %q differ; give one", body, headerUser, c.user)
	}
	return body, workspace.CheckUser(body)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	list, err := s.m.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	ws := c.filter(r)
	out := struct {
		Sandboxes []client.Sandbox `json:"sandboxes"`
	}{Sandboxes: []client.Sandbox{}}
	for _, sb := range list {
		if ws == "" || sb.Workspace == ws {
			out.Sandboxes = append(out.Sandboxes, sandboxJSON(c, sb))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.m.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(callerOf(r.Context()), sb))
}

func (s *Server) sandboxStats(w http.ResponseWriter, r *http.Request) {
	a, err := s.m.Activity(r.Context(), r.PathValue("id"))
	if err == nil {
		err = a.StatsErr
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	st := a.Stats
	net := s.nets.Counters(r.PathValue("id"))
	writeJSON(w, http.StatusOK, client.SandboxStats{
		CPUTimeMS: st.CPUTime.Milliseconds(), CPUs: st.CPULimit, MemoryBytes: st.MemoryBytes, MemoryPeakBytes: st.MemoryPeak,
		MemoryLimitBytes: st.MemoryLimit, Pids: st.Pids, PidsLimit: st.PidsLimit, DiskUsedBytes: st.DiskUsedBytes,
		NetworkBytesOut: net.BytesOut, NetworkBytesIn: net.BytesIn, NetworkConnections: net.Connections,
	})
}

// deleteSandbox answers once the sandbox is gone to every caller and
// nothing runs in it; with ?wait=true, once its teardown has ended too.
func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(hook.WithCause(r.Context(), hook.Cause{Code: hook.CauseDeleted, By: callerOf(r.Context()).who()}))
	del := s.m.Delete
	if wait, err := boolQuery(r, "wait", false); err != nil {
		writeError(w, r, s.log, err)
		return
	} else if wait {
		del = func(ctx context.Context, id string) error {
			if err := s.m.Delete(ctx, id); err != nil {
				return err
			}
			return s.m.AwaitTeardown(ctx, id)
		}
	}
	if err := del(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	s.answerSandbox(w, r, s.m.Pause)
}

// unpauseSandbox thaws a paused sandbox; unlike a resume, it starts none
// that is not live.
func (s *Server) unpauseSandbox(w http.ResponseWriter, r *http.Request) {
	s.answerSandbox(w, r, func(ctx context.Context, id string) (*store.Sandbox, error) {
		sb, err := s.m.Get(ctx, id)
		if err == nil {
			err = core.NotRunning(sb)
		}
		if err != nil {
			return nil, err
		}
		return s.m.Resume(ctx, id)
	})
}

func (s *Server) suspendSandbox(w http.ResponseWriter, r *http.Request) {
	s.answerSandbox(w, r, func(ctx context.Context, id string) (*store.Sandbox, error) {
		return s.m.Halt(ctx, id, core.Halt{Reason: "suspended by request"})
	})
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	s.answerSandbox(w, r, func(ctx context.Context, id string) (*store.Sandbox, error) {
		return s.m.Halt(ctx, id, core.Halt{Stop: true, Reason: "stopped by request"})
	})
}

// resumeSandbox is also POST …/start: it starts a stopped sandbox too.
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	s.answerSandbox(w, r, s.m.Resume)
}

// answerSandbox answers with the sandbox an action on it left.
func (s *Server) answerSandbox(w http.ResponseWriter, r *http.Request, action func(context.Context, string) (*store.Sandbox, error)) {
	sb, err := action(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(callerOf(r.Context()), sb))
}

// updateSandbox changes a sandbox's idle timeout (and action): a keepalive.
func (s *Server) updateSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.UpdateSandboxRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.answerSandbox(w, r, func(ctx context.Context, id string) (*store.Sandbox, error) {
		if req.Network != nil {
			p, err := s.keyAllows(r, *req.Network)
			if err != nil {
				return nil, err
			}
			if err := s.nets.Set(ctx, id, p); err != nil {
				return nil, err
			}
			if req.IdleTimeoutS == 0 && req.MaxLifetimeS == 0 && req.IdleAction == "" && !reshapes(req) {
				return s.m.Get(ctx, id)
			}
		}
		u := core.Update{
			IdleTimeout: time.Duration(req.IdleTimeoutS) * time.Second, IdleAction: req.IdleAction, Lifetime: time.Duration(req.MaxLifetimeS) * time.Second,
			Env: req.Env, Metadata: req.Metadata, CPUs: req.CPUs, MemoryMB: req.MemoryMB, Pids: req.Pids, DiskMB: req.DiskMB,
		}
		if req.Volumes != nil {
			vols := volumeMounts(*req.Volumes)
			for i := range vols {
				var err error
				if vols[i].Name, err = callerOf(r.Context()).volumeName(vols[i].Name); err != nil {
					return nil, err
				}
			}
			if vols == nil {
				vols = []store.VolumeMount{}
			}
			u.Volumes = &vols
		}
		return s.m.Update(ctx, id, u)
	})
}

// reshapes says whether req changes what the sandbox is made with.
func reshapes(req client.UpdateSandboxRequest) bool {
	return req.Env != nil || req.Metadata != nil || req.CPUs != 0 || req.MemoryMB != 0 || req.Pids != 0 || req.DiskMB != 0 || req.Volumes != nil
}

// snapshotSandbox makes a snapshot (a template) of a sandbox's files.
func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.SnapshotRequest
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	name, err := s.snapshotName(r.Context(), c, r.PathValue("id"), req.Name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	info, err := s.templates.Snapshot(r.Context(), r.PathValue("id"), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, templateJSON(c, template.Info{Info: info}))
}

// forkSandbox makes copies of a sandbox as it is now.
func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.ForkRequest
	if r.ContentLength != 0 { // the body is optional
		if err := decode(r, &req); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	if req.Count == 0 {
		req.Count = 1
	}
	made, err := s.templates.Fork(r.Context(), r.PathValue("id"), req.Count, callerOf(r.Context()).networkMode)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := client.ForkResult{Sandboxes: []client.Sandbox{}}
	for i, m := range made {
		if m.Err != nil {
			d := describe(m.Err)
			out.Errors = append(out.Errors, client.ForkError{Copy: i + 1, Code: d.Code, Message: d.Message})
			continue
		}
		out.Sandboxes = append(out.Sandboxes, sandboxJSON(callerOf(r.Context()), m.Sandbox))
	}
	writeJSON(w, http.StatusCreated, out)
}

func volumeMounts(vols []client.VolumeMount) []store.VolumeMount {
	var out []store.VolumeMount
	for _, v := range vols {
		out = append(out, store.VolumeMount(v))
	}
	return out
}

func volumeJSON(c caller, v volume.Info) client.Volume {
	users := v.Sandboxes
	if users == nil {
		users = []string{}
	}
	return client.Volume{Name: c.shown(v.Name), CreatedAt: v.CreatedAt, Sandboxes: users}
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	if workspace.Qualified(req.Name) && !c.admin {
		writeError(w, r, s.log, errdefs.InvalidArgument("volume name %q: '~' is not allowed", req.Name))
		return
	}
	name, err := c.volumeName(req.Name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	v, err := s.volumes.Create(r.Context(), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeJSON(c, v))
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vols, err := s.volumes.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c := callerOf(r.Context())
	ws := c.filter(r)
	out := struct {
		Volumes []client.Volume `json:"volumes"`
	}{Volumes: []client.Volume{}}
	for _, v := range vols {
		if ws == "" || workspace.VolumeOwner(v.Name) == ws {
			out.Volumes = append(out.Volumes, volumeJSON(c, v))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	name, err := callerOf(r.Context()).volumeName(r.PathValue("name"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.volumes.Delete(r.Context(), name); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
