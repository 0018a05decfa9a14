package cli

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// createFlags are the flags that describe a new sandbox (create and run).
type createFlags struct {
	template    string
	runtime     string
	cpus        float64
	memoryMB    int64
	pids        int64
	diskMB      int64
	env         []string
	meta        []string
	idleTimeout time.Duration
	idleAction  string
	checkpoints string
	key         string
	maxLifetime time.Duration
	files       []string
	filesFrom   string
	snapshot    string
	volumes     []string
	network     networkFlags
	user        string
	secrets     []string
}

func (f *createFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.template, "template", "", "template to start from (default: the daemon's, host)")
	fl.StringVar(&f.runtime, "runtime", "", "runc or gvisor (default: the daemon's, gvisor when it can)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPUs (default 1)")
	fl.Int64Var(&f.memoryMB, "memory", 0, "memory limit in MiB (default 512)")
	fl.Int64Var(&f.pids, "pids", 0, "process limit (default 256)")
	fl.Int64Var(&f.diskMB, "disk", 0, "size limit of the sandbox's files in MiB, /tmp included (default 2048)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable `K=V` (or K, taken from here); repeatable")
	fl.StringArrayVar(&f.meta, "meta", nil, "metadata `k=v`; repeatable")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "suspend (or delete) the sandbox after this long without activity (default 5m)")
	fl.StringVar(&f.key, "key", "", "get or create: the sandbox with this key if there is one (woken if suspended), else a new one with it")
	fl.StringArrayVar(&f.volumes, "volume", nil, "mount a volume: `NAME[:PATH[:ro|rw]]` (PATH default /mnt/NAME, in /home/user or under /mnt; rw by default); repeatable")
	fl.StringVar(&f.snapshot, "from-snapshot", "", "start from this snapshot's files (see hutch snapshot) instead of a template")
	fl.StringArrayVar(&f.files, "file", nil, "put a local text file in the workspace before the first command: `DEST=SRC` (DEST in /home/user/workspace); repeatable")
	fl.StringVar(&f.filesFrom, "files-from", "", "unpack into the workspace before the first command: a local `DIR`, or a .tar or .tar.gz (at most 32 MiB)")
	fl.DurationVar(&f.maxLifetime, "max-lifetime", 0, "delete the sandbox, running or suspended, this long after its creation (default 720h)")
	fl.StringVar(&f.user, "for-user", "", "the product's user it is made for: whose personal secrets its commands get (default: $HUTCH_USER)")
	fl.StringSliceVar(&f.secrets, "secret", nil, "give its commands only these of the workspace's secrets (default: all); repeatable")
	f.network.register(cmd, "")
	fl.StringVar(&f.checkpoints, "checkpoints", "", "per_tool_call: a checkpoint before each tool call that changes files, which the call's result names (undo_checkpoint)")
	fl.StringVar(&f.idleAction, "idle-action", "", "what the idle timeout does: suspend (files kept, memory too under gVisor; the next call resumes it; the default), stop (files kept; hutch start starts it) or delete")
}

func (f *createFlags) request(a *app, cmd *cobra.Command) (client.CreateSandboxRequest, error) {
	req := client.CreateSandboxRequest{
		Template:     f.template,
		Runtime:      f.runtime,
		CPUs:         f.cpus,
		MemoryMB:     f.memoryMB,
		Pids:         f.pids,
		DiskMB:       f.diskMB,
		IdleAction:   f.idleAction,
		Checkpoints:  f.checkpoints,
		Key:          f.key,
		FromSnapshot: f.snapshot,
		User:         f.user,
		Secrets:      f.secrets,
	}
	if f.idleTimeout < 0 || f.maxLifetime < 0 {
		return req, usageErrorf(cmd, "--idle-timeout and --max-lifetime must not be negative")
	}
	req.IdleTimeoutS, req.MaxLifetimeS = seconds(f.idleTimeout), seconds(f.maxLifetime)
	for _, spec := range f.volumes {
		v, err := parseVolume(cmd, spec)
		if err != nil {
			return req, err
		}
		req.Volumes = append(req.Volumes, v)
	}
	for _, spec := range f.files {
		dest, src, ok := strings.Cut(spec, "=")
		if !ok || dest == "" || src == "" {
			return req, usageErrorf(cmd, "--file takes DEST=SRC, got %q", spec)
		}
		// #nosec G304 -- the caller's own file, named on their command line
		b, err := os.ReadFile(src)
		if err != nil {
			return req, err
		}
		if !utf8.Valid(b) {
			return req, usageErrorf(cmd, "--file %s: not UTF-8 text; copy binary files in with hutch cp", src)
		}
		if req.Files == nil {
			req.Files = map[string]string{}
		}
		req.Files[dest] = string(b)
	}
	var err error
	if req.Network, err = f.network.policy(cmd); err != nil {
		return req, err
	}
	if req.FilesTar, err = readFilesFrom(f.filesFrom); err != nil {
		return req, err
	}
	if req.Env, err = parseEnv(a, cmd, f.env); err != nil {
		return req, err
	}
	if req.Metadata, err = parsePairs(cmd, "--meta", f.meta); err != nil {
		return req, err
	}
	return req, nil
}

// parseEnv turns -e flags into a map. A bare K takes its value from hutch's
// own environment, as docker does.
func parseEnv(a *app, cmd *cobra.Command, flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(flags))
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return nil, usageErrorf(cmd, "-e %q: want K=V", kv)
		}
		if !ok {
			if v, ok = a.lookupEnv(k); !ok {
				return nil, usageErrorf(cmd, "-e %s: %s is not set here; give -e %s=VALUE", k, k, k)
			}
		}
		env[k] = v
	}
	return env, nil
}

// parsePairs turns repeated k=v flags into a map.
func parsePairs(cmd *cobra.Command, flag string, flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(flags))
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf(cmd, "%s %q: want k=v", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func (a *app) newCreateCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create [flags]",
		Short: "Create a sandbox and print its ID",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request(a, cmd)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			sb, err := a.createSandbox(cmd.Context(), c, req, 0)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(sb)
			}
			_, err = fmt.Fprintln(a.stdout, sb.ID)
			return err
		},
	}
	f.register(cmd)
	return cmd
}

// maxFilesTar is what a create's files_tar may hold (the daemon's bound).
const maxFilesTar = 32 << 20

// readFilesFrom reads --files-from: a directory, packed into a tar here,
// or a tar file (gzipped or not), sent as it is.
func readFilesFrom(name string) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		b, err := tarDir(name, maxFilesTar)
		if err != nil {
			return nil, fmt.Errorf("--files-from: %w", err)
		}
		return b, nil
	}
	if fi.Size() > maxFilesTar {
		return nil, fmt.Errorf("--files-from %s: over %d MiB", name, maxFilesTar>>20)
	}
	// #nosec G304 -- the caller's own file, named on their command line
	return os.ReadFile(name)
}
