package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// Templates on every node: a template is built (or pulled, or imported)
// once, on the node the call reached, and copied from there to the others
// (rootfs.Store.WriteArchive and Receive), which keep its version. The
// store holds each template's current version and the node that made it
// (PublishTemplate): a node publishes the versions it makes, and copies
// the ones it lacks, at start (a node that joins later gets them all) and
// every heartbeat after. A template deleted on one node is unpublished
// by that delete, before it is removed there (template.Config.Withdraw:
// removed first, the node's own next look could copy it back from
// another), and the others remove their copies when no sandbox of theirs
// uses it.
//
// Snapshots stay on the node that made them, with their sandboxes and
// forks: placement sends a create from a snapshot there (Placer).

// TemplateStore is what TemplateSync reads and writes of the store.
type TemplateStore interface {
	ListNodes(ctx context.Context) ([]*store.Node, error)
	PublishTemplate(ctx context.Context, t *store.ClusterTemplate) (bool, error)
	ListClusterTemplates(ctx context.Context) ([]*store.ClusterTemplate, error)
}

// TemplateSync keeps a node's templates the cluster's.
type TemplateSync struct {
	Store TemplateStore
	Local *rootfs.Store
	// Node is this node's name.
	Node string
	// Nodes is how this node calls the others: pinned TLS and the
	// cluster key, which alone opens their template archives (no API
	// key goes with them).
	Nodes *NodeTransport
	// Every is how often the store is looked at (DefaultHeartbeat when 0).
	Every time.Duration
	// InUse says whether a sandbox of this node uses template name: its
	// copy stays until none does.
	InUse func(ctx context.Context, name string) (bool, error)
	Log   *slog.Logger

	// published are the names the store had at the last look: one gone
	// from it since was deleted, and goes here too.
	published map[string]bool
}

// Run publishes what this node has, then keeps its templates the
// cluster's until ctx ends. After the start, only a change here publishes:
// a template deleted elsewhere is not published again by the node that
// made it, which removes it as the others do.
func (s *TemplateSync) Run(ctx context.Context) error {
	every := s.Every
	if every == 0 {
		every = DefaultHeartbeat
	}
	changed := make(chan string, 64)
	stop := s.Local.Observe(func(name string) {
		select {
		case changed <- name:
		default: // 64 changes between two looks: the next start publishes it
		}
	})
	defer stop()
	s.publishAll(ctx)
	s.pull(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case name := <-changed:
			s.publish(ctx, name)
		case <-t.C:
			s.pull(ctx)
		}
	}
}

// shared says whether a template is one the nodes share: made here (not
// copied), and not a snapshot.
func shared(info rootfs.Info) bool {
	return info.Name != rootfs.HostName && info.Source != rootfs.SourceSnapshot
}

// publishAll publishes every template made here.
func (s *TemplateSync) publishAll(ctx context.Context) {
	infos, err := s.Local.List()
	if err != nil {
		s.Log.Warn("list templates to publish", "error", err)
		return
	}
	for _, info := range infos {
		if shared(info) && info.Origin == "" {
			s.publishInfo(ctx, info)
		}
	}
}

// publish publishes template name's current version, when this node made
// it. One removed here was unpublished by its delete (see above).
func (s *TemplateSync) publish(ctx context.Context, name string) {
	info, err := s.Local.Info(name)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		// removed here: its delete unpublished it
	case err != nil:
		s.Log.Warn("read a template to publish", "template", name, "error", err)
	case shared(info) && info.Origin == "":
		s.publishInfo(ctx, info)
	}
}

func (s *TemplateSync) publishInfo(ctx context.Context, info rootfs.Info) {
	js, err := json.Marshal(info)
	if err != nil {
		return
	}
	ok, err := s.Store.PublishTemplate(ctx, &store.ClusterTemplate{Name: info.Name, Version: info.Version, Origin: s.Node, Info: js, UpdatedAt: time.Now().UTC()})
	if err != nil {
		s.Log.Warn("publish a template", "template", info.Name, "error", err)
		return
	}
	if ok {
		s.Log.Info("template published to the other nodes", "template", info.Name, "version", info.Version)
	}
}

// pull copies the published versions this node lacks, and removes the
// copies of templates unpublished since the last look.
func (s *TemplateSync) pull(ctx context.Context) {
	records, err := s.Store.ListClusterTemplates(ctx)
	if err != nil {
		s.Log.Warn("list the nodes' templates", "error", err)
		return
	}
	now := map[string]bool{}
	for _, rec := range records {
		now[rec.Name] = true
		if local, err := s.Local.Info(rec.Name); err == nil && local.Version >= rec.Version {
			continue // as new here, or newer, which this node publishes
		}
		if err := s.copy(ctx, rec); err != nil && ctx.Err() == nil {
			s.Log.Warn("copy a template from another node", "template", rec.Name, "version", rec.Version, "error", err)
		}
	}
	for name := range s.published {
		if now[name] {
			continue
		}
		info, err := s.Local.Info(name)
		if err != nil || !shared(info) {
			continue
		}
		used, err := s.InUse(ctx, name)
		if err != nil || used {
			now[name] = true // looked at again next time
			continue
		}
		if err := s.Local.Remove(name); err != nil {
			s.Log.Warn("remove a template deleted on another node", "template", name, "error", err)
			now[name] = true
			continue
		}
		s.Log.Info("template removed: it was deleted on another node", "template", name)
	}
	s.published = now
}

// copy receives rec's version from the node that made it, or from
// another that has it.
func (s *TemplateSync) copy(ctx context.Context, rec *store.ClusterTemplate) error {
	var info rootfs.Info
	if err := json.Unmarshal(rec.Info, &info); err != nil {
		return fmt.Errorf("its record: %w", err)
	}
	info.Origin = rec.Origin
	nodes, err := s.Store.ListNodes(ctx)
	if err != nil {
		return err
	}
	// The maker first, then the others that have it.
	slices.SortStableFunc(nodes, func(a, b *store.Node) int {
		switch {
		case a.ID == rec.Origin:
			return -1
		case b.ID == rec.Origin:
			return 1
		}
		return 0
	})
	var errs []error
	for _, n := range nodes {
		if n.ID == s.Node || n.State != store.NodeUp || n.Report.Templates[rec.Name] != rec.Version && n.ID != rec.Origin {
			continue
		}
		start := time.Now()
		got, err := s.fetch(ctx, n, info)
		if err == nil {
			s.Log.Info("template copied from another node", "template", rec.Name, "version", rec.Version, "from", n.ID,
				"size_bytes", got.SizeBytes, "duration", time.Since(start))
			return nil
		}
		errs = append(errs, fmt.Errorf("from node %s: %w", n.ID, err))
	}
	if len(errs) == 0 {
		return errors.New("no node up has it")
	}
	return errors.Join(errs...)
}

// fetch receives info's version from node n, from its internal route
// (key.go).
func (s *TemplateSync) fetch(ctx context.Context, n *store.Node, info rootfs.Info) (rootfs.Info, error) {
	base, via, err := s.Nodes.To(n, n.URL)
	if err != nil {
		return rootfs.Info{}, err
	}
	u := base.JoinPath(InternalPrefix, "v1/templates", info.Name, "archive")
	u.RawQuery = url.Values{"version": {info.Version}}.Encode()
	// A node that does not answer is given up on; an archive that does
	// takes as long as its size.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return rootfs.Info{}, err
	}
	timer := time.AfterFunc(archiveHeaderTimeout, cancel)
	resp, err := via.RoundTrip(req)
	if err != nil || !timer.Stop() {
		if err == nil {
			_ = resp.Body.Close()
			err = fmt.Errorf("no answer within %s", archiveHeaderTimeout)
		}
		return rootfs.Info{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rootfs.Info{}, fmt.Errorf("%s answered %s", n.URL, resp.Status)
	}
	return s.Local.Receive(ctx, info, resp.Body, func() string { return resp.Trailer.Get(api.HeaderArchiveSum) })
}

// archiveHeaderTimeout bounds how long a node waits for another's answer
// to an archive's request (not for the archive itself).
const archiveHeaderTimeout = 30 * time.Second
