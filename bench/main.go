// Command bench measures Hutch side by side with its peers, in one run on
// one machine, and prints medians, p90s and ratios beside the targets the
// docs/performance.md quotes:
//
//	(a) create → first output: Hutch vs `runc run` of the same bundle vs unshare
//	(b) exec round trip: Hutch vs `runc exec` into the same sandbox vs fork/exec
//	(c) memory per idle sandbox, runc and gVisor: cgroup usage, agent PSS, daemon RSS growth, density in 8 GiB
//	(d), (e): (a) and (b) with gVisor
//	(f) create → first output from a warm pool, runc and gVisor
//	(g) suspend, resume → first output and fork → first output, runc and gVisor, beside a cold create
//	(j) previews: latency and throughput through a preview vs direct, and wake on request
//	(l) scale-out: what an API replica adds to create and exec, creates a second on 1 and 3 nodes
//	(m) observability: the exec row with traces exported and metrics scraped, beside a daemon without
//	(n), (o): checkpoints and rollback; forks by the dozen
//	(p) desktops: ready, an action's round trip, the live view's frame rate, an idle desktop's memory
//	(q) density: idle sandboxes by the hundred, runc and gVisor: create and host memory per sandbox as the count grows, the runtime alone beside them
//
// It starts its own daemon on temporary directories and removes everything
// it made. It needs root, runc and unshare. Run it with `make bench`.
//
// With -json FILE it records the lines of docs/performance.md its rows
// give in FILE (results.go), beside the last figures of the rows it did
// not measure; `-write-doc PAGE -from FILE` writes the page from FILE
// (doc.go) and measures nothing. `make bench` does both.
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
	"strings"
	"syscall"
	"time"

	"github.com/hutchdev/hutch/internal/base/mountinfo"
	"github.com/hutchdev/hutch/test/neighbor"
)

// config is the command line.
type config struct {
	hutch   string
	n       int    // iterations of latency rows
	createN int    // iterations of create rows, which are slower
	warmup  int    // untimed iterations before each row
	memN    int    // sandboxes of the memory row
	gvisorN int    // iterations of the gVisor rows, whose deletes take seconds
	rows    string // the rows to measure, by letter; "": all
	e2bSDK  string // where row (k) finds the e2b SDK's node_modules
	// hutchArg is -hutch as given, and args the other flags given that
	// change what the rows measure: with them, a result's command.
	hutchArg string
	args     []string
	json     string // the results file to merge this run's results into; "": none
	writeDoc string // the page to write from the results file fromFile, instead of measuring
	fromFile string
	// densityRunc and densityGvisor are the idle sandboxes of row (q),
	// under runc and under gVisor (0: none).
	densityRunc, densityGvisor int
	// soakMode runs the soak (soak.go) instead of the rows.
	soakMode bool
	soak     soakConfig
}

func main() {
	var cfg config
	flag.StringVar(&cfg.hutch, "hutch", "bin/hutch", "the hutch binary to measure")
	flag.IntVar(&cfg.n, "n", 50, "iterations of the latency rows")
	flag.IntVar(&cfg.createN, "create-n", 60, "iterations of the create rows")
	flag.IntVar(&cfg.warmup, "warmup", 3, "untimed iterations before each row")
	flag.IntVar(&cfg.memN, "mem-n", 10, "sandboxes created for the memory row")
	flag.IntVar(&cfg.gvisorN, "gvisor-n", 20, "iterations of the gVisor rows (0: skip them)")
	flag.IntVar(&cfg.densityRunc, "density-runc", 1000, "idle runc sandboxes of the density row (q)")
	flag.IntVar(&cfg.densityGvisor, "density-gvisor", 300, "idle gVisor sandboxes of the density row (q) (0: none)")
	flag.StringVar(&cfg.e2bSDK, "e2b-sdk", "test/e2b", "the directory whose node_modules has the e2b SDK, for row (k)")
	flag.StringVar(&cfg.rows, "rows", "", "measure only these rows, by letter (\"ah\": create and network); default all")
	flag.BoolVar(&cfg.soakMode, "soak", false, "run the soak (make soak) instead of the rows")
	flag.IntVar(&cfg.soak.n, "soak-n", 2000, "soak: lifecycles of each runc phase")
	flag.IntVar(&cfg.soak.c, "soak-c", 20, "soak: concurrent clients")
	flag.Float64Var(&cfg.soak.gvisor, "soak-gvisor", 0.1, "soak: gVisor's lifecycles, as a share of -soak-n")
	flag.Float64Var(&cfg.soak.hostile, "soak-hostile", 0.05, "soak: share of full lifecycles with a hostile workload")
	flag.Float64Var(&cfg.soak.suspend, "soak-suspend", 0.1, "soak: share of full lifecycles suspended and woken")
	flag.StringVar(&cfg.json, "json", "", "merge the results of the rows measured into this file (bench/results.json), keeping the others")
	flag.StringVar(&cfg.writeDoc, "write-doc", "", "write this page (docs/performance.md) from the results file -from, and measure nothing")
	flag.StringVar(&cfg.fromFile, "from", "bench/results.json", "with -write-doc: the results file")
	flag.Parse()
	cfg.hutchArg, cfg.args = cfg.hutch, commandArgs(flag.CommandLine)
	if cfg.writeDoc != "" {
		if err := writeDoc(cfg.writeDoc, cfg.fromFile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.n < 1 || cfg.createN < 1 || cfg.memN < 1 || cfg.warmup < 0 || cfg.gvisorN < 0 {
		fmt.Fprintln(os.Stderr, "bench: -n, -create-n and -mem-n must be at least 1, -warmup and -gvisor-n at least 0")
		os.Exit(2)
	}
	if cfg.densityRunc < 1 || cfg.densityGvisor < 0 {
		fmt.Fprintln(os.Stderr, "bench: -density-runc must be at least 1, -density-gvisor at least 0")
		os.Exit(2)
	}

	if cfg.soak.n < 1 || cfg.soak.c < 1 {
		fmt.Fprintln(os.Stderr, "bench: -soak-n and -soak-c must be at least 1")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	run := run
	if cfg.soakMode {
		run = runSoak
	}
	err := run(ctx, cfg, os.Stdout)
	if ctx.Err() != nil {
		err = errors.Join(errors.New("interrupted"), err)
	}
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
	runsc    string // gVisor's runsc beside the hutch binary, or in PATH; "" skips the gVisor rows
	unshare  string
	dir      string // scratch for the runc peer's bundles
	runcRoot string // the runc peer's own state root
	// cgroupParent holds the runc peer's cgroups, beside Hutch's "hutch".
	cgroupParent string
	tty          bool // stderr, where progress goes, is a terminal
	lastProgress string
	host         hostInfo
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	b := &bench{cfg: cfg, tty: isTerminal(os.Stderr), cgroupParent: "hutch-bench-" + strconv.Itoa(os.Getpid())}
	if err := b.checkTools(); err != nil {
		return err
	}
	base, err := os.MkdirTemp("/tmp", "hb") // short: agent socket paths are limited to 107 bytes
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, removeBase(base)) }()
	// The daemon ./setup started, if it runs here, is left as it was.
	before := neighbor.Take(b.runsc)
	defer func() { err = errors.Join(err, neighbor.Take(b.runsc).Since(before)) }()
	defer func() { err = errors.Join(err, cleanup(ctx, b.checkNoContainers)) }()
	b.dir, b.runcRoot = filepath.Join(base, "b"), filepath.Join(base, "b", "runc")
	// runc reaches a runc sandbox's root from inside its user namespace,
	// as a stranger: the way to the daemon's and the peers' must be open.
	if err := errors.Join(os.Chmod(base, 0o711), os.Mkdir(b.dir, 0o711), os.Mkdir(b.runcRoot, 0o700)); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup(ctx, b.cleanupRunc)) }()
	defer func() { err = errors.Join(err, cleanup(ctx, b.cleanupRunsc)) }()

	// No warm pool: rows (a) and (d) measure cold creates; row (f) has a
	// daemon of its own with pools.
	b.d, err = startDaemon(ctx, cfg.hutch, b.runsc, base, "--pool", "base=0")
	if b.d != nil {
		defer func() { err = errors.Join(err, b.d.stop()) }()
		defer func() { err = errors.Join(err, cleanup(ctx, b.d.deleteAll)) }()
	}
	if err != nil {
		return err
	}
	b.host = collectHostInfo(ctx, b.runc, b.runsc, b.d.version, cfg.hutch)
	var head strings.Builder
	printHeader(&head, b.host)
	if _, err := io.WriteString(out, head.String()); err != nil {
		return err
	}
	return b.measureAll(ctx, out)
}

// measureAll runs the rows and prints the table, with the rows that were
// measured even when a later one fails, and records them with -json.
func (b *bench) measureAll(ctx context.Context, out io.Writer) error {
	var sections []section
	var results []result
	var err error
	measures := map[string]func(context.Context) (section, error){
		"a": b.measureCreate, "b": b.measureExec, "c": b.measureMemory,
		"f": b.measurePool, "g": b.measureSuspend, "h": b.measureNetwork, "i": b.measureCode,
		"j": b.measurePreview, "k": b.measureE2B, "l": b.measureCluster, "m": b.measureObserved, "n": b.measureCheckpoint, "o": b.measureForks,
		"p": b.measureDesktop, "q": b.measureDensity,
	}
	if b.runsc != "" && b.cfg.gvisorN > 0 {
		measures["d"], measures["e"] = b.measureGvisorCreate, b.measureGvisorExec
	} else {
		fmt.Fprintln(os.Stderr, "bench: no gVisor rows: runsc is not beside the hutch binary nor in PATH (make runsc), or -gvisor-n 0")
	}
	for _, letter := range strings.Split("abcdefghijklmnopq", "") {
		measure, ok := measures[letter]
		if !ok || b.cfg.rows != "" && !strings.Contains(b.cfg.rows, letter) {
			continue
		}
		var s section
		if s, err = measure(ctx); err != nil {
			break
		}
		sections = append(sections, s)
		results = append(results, stamp(s.results, letter, b.command(letter), b.host, time.Now())...)
	}
	if len(sections) == 0 {
		return err
	}
	var table strings.Builder
	missed := printTable(&table, sections)
	fmt.Fprintf(&table, "\n%d of docs/performance.md's targets missed.\n", missed)
	var jerr error
	if b.cfg.json != "" {
		if jerr = saveResults(b.cfg.json, results); jerr != nil {
			jerr = fmt.Errorf("record the results in %s: %w", b.cfg.json, jerr)
		} else {
			fmt.Fprintf(&table, "%d lines of docs/performance.md recorded in %s.\n", len(results), b.cfg.json)
		}
	}
	_, werr := io.WriteString(out, table.String())
	return errors.Join(err, jerr, werr)
}

// command is what measures row letter again, as this run did.
func (b *bench) command(letter string) string {
	return strings.Join(append([]string{"go run ./bench -hutch", shellQuote(b.cfg.hutchArg), "-rows", letter}, b.cfg.args...), " ")
}

// commandArgs are the flags given on the command line that change what a
// row measures, as they would be typed: not -hutch and -rows, which
// command puts first, nor where results go, nor the soak's.
func commandArgs(fs *flag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "hutch" || f.Name == "rows" || f.Name == "json" || f.Name == "write-doc" || f.Name == "from":
		case strings.HasPrefix(f.Name, "soak"):
		default:
			args = append(args, "-"+f.Name, shellQuote(f.Value.String()))
		}
	})
	return args
}

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	if p := filepath.Join(filepath.Dir(b.cfg.hutch), "runsc"); isExecutable(p) {
		b.runsc = p
	} else if p, err := exec.LookPath("runsc"); err == nil {
		b.runsc = p
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
	points, err := mountinfo.Under(base)
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
		b.showProgress("%s: round %d/%d (%d warm-up)", title, i+1, w+n, w)
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
	b.endProgress()
	return nil
}

// showProgress overwrites the progress line on a terminal. Elsewhere (make
// bench | tee) it stays quiet until endProgress, so as not to fill the log.
func (b *bench) showProgress(format string, a ...any) {
	b.lastProgress = fmt.Sprintf(format, a...)
	if b.tty {
		fmt.Fprintf(os.Stderr, "\r%s ", b.lastProgress)
	}
}

// endProgress ends the progress line, leaving its last state.
func (b *bench) endProgress() {
	if b.tty {
		fmt.Fprintln(os.Stderr)
	} else {
		fmt.Fprintln(os.Stderr, b.lastProgress)
	}
}

// isTerminal reports whether f is a character device, a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
