package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/net/nettest"
	"github.com/hutchdev/hutch/internal/net/sandboxnet"
)

// gitHost is where the test's private git server answers: a host of the
// test internet, on a port of its own (its 443 is the internet's).
const (
	gitHost = "allowed.test:8443"
	gitRepo = "https://" + gitHost + "/repo.git"
)

// A private repository on a git host, cloned and pushed to over HTTPS
// from a sandbox with a token that never enters it: the token is a proxy
// secret for the host, whose placeholder git's credential helper gives as
// the password of a basic credential; the daemon swaps the value in, in
// the encoded credential, on its way out. The push reaches
// the host; the token is nowhere in the sandbox (not in .git/config, the
// remote's URL, the environment or any file of the checkout), nor is the
// placeholder written down; and a sandbox the secret is not given to gets
// 401 for the same placeholder.
func TestGitToken(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("the git token test needs git on the host (its server is git http-backend): apt-get install git")
	}
	backend := gitExecPath(t, gitBin) + "/git-http-backend"
	if !isExecutable(backend) {
		t.Skipf("the git token test needs %s (Debian's git package has it)", backend)
	}
	if skipReason != "" {
		t.Skip(skipReason)
	}
	in := nettest.Start(t)
	const token = "ghp_TestToken0123456789abcdefGHIJKLmnop"
	srv := startGitServer(t, in, backend, token)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, srv.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, "--network-netns", in.Netns, "--network-dns", in.DNS, "--egress-roots", roots)
	ctx := t.Context()
	for _, s := range []client.SetSecretRequest{
		{Name: "GIT_TOKEN", Value: token, Inject: client.InjectProxy, Hosts: []string{gitHost}},
		{Name: "OTHER", Value: "another-secret-value-42"},
	} {
		if _, err := d.client.SetSecret(ctx, s); err != nil {
			t.Fatalf("set %s: %v", s.Name, err)
		}
	}
	list, err := d.client.ListSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	placeholder := ""
	for _, s := range list {
		if s.Name == "GIT_TOKEN" {
			placeholder = s.Placeholder
		}
	}
	if !strings.HasPrefix(placeholder, "hutch-secret-GIT_TOKEN-") {
		t.Fatalf("GIT_TOKEN's placeholder: %q, in %+v", placeholder, list)
	}
	// leaks says which of the token's forms, its redaction mark (the
	// daemon's sign that the value was there) or, when asked, the
	// placeholder, out holds.
	leaks := func(out string, withPlaceholder bool) []string {
		var found []string
		for form, e := range encodings(token) {
			if strings.Contains(out, e) {
				found = append(found, "the token ("+form+")")
			}
		}
		if strings.Contains(out, "[redacted:GIT_TOKEN]") {
			found = append(found, "the value, redacted")
		}
		if withPlaceholder && strings.Contains(out, placeholder) {
			found = append(found, "the placeholder")
		}
		return found
	}
	allow := &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{"allowed.test"}}
	// helper is git's credential helper as a user sets it up once, in
	// ~/.gitconfig: it answers with the token's variable, by its name.
	helper := func(password string) string {
		return `'!f() { test "$1" = get && echo username=x-access-token && echo "password=` + password + `"; }; f'`
	}

	forEachRuntime(t, func(t *testing.T, runtime string) {
		// A sandbox the secret is not given to: the placeholder it may
		// know is worth nothing, and no credential at all is refused
		// too. Its connections are not intercepted (it has no secret
		// for the host), so it trusts the git host's own CA.
		without := d.create(client.CreateSandboxRequest{Runtime: runtime, Network: allow, Secrets: []string{"OTHER"},
			Files: map[string]string{"git-ca.pem": string(srv.caPEM)}})
		before := len(srv.requests())
		res := d.exec(without.ID, `printf '[%s]\n' "$GIT_TOKEN"; export GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$PWD/git-ca.pem"; `+
			`git -c credential.helper=`+helper(placeholder)+` clone -q `+gitRepo+` with-placeholder 2>&1; echo "exit $?"; `+
			`git clone -q `+gitRepo+` anonymous 2>&1; echo "exit $?"; ls`)
		if !strings.HasPrefix(res.Stdout, "[]\n") || strings.Count(res.Stdout, "exit 128\n") != 2 ||
			strings.Contains(res.Stdout, "with-placeholder\n") || strings.Contains(res.Stdout, "anonymous\n") {
			t.Errorf("clones without the secret: %q; want both refused (exit 128) and GIT_TOKEN unset", res.Stdout)
		}
		seen := srv.requests()[before:]
		if len(seen) == 0 {
			t.Fatalf("the git host saw no request from the sandbox without the secret: %q", res.Stdout)
		}
		sent := map[string]bool{}
		note := func(seen []gitRequest) {
			for _, r := range seen {
				sent[r.password] = true
				if r.status != http.StatusUnauthorized || r.password != "" && r.password != placeholder {
					t.Errorf("the git host answered %d to %s %s with Authorization %q; want 401, and the placeholder or nothing", r.status, r.method, r.target, r.authorization)
				}
			}
		}
		note(seen)
		// Under CI's load a clone has once (gVisor) ended before its
		// second request, the one with the credential, reached the host:
		// it is tried again, twice at most, before the check fails.
		for try := 0; !sent[placeholder] && try < 2; try++ {
			from := len(srv.requests())
			retry := d.exec(without.ID, `export GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$PWD/git-ca.pem"; `+
				`git -c credential.helper=`+helper(placeholder)+` clone -q `+gitRepo+` with-placeholder 2>&1; echo "exit $?"`)
			t.Logf("the host saw no placeholder; the clones said %q, and again %q", res.Stdout, retry.Stdout)
			note(srv.requests()[from:])
		}
		if !sent[placeholder] || !sent[""] {
			t.Errorf("the git host was sent passwords %v; want the placeholder as it is, and none (git said %q)", sent, res.Stdout)
		}
		if err := d.client.DeleteSandbox(ctx, without.ID); err != nil {
			t.Fatal(err)
		}

		// A sandbox given the secret clones, commits and pushes with it.
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime, Network: allow})
		before = len(srv.requests())
		file := "from-" + runtime + ".txt"
		script := `set -e; export GIT_TERMINAL_PROMPT=0
git config --global credential.helper ` + helper(`$GIT_TOKEN`) + `
rm -rf repo
git clone -q ` + gitRepo + `
cd repo
echo "written in a ` + runtime + ` sandbox" > ` + file + `
git add ` + file + `
git -c user.name=Agent -c user.email=agent@example.com commit -q -m "from ` + runtime + `"
git push -q origin HEAD 2>&1
git log --format=%s -1 origin/main`
		res = d.exec(sb.ID, script)
		if res.ExitCode != 0 || res.Stdout != "from "+runtime+"\n" {
			t.Fatalf("clone, commit and push: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		seen = srv.requests()[before:]
		pushed := false
		// git asks its credential helper once a request without one is
		// refused: each such first try is a 401, every other request
		// carries the token.
		for _, r := range seen {
			if r.password != token && (r.password != "" || r.status != http.StatusUnauthorized) {
				t.Errorf("the git host answered %d to %s %s with a password other than the token; want every request with a credential made with it", r.status, r.method, r.target)
			}
			pushed = pushed || r.method == http.MethodPost && strings.HasSuffix(r.target, "/git-receive-pack")
		}
		if !pushed {
			t.Errorf("the git host saw no push: %+v", seen)
		}
		if got := srv.git(t, "log", "-1", "--format=%s", "main"); got != "from "+runtime+"\n" {
			t.Errorf("the host's repository's last commit: %q; want the sandbox's", got)
		}
		if got := srv.git(t, "show", "main:"+file); got != "written in a "+runtime+" sandbox\n" {
			t.Errorf("the pushed file on the host: %q", got)
		}

		// Nothing of the token in the checkout's config, its remote, the
		// environment a command gets, nor anywhere in the checkout; the
		// placeholder was not written down either.
		res = d.exec(sb.ID, `cd repo && cat .git/config && git remote -v && git config --show-origin --get-regexp 'extraheader|url|credential' || true`)
		if found := leaks(res.Stdout+res.Stderr, true); len(found) > 0 || res.ExitCode != 0 ||
			!strings.Contains(res.Stdout, "url = "+gitRepo+"\n") || !strings.Contains(res.Stdout, "origin\t"+gitRepo+" (push)") ||
			strings.Contains(strings.ToLower(res.Stdout), "authorization") {
			t.Errorf(".git/config and the remote hold %v (or no plain URL):\n%s%s", found, res.Stdout, res.Stderr)
		}
		res = d.exec(sb.ID, `env`)
		if found := leaks(res.Stdout, false); len(found) > 0 || !strings.Contains(res.Stdout, "GIT_TOKEN="+placeholder+"\n") {
			t.Errorf("a command's environment holds %v, or not the placeholder:\n%s", found, res.Stdout)
		}
		// The whole checkout (and the home, where a global git config
		// or credential store would be), packed and searched here: the
		// sandbox is never handed the token to grep for.
		res = d.exec(sb.ID, `tar -C /home/user -cf - . 2>/dev/null | base64 -w0`)
		tarball, err := base64.StdEncoding.DecodeString(res.Stdout)
		if err != nil || len(tarball) < 10<<10 || !strings.Contains(string(tarball), "repo/.git/config") {
			t.Fatalf("the home as a tarball: %d bytes, %v", len(tarball), err)
		}
		if found := leaks(string(tarball), true); len(found) > 0 {
			t.Errorf("the files of /home/user hold %v", found)
		}
		if res := d.exec(sb.ID, `grep -rlF hutch-secret- /home/user /tmp 2>/dev/null | wc -l`); res.Stdout != "0\n" {
			t.Errorf("files holding a placeholder: %q", res.Stdout)
		}
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// gitExecPath is where git keeps its helpers (git-http-backend).
func gitExecPath(t *testing.T, gitBin string) string {
	t.Helper()
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// gitServer is a private git host: git's smart HTTP (git http-backend
// through CGI) over TLS, in the test internet, refusing with 401 what
// does not carry the token as a basic credential's password, as GitHub
// does.
type gitServer struct {
	root  string // GIT_PROJECT_ROOT: repo.git in it
	caPEM []byte // the CA its certificate is signed by

	mu   sync.Mutex
	seen []gitRequest
}

// gitRequest is a request the git host was sent, and its answer.
type gitRequest struct {
	method, target string
	authorization  string // the header, as it came
	password       string // the basic credential's, "" for none
	status         int
}

func (s *gitServer) requests() []gitRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gitRequest(nil), s.seen...)
}

// git runs git on the host's repository and returns its output.
func (s *gitServer) git(t *testing.T, args ...string) string {
	t.Helper()
	return hostGit(t, "", append([]string{"--git-dir", filepath.Join(s.root, "repo.git")}, args...)...)
}

// hostGit runs git on the host, in dir, away from the host's own config.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startGitServer serves a bare repository with one commit on main at
// gitHost in the test internet, until t ends.
func startGitServer(t *testing.T, in *nettest.Internet, backend, token string) *gitServer {
	t.Helper()
	s := &gitServer{root: t.TempDir()}
	work := t.TempDir()
	bare := filepath.Join(s.root, "repo.git")
	hostGit(t, "", "init", "-q", "--bare", "-b", "main", bare)
	hostGit(t, "", "--git-dir", bare, "config", "http.receivepack", "true") // pushes come without REMOTE_USER
	hostGit(t, "", "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# private\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, work, "add", "README.md")
	hostGit(t, work, "commit", "-q", "-m", "first")
	hostGit(t, work, "push", "-q", bare, "main")

	caPEM, cert := testCerts(t, strings.Split(gitHost, ":")[0])
	s.caPEM = caPEM
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1"}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, password, _ := r.BasicAuth()
		status := http.StatusOK
		if password != token {
			status = http.StatusUnauthorized
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", status)
		} else {
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			cgiHandler.ServeHTTP(sw, r)
			status = sw.status
		}
		s.mu.Lock()
		s.seen = append(s.seen, gitRequest{method: r.Method, target: r.URL.RequestURI(),
			authorization: r.Header.Get("Authorization"), password: password, status: status})
		s.mu.Unlock()
	})
	var ln net.Listener
	if err := sandboxnet.InNetns(in.Netns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(nettest.Hosts["allowed.test"].String(), "8443"))
		return err
	}); err != nil {
		t.Fatalf("listen in the test internet: %v", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("git server: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// statusWriter remembers the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
