// Command bench measures Hutch side by side with its peers, in one run on
// one machine, and prints medians, p90s and ratios beside the targets the
// README quotes:
//
//	(a) create → first output: Hutch vs `runc run` of the same bundle vs unshare
//	(b) exec round trip: Hutch vs `runc exec` into the same sandbox vs fork/exec
//	(c) memory per idle sandbox: cgroup usage, agent PSS, daemon RSS growth
//
// It starts its own daemon on temporary directories and removes everything
// it made. It needs root, runc and unshare. Run it with `make bench`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	hutch   string
	n       int // iterations of latency rows
	createN int // iterations of create rows, which are slower
	warmup  int // untimed iterations before each row
	memN    int // sandboxes of the memory row
}

func main() {
	var cfg config
	flag.StringVar(&cfg.hutch, "hutch", "bin/hutch", "the hutch binary to measure")
	flag.IntVar(&cfg.n, "n", 50, "iterations of the latency rows")
	flag.IntVar(&cfg.createN, "create-n", 30, "iterations of the create rows")
	flag.IntVar(&cfg.warmup, "warmup", 3, "untimed iterations before each row")
	flag.IntVar(&cfg.memN, "mem-n", 10, "sandboxes created for the memory row")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is one run: the daemon under test and the peers' tools.
type bench struct {
	cfg      config
	d        *daemon
	runc     string
	unshare  string
	dir      string // scratch for the runc peer's bundles
	runcRoot string // the runc peer's own state root
	// cgroupParent holds the runc peer's cgroups, beside Hutch's "hutch".
	cgroupParent string
	progress     io.Writer
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	b := &bench{cfg: cfg, progress: os.Stderr, cgroupParent: "hutch-bench-" + strconv.Itoa(os.Getpid())}
	if err := b.checkTools(); err != nil {
		return err
	}
	base, err := os.MkdirTemp("/tmp", "hb") // short: agent socket paths are limited to 107 bytes
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, removeBase(base)) }()
	b.dir, b.runcRoot = filepath.Join(base, "b"), filepath.Join(base, "b", "runc")
	if err := os.MkdirAll(b.runcRoot, 0o700); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup(ctx, b.cleanupRunc)) }()

	b.d, err = startDaemon(ctx, cfg.hutch, base)
	if b.d != nil {
		defer func() { err = errors.Join(err, b.d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, b.d.deleteAll)) }()
	}
	if err != nil {
		return err
	}
	printHeader(out, collectHostInfo(ctx, b.runc, b.d.version, cfg.hutch))
	return b.measureAll(ctx, out)
}

// measureAll runs the rows and prints the table, with the rows that were
// measured even when a later one fails.
func (b *bench) measureAll(ctx context.Context, out io.Writer) error {
	var sections []section
	var err error
	for _, measure := range []func(context.Context) (section, error){b.measureCreate, b.measureExec, b.measureMemory} {
		var s section
		if s, err = measure(ctx); err != nil {
			break
		}
		sections = append(sections, s)
	}
	missed := printTable(out, sections)
	fmt.Fprintf(out, "\n%d target(s) missed.\n", missed)
	return err
}

func (b *bench) checkTools() error {
	if os.Geteuid() != 0 {
		return errors.New("run me as root: sandboxes need mounts and cgroups")
	}
	var err error
	if b.cfg.hutch, err = filepath.Abs(b.cfg.hutch); err != nil {
		return err
	}
	if _, err := os.Stat(b.cfg.hutch); err != nil {
		return fmt.Errorf("hutch binary: %w (make build makes it)", err)
	}
	if b.runc, err = exec.LookPath("runc"); err != nil {
		return fmt.Errorf("runc: %w (./setup --deps installs it)", err)
	}
	if b.unshare, err = exec.LookPath("unshare"); err != nil {
		return fmt.Errorf("unshare: %w (apt-get install util-linux)", err)
	}
	return nil
}

// cleanup runs fn with a context that outlives a ^C, so that cleanup still
// happens, but not forever.
func cleanup(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return fn(ctx)
}

// removeBase deletes the bench's temporary directory, unless something is
// still mounted under it: deleting through a mount could reach files that
// are not ours.
func removeBase(base string) error {
	points, err := mountsUnder(base)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("left %s in place: still mounted under it: %v", base, points)
	}
	return os.RemoveAll(base)
}

// peer is one contender of a row and its timed samples.
type peer struct {
	name    string
	run     func(context.Context) (time.Duration, error)
	samples []time.Duration
}

// interleave runs cfg.warmup untimed rounds, then n timed rounds, of every
// peer. Each round runs every peer once, starting with a different one each
// time (round-robin), so that drift and noise hit all of them alike.
func (b *bench) interleave(ctx context.Context, title string, n int, peers ...*peer) error {
	w := b.cfg.warmup
	for i := range w + n {
		fmt.Fprintf(b.progress, "\r%s: round %d/%d (%d warm-up) ", title, i+1, w+n, w)
		for j := range peers {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := peers[(i+j)%len(peers)]
			d, err := p.run(ctx)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", title, p.name, err)
			}
			if i >= w {
				p.samples = append(p.samples, d)
			}
		}
	}
	fmt.Fprintln(b.progress)
	return nil
}
