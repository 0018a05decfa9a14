package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/spans"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// A sandbox's network (with Config.NetnsDir): the link to a router namespace
// of its own, where the daemon listens (see sandboxnet). The runtime makes
// the namespaces with the sandbox and removes them with it; they outlive a
// suspend. The daemon opens its listeners there (Network).
//
// runc makes the sandbox's namespace itself, inside the sandbox's user
// namespace (one the daemon made would be the host user namespace's, where
// the sandbox's root could not mount its /sys): the daemon links it once
// runc has started the container, before the create returns. Only the
// agent runs by then, which needs no network; no command can run before
// the link is made. (Linking between runc create and runc start, as
// containerd does for CNI, costs another runc, ~30 ms here.)
//
// gVisor copies the interfaces of a namespace it is given into its own
// network stack, taking their addresses away: the daemon makes that
// namespace and links it again before each start and restore.

var _ backend.Networked = (*Runtime)(nil)

// gvisorNetworkFlags are runsc's flags for a sandbox with a network: the
// namespace in the bundle (--network=sandbox), full checksums on what
// gVisor sends outside host GSO (the router namespace's conntrack drops
// packets with bad ones), received checksums trusted (the host's kernel
// leaves them partial), no raw sockets, and connections reset at a
// checkpoint, whose other end (the daemon's proxy) does not survive it.
var gvisorNetworkFlags = []string{
	"--network=sandbox", "--tx-checksum-offload=false", "--rx-checksum-offload=true",
	"--gso=true", "--software-gso=true", "--net-raw=false", "--allow-live-tcp-migration=false",
}

// networkFlags returns flags with the runtime's network flags added.
func networkFlags(cfg Config) []string {
	if !cfg.CopiesNetns {
		return cfg.Flags
	}
	if cfg.NetnsDir == "" {
		return append(slices.Clone(cfg.Flags), "--network=none")
	}
	return append(slices.Clone(cfg.Flags), gvisorNetworkFlags...)
}

// makeNetwork makes sandbox id's namespaces; Destroy removes them.
func (r *Runtime) makeNetwork(id string) error {
	if r.cfg.NetnsDir == "" {
		return nil
	}
	_, err := sandboxnet.Create(r.cfg.NetnsDir, id, r.cfg.CopiesNetns)
	return err
}

// networkMaking is a sandbox's network being made beside the other steps
// of its create.
type networkMaking struct {
	done chan struct{}
	err  error
}

// makeNetworkBeside makes sandbox id's namespaces. Under runc, which links
// the sandbox to them only once its container runs, they are made on a
// goroutine of their own, beside the root's mounts and the runtime's start
// (a router namespace and its rules: ~2.5 ms of a create here, with a core
// to spare while runc starts); elsewhere before it returns.
func (r *Runtime) makeNetworkBeside(ctx context.Context, id string) *networkMaking {
	n := &networkMaking{done: make(chan struct{})}
	build := func() {
		defer close(n.done)
		_, span := spans.Start(ctx, "network")
		n.err = r.makeNetwork(id)
		spans.End(span, n.err)
	}
	if !r.linksAfterStart() {
		build()
		return n
	}
	go build()
	return n
}

// wait waits until the network is made and returns why it was not; a nil
// n is one made before.
func (n *networkMaking) wait() error {
	if n == nil {
		return nil
	}
	<-n.done
	return n.err
}

// removeNetwork removes sandbox id's namespaces, if it has any.
func (r *Runtime) removeNetwork(id string) error {
	if r.cfg.NetnsDir == "" {
		return nil
	}
	return sandboxnet.Remove(r.cfg.NetnsDir, id)
}

// linkCopied links again the namespace gVisor copies, before a start or a
// restore; and names it in the bundle's spec.
func (r *Runtime) linkCopied(id string, spec *specs.Spec) error {
	if r.cfg.NetnsDir == "" || !r.cfg.CopiesNetns {
		return nil
	}
	n, err := r.findNetwork(id)
	if err != nil {
		return err
	}
	if err := n.Attach(n.Sandbox); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	for i := range spec.Linux.Namespaces {
		if spec.Linux.Namespaces[i].Type == specs.NetworkNamespace {
			spec.Linux.Namespaces[i].Path = n.Sandbox
		}
	}
	return nil
}

// findNetwork returns sandbox id's namespaces, made afresh for a sandbox
// that has none: one made by a daemon before sandboxes had a network,
// started again by this one.
func (r *Runtime) findNetwork(id string) (*sandboxnet.Net, error) {
	if n, ok := sandboxnet.Find(r.cfg.NetnsDir, id); ok && (n.Sandbox != "" || !r.cfg.CopiesNetns) {
		return n, nil
	}
	if err := sandboxnet.Remove(r.cfg.NetnsDir, id); err != nil { // a half of one
		return nil, err
	}
	r.log.Info("sandbox had no network namespace: made one", "sandbox_id", id)
	return sandboxnet.Create(r.cfg.NetnsDir, id, r.cfg.CopiesNetns)
}

// linksAfterStart says whether the runtime makes the sandbox's namespace
// itself, to be linked once the container runs.
func (r *Runtime) linksAfterStart() bool {
	return r.cfg.NetnsDir != "" && !r.cfg.CopiesNetns
}

// linkStarted links the namespace of a container just started.
func (r *Runtime) linkStarted(id string, layer sandboxLayout) error {
	pid, err := readPid(layer.pidFile())
	if err != nil {
		return err
	}
	n, err := r.findNetwork(id)
	if err != nil {
		return err
	}
	if err := n.Attach(filepath.Join("/proc", strconv.Itoa(pid), "ns", "net")); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	return nil
}

// Network returns the path of the router namespace of a sandbox, where the
// daemon serves its connections; "" if the runtime gives sandboxes no
// network.
func (r *Runtime) Network(_ context.Context, h backend.Handle) (string, error) {
	if !validID(h.ID) {
		return "", errdefs.InvalidArgument("invalid sandbox id %q", h.ID)
	}
	if r.cfg.NetnsDir == "" {
		return "", nil
	}
	n, ok := sandboxnet.Find(r.cfg.NetnsDir, h.ID)
	if !ok {
		return "", errdefs.NotFound("sandbox %s has no network namespace", h.ID)
	}
	if _, err := os.Stat(n.Router); err != nil {
		return "", err
	}
	return n.Router, nil
}
