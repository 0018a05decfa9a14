package backendtest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/runtime/backend"
)

// testBuilder checks what template builds need (backend.Builder): a
// listener the daemon serves on the sandbox's loopback, and the sandbox's
// changes applied to the root it was made from.
func (s *suite) testBuilder(t *testing.T) {
	builder := s.backend.Capabilities().Build
	if builder == nil {
		t.Skip("the backend does not run template builds")
	}
	// The root is a copy: Export writes into it.
	root := filepath.Join(t.TempDir(), "root")
	// #nosec G204 -- the harness's own root, copied into the test's directory
	if out, err := exec.Command("cp", "-a", s.h.Spec(t).RootDir, root).CombinedOutput(); err != nil {
		t.Fatalf("copy the root: %v: %s", err, out)
	}
	// #nosec G302 -- sandboxes traverse it from their user namespaces
	if err := os.Chmod(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "etc/hutch-gone"), "delete me")
	mustWrite(t, filepath.Join(root, "etc/hutch-kept"), "keep me")
	// A directory removed and made again in the sandbox (opaque, in an
	// overlay) loses what it had.
	// #nosec G301 -- a directory of the root, which sandboxes read
	if err := os.MkdirAll(filepath.Join(root, "opt/hutch-again"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "opt/hutch-again/old"), "old")
	// Another root sharing a file by a hard link keeps its contents.
	shared := filepath.Join(t.TempDir(), "shared")
	mustWrite(t, filepath.Join(root, "etc/hutch-changed"), "before")
	if err := os.Link(filepath.Join(root, "etc/hutch-changed"), shared); err != nil {
		t.Fatal(err)
	}

	sb := s.create(t, func(sp *backend.Spec) { sp.RootDir = root })

	t.Run("ListenIn", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		ln, err := builder.ListenIn(ctx, sb.handle, "127.0.0.1:3128")
		if !s.h.ListensIn {
			wantKind(t, "ListenIn", err, errdefs.ErrFailedPrecondition)
			return
		}
		if err != nil {
			t.Fatalf("ListenIn: %v", err)
		}
		srv := &http.Server{ReadHeaderTimeout: callTimeout, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello from the daemon") // the test reads it
		})}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		// bash's /dev/tcp: a client every root with bash has.
		r := sb.sh(t, `bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128 && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3'`)
		if r.exitCode != 0 || !strings.Contains(r.stdout, "hello from the daemon") {
			t.Errorf("the sandbox's request to its 127.0.0.1:3128: exit %d, %q, %q", r.exitCode, r.stdout, r.stderr)
		}
		// The listener is the sandbox's: the host's 127.0.0.1:3128 is not it.
		if c, err := net.Dial("tcp", "127.0.0.1:3128"); err == nil {
			defer c.Close()
			_, _ = io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
			if b, _ := io.ReadAll(c); strings.Contains(string(b), "hello from the daemon") {
				t.Error("the sandbox's listener answers on the host's loopback")
			}
		}
	})

	t.Run("Export", func(t *testing.T) {
		out := sb.shAsRoot(t, `set -e
echo new > /etc/hutch-new
rm /etc/hutch-gone
echo after > /etc/hutch-changed
mkdir -p /opt/hutch/dir && echo mine > /opt/hutch/dir/file && chown -R 1000:1000 /opt/hutch
chmod 4755 /opt/hutch/dir/file
ln -s /etc/hutch-new /etc/hutch-link
ln /etc/hutch-new /etc/hutch-hardlink
rm -r /opt/hutch-again && mkdir /opt/hutch-again && echo fresh > /opt/hutch-again/new`)
		if out.exitCode != 0 {
			t.Fatalf("changing the root: exit %d: %s", out.exitCode, out.stderr)
		}
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		if err := builder.Export(ctx, sb.handle, root); err != nil {
			t.Fatalf("Export: %v", err)
		}
		wantFile(t, filepath.Join(root, "etc/hutch-new"), "new\n")
		wantFile(t, filepath.Join(root, "etc/hutch-kept"), "keep me")
		wantFile(t, filepath.Join(root, "etc/hutch-changed"), "after\n")
		wantFile(t, shared, "before")
		if _, err := os.Lstat(filepath.Join(root, "etc/hutch-gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("etc/hutch-gone, deleted in the sandbox: %v", err)
		}
		wantFile(t, filepath.Join(root, "opt/hutch-again/new"), "fresh\n")
		if _, err := os.Lstat(filepath.Join(root, "opt/hutch-again/old")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("opt/hutch-again/old, in a directory made again in the sandbox: %v", err)
		}
		if dest, err := os.Readlink(filepath.Join(root, "etc/hutch-link")); err != nil || dest != "/etc/hutch-new" {
			t.Errorf("etc/hutch-link -> %q, %v", dest, err)
		}
		file := filepath.Join(root, "opt/hutch/dir/file")
		wantFile(t, file, "mine\n")
		fi, err := os.Lstat(file)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		// The sandbox's own ids, whatever host ids it ran with.
		if st.Uid != 1000 || st.Gid != 1000 || fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("opt/hutch/dir/file: owner %d:%d, mode %v; want 1000:1000, setuid 0755", st.Uid, st.Gid, fi.Mode())
		}
		a, errA := os.Stat(filepath.Join(root, "etc/hutch-new"))
		b, errB := os.Stat(filepath.Join(root, "etc/hutch-hardlink"))
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			t.Errorf("etc/hutch-hardlink is not a hard link of etc/hutch-new: %v %v", errA, errB)
		}
		if left, _ := filepath.Glob(filepath.Join(root, "etc/.hutch-new-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	})
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	// #nosec G306 -- a file of the root, which sandboxes read
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path) // #nosec G304 -- a path the test made
	if err != nil || string(b) != want {
		t.Errorf("%s = %q, %v; want %q", path, b, err, want)
	}
}
