package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// TestPtyInProcess opens terminal sessions through the API, the Go client
// and the fake backend's real agent: a terminal of the size asked for,
// input, exit codes, a kill, secrets redacted, JSON errors before the
// upgrade, and the audit log. (TestPty in test/e2e drives sessions under
// both runtimes, pipes without a terminal too.)
func TestPtyInProcess(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the fake backend's agent needs root: it starts commands as the sandbox user")
	}
	s := newTestServer(t)
	ctx := t.Context()
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.client.DeleteSandbox(context.WithoutCancel(ctx), sb.ID); err != nil {
			t.Error(err)
		}
	})
	// The fake's sandbox sees the host's file system.
	workspace := filepath.Join(s.be.Root(sb.ID), rootfs.Workspace)

	t.Run("errors before the upgrade", func(t *testing.T) {
		tests := []struct {
			name, query string
			upgrade     bool
			status      int
			text        string
		}{
			{"not a WebSocket", "", false, 400, "this route is a WebSocket"},
			{"bad tty", "tty=maybe", true, 400, "tty must be true or false"},
			{"bad cols", "cols=wide", true, 400, "cols must be an integer"},
			{"bad size", "cols=0", true, 400, "1 to 10000 columns and rows"},
			{"bad env", "env=NOEQUALS", true, 400, "env must be K=V"},
			{"bad env name", "env=1X%3Dy", true, 400, "not a valid variable name"},
			{"bad cwd", "cwd=/nonexistent", true, 400, "working directory /nonexistent"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/sandboxes/"+sb.ID+"/pty?"+tt.query, nil)
				req.Header.Set("Authorization", "Bearer "+testKey)
				if tt.upgrade {
					req.Header.Set("Connection", "Upgrade")
					req.Header.Set("Upgrade", "websocket")
					req.Header.Set("Sec-WebSocket-Version", "13")
					req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				var body errorBody
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != tt.status || !strings.Contains(body.Error.Message, tt.text) {
					t.Errorf("status %d, body %+v (%v); want %d with %q", resp.StatusCode, body, err, tt.status, tt.text)
				}
			})
		}
		// A browser's key comes as a subprotocol; the daemon picks hutch.v1.
		// In a sandbox of its own: the session, closed at once, is in the
		// audit log as 101 or not, whichever end saw the close first.
		other, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.client.DeleteSandbox(context.WithoutCancel(ctx), other.ID) }()
		for _, tt := range []struct {
			key  string
			want int
		}{{testKey, http.StatusSwitchingProtocols}, {"hutch_nope", http.StatusUnauthorized}} {
			conn, resp, err := websocket.Dial(ctx, strings.Replace(s.url, "http", "ws", 1)+"/v1/sandboxes/"+other.ID+"/pty?cmd=true&cwd=/",
				&websocket.DialOptions{Subprotocols: []string{"hutch.v1", "hutch.bearer." + tt.key}})
			if resp == nil || resp.StatusCode != tt.want {
				var body []byte
				if resp != nil {
					body, _ = io.ReadAll(resp.Body)
				}
				t.Errorf("a key as a subprotocol (%s): %v, %v %s; want %d", tt.key, resp, err, body, tt.want)
			}
			if conn != nil {
				if conn.Subprotocol() != "hutch.v1" {
					t.Errorf("the daemon picked subprotocol %q, want hutch.v1", conn.Subprotocol())
				}
				_ = conn.CloseNow()
			}
		}
		if _, err := s.client.Pty(ctx, "nosuchbox", client.PtyRequest{}); !client.IsNotFound(err) {
			t.Errorf("a session in an unknown sandbox: %v", err)
		}
	})

	t.Run("terminal", func(t *testing.T) {
		sess, err := s.client.Pty(ctx, sb.ID, client.PtyRequest{
			Command: `test -t 0 && stty size; read x; echo "got-$x"; exit 4`, Cwd: workspace, Cols: 90, Rows: 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sess.Close() }()
		if sess.Pid == 0 {
			t.Error("no pid in the started frame")
		}
		readUntil(t, sess, "20 90")
		if err := sess.Write(ctx, []byte("hi\r")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, sess, "got-hi")
		exit, err := sess.Wait(ctx)
		if err != nil || exit.ExitCode != 4 || exit.Signal != "" {
			t.Errorf("exit %+v, %v; want 4", exit, err)
		}
	})

	t.Run("killed", func(t *testing.T) {
		sess, err := s.client.Pty(ctx, sb.ID, client.PtyRequest{Command: "echo ready; sleep 1000", Cwd: workspace})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sess.Close() }()
		readUntil(t, sess, "ready")
		if err := sess.Signal(ctx, "KILL"); err != nil {
			t.Fatal(err)
		}
		exit, err := sess.Wait(ctx)
		if err != nil || exit.ExitCode != 137 || exit.Signal != "SIGKILL" || exit.KilledBy != client.KilledBySignal {
			t.Errorf("exit %+v, %v; want killed by SIGKILL", exit, err)
		}
	})

	t.Run("secrets redacted", func(t *testing.T) {
		const value = "pty-secret-value-1234"
		if _, err := s.client.SetSecret(ctx, client.SetSecretRequest{Name: "PTY_TOKEN", Value: value}); err != nil {
			t.Fatal(err)
		}
		sess, err := s.client.Pty(ctx, sb.ID, client.PtyRequest{Command: "printf '%s\\n' " + value, Cwd: workspace})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sess.Close() }()
		out := readUntil(t, sess, "\n")
		if strings.Contains(out, value) || !strings.Contains(out, "[redacted:PTY_TOKEN]") {
			t.Errorf("output %q", out)
		}
	})

	// A session is recorded when it ends, which the daemon sees a moment
	// after the client closed it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		entries, err := s.client.ListAudit(ctx, client.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		sessions := 0
		for _, e := range entries {
			if e.Action == "GET /v1/sandboxes/{id}/pty" && e.Object == sb.ID && e.Status == http.StatusSwitchingProtocols {
				sessions++
			}
		}
		if sessions == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d terminal sessions in the audit log, want 3", sessions)
		}
	}
}

// readUntil reads a session's output until it holds want.
func readUntil(t *testing.T, sess *client.PtySession, want string) string {
	t.Helper()
	var out bytes.Buffer
	for !strings.Contains(out.String(), want) {
		chunk, err := sess.Read(t.Context())
		if err != nil {
			t.Fatalf("read %q, then %v; want %q", out.String(), err, want)
		}
		out.Write(chunk.Data)
	}
	return out.String()
}
