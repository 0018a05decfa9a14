package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/core/create"
	"github.com/hutchdev/hutch/internal/core/exec"
	"github.com/hutchdev/hutch/internal/core/quota"
	"github.com/hutchdev/hutch/internal/net/egress"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/runtime/backend"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Build steps run in sandboxes of their own: made from the root being
// built (not a template yet) directly with the build backend, not the
// core's (not recorded in the store, never listed), and destroyed as soon
// as the step ends (or, after a crash, by the core's recovery, which
// destroys every sandbox no record knows). Their writable layer is applied
// to the root.
//
// They run with runc: a step that needs the network reaches it through an
// egress proxy the daemon serves on the sandbox's own loopback, and gVisor's
// loopback is inside its own kernel. Such a sandbox has no network device
// but lo; the proxy lets through only the step's allowed destinations, and
// only at public addresses.

// BuildRuntime is the runtime build steps run with: the daemon gives the
// service its backend (Config.BuildBackend).
const BuildRuntime = "runc"

// proxyAddress is where a build step's egress proxy listens, in the
// sandbox's own network namespace.
const proxyAddress = "127.0.0.1:3128"

// The limits of an administrator's build step's sandbox (a workspace's
// are its quota's, up to these: see limits.go): builds compile and unpack.
const (
	buildMemoryMB = 4096
	buildPids     = 4096
	buildDiskMB   = 16384
	buildTimeout  = 30 * time.Minute
)

// runBuildStep runs step in a sandbox of root with limits: what a
// build's rootfs.Runner does (see runner).
func (s *Service) runBuildStep(ctx context.Context, root string, step rootfs.RunStep, limits quota.StepLimits) (err error) {
	be := s.buildBackend
	switch {
	case be == nil:
		return errdefs.FailedPrecondition("template build steps run with %s, which this daemon does not have", BuildRuntime)
	case s.buildUnusable != "":
		return fmt.Errorf("template build steps run with %s: %w", BuildRuntime,
			errdefs.FailedPrecondition("runtime %s is not usable on this host: %s", be.Name(), s.buildUnusable))
	}
	builder := be.Capabilities().Build
	if builder == nil {
		return errdefs.FailedPrecondition("runtime %s cannot run template build steps", be.Name())
	}
	id := create.NewID()
	log := s.log.With("sandbox_id", id, "build_step", true)
	h, err := be.Create(ctx, backend.Spec{
		ID:       id,
		Hostname: "build",
		RootDir:  root,
		Limits: backend.Limits{
			CPUs:        limits.CPUs,
			MemoryBytes: limits.MemoryMB << 20,
			Pids:        buildPids,
			DiskBytes:   limits.DiskMB << 20,
		},
	})
	if err != nil {
		return fmt.Errorf("build sandbox: %w", err)
	}
	defer func() {
		// Gone even when the build was interrupted: the step's command
		// with it.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := be.Destroy(dctx, h); derr != nil {
			log.Error("destroy build sandbox", "error", derr)
			err = errors.Join(err, derr)
		}
	}()

	env := map[string]string{}
	for k, v := range step.Env {
		env[k] = v
	}
	if len(step.Allow) > 0 {
		ln, err := builder.ListenIn(ctx, h, proxyAddress)
		if err != nil {
			return fmt.Errorf("egress proxy of the build sandbox: %w", err)
		}
		pctx, stop := context.WithCancel(ctx)
		proxy := &egress.Proxy{Allow: step.Allow, Logger: log}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := proxy.Serve(pctx, ln); err != nil {
				log.Warn("egress proxy", "error", err)
			}
		}()
		defer func() { stop(); <-served }()
		url := "http://" + proxyAddress
		for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "npm_config_proxy", "npm_config_https_proxy"} {
			env[k] = url
		}
	}

	agent := agentclient.New(func(ctx context.Context) (net.Conn, error) { return be.DialAgent(ctx, h) })
	defer agent.CloseIdleConnections()
	cmd := agentclient.Command{
		Argv: step.Argv, Env: env, Cwd: rootfs.WorkspacePath(orDefault(step.Cwd, "/")), User: orDefault(step.User, "root"),
		Timeout: buildTimeout,
	}
	if step.Stdin != nil {
		cmd.Stdin = []byte(*step.Stdin)
	}
	lines := &lineWriter{emit: step.Output}
	res, err := runStep(ctx, id, agent, cmd, lines.write)
	lines.flush()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 && res.KilledBy != "timeout" {
		// The sandbox is new: every limit it hit is the step's.
		if hits, err := be.LimitHits(ctx, h); err == nil {
			res.Blame(backend.LimitHits{}, hits)
		} else {
			log.Warn("read limit hits", "error", err)
		}
	}
	if res.ExitCode != 0 {
		why := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.KilledBy != "" {
			why += ", killed by " + res.KilledBy
		}
		return errdefs.InvalidArgument("the command failed (%s)%s", why, lines.tail())
	}
	if err := builder.Export(ctx, h, root); err != nil {
		return err
	}
	log.Info("build step done", "duration", res.Duration)
	return nil
}

// runStep runs cmd through the build sandbox's agent, sending its output
// to out, and returns how it ended, as the core's Exec says it. A step
// whose caller went away is not killed here: its sandbox is destroyed
// right after, the command with it.
func runStep(ctx context.Context, id string, agent *agentclient.Client, cmd agentclient.Command, out func([]byte)) (exec.Result, error) {
	began := time.Now()
	exe, err := agent.Start(ctx, cmd)
	if err != nil {
		return exec.Result{}, err
	}
	defer func() { _ = exe.Close() }() // the result is already decided
	for {
		ev, err := exe.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return exec.Result{}, ctx.Err()
			}
			return exec.Result{}, fmt.Errorf("exec in sandbox %s: %w", id, err)
		}
		if ev.Exit != nil {
			return exec.ResultOf(*ev.Exit, time.Since(began)), nil
		}
		if ev.Stream == agentclient.Stdout || ev.Stream == agentclient.Stderr {
			out(ev.Data)
		}
	}
}

func orDefault(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

// lineWriter splits a command's output into lines for a step's Output, and
// keeps the last of it for an error message.
type lineWriter struct {
	emit func(string)

	mu   sync.Mutex
	part []byte   // a line not ended yet
	last []string // the last lines
}

const tailLines = 15

func (w *lineWriter) write(data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, data...)
	for {
		i := bytes.IndexAny(w.part, "\r\n")
		if i < 0 {
			return
		}
		w.line(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
}

func (w *lineWriter) line(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if w.emit != nil {
		w.emit(s)
	}
	w.last = append(w.last, s)
	if len(w.last) > tailLines {
		w.last = w.last[1:]
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.line(string(w.part))
	w.part = nil
}

// tail is the last lines, for an error message.
func (w *lineWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return ""
	}
	return ": " + strings.Join(w.last, "\n")
}
