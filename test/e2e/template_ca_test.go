package e2e

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

// runtimesTrustTemplateCAs checks that every runtime of base trusts
// what the template trusts, with no variable or flag of the caller's: a
// company's CA, which a build copies from the host's
// /usr/local/share/ca-certificates into the template's store, must be
// trusted by Deno, which carries roots of its own, as it is by curl. The
// sandbox's root adds a CA of the test's own to its store as a build does,
// with update-ca-certificates, and serves HTTPS with a certificate it
// signed; each client fetches from it. TestBaseTemplate runs it on the
// base it built.
func runtimesTrustTemplateCAs(t *testing.T, d *daemon) {
	caPEM, certPEM, keyPEM := serverCerts(t)
	sb := d.create(client.CreateSandboxRequest{Template: "base", Files: map[string]string{
		"ca.crt": string(caPEM), "server.crt": string(certPEM), "server.key": string(keyPEM),
		"serve.py": trustServer, "clients.sh": trustClients,
	}})

	// Every command gets them, through the API and the CLI alike.
	want := map[string]string{
		"DENO_TLS_CA_STORE":  "system",
		"NODE_USE_SYSTEM_CA": "1",
		"SSL_CERT_DIR":       "/etc/ssl/certs",
	}
	res := d.exec(sb.ID, "env")
	cliOut, _, _ := d.cli("", "exec", sb.ID, "--", "env")
	for k, v := range want {
		for how, env := range map[string]string{"the API's exec": res.Stdout, "hutch exec": cliOut} {
			if !strings.Contains("\n"+env, "\n"+k+"="+v+"\n") {
				t.Errorf("%s's environment has no %s=%s:\n%s", how, k, v, env)
			}
		}
	}

	// As a build adds the host's CAs.
	root, err := d.client.Exec(t.Context(), sb.ID, client.ExecRequest{User: "root",
		Command: "cp ca.crt /usr/local/share/ca-certificates/hutch-e2e-test.crt && update-ca-certificates 2>&1"})
	if err != nil || root.ExitCode != 0 {
		t.Fatalf("update-ca-certificates: %+v %v", root, err)
	}
	res = d.exec(sb.ID, "sh clients.sh")
	if res.ExitCode != 0 {
		t.Fatalf("the clients' script: %+v", res)
	}
	out := clientResults(res.Stdout)
	reached := out["server log"]
	for _, c := range []struct {
		name string
		// path is what the client asks for: it reached the server, over
		// TLS it verified, when the server logged it.
		path string
		// answers: the client printed the body, so its exit code counts.
		answers bool
	}{
		{"curl", "/curl", true},
		{"python urllib", "/python", true},
		{"python requests", "/requests", true},
		{"python httpx", "/httpx", true},
		{"node", "/node", true},
		{"deno", "/deno", true},
		{"bun", "/bun", true},
		{"npm", "/npm/-/ping", false},
		{"pip", "/pip/hutch-none/", false},
		{"pip in a venv", "/venv/hutch-none/", false},
		{"git", "/git/info/refs", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := out[c.name]
			switch {
			case !ok:
				t.Fatalf("no result for %s in:\n%s", c.name, res.Stdout)
			case strings.HasPrefix(got, "missing:"):
				t.Skipf("base has no %s", strings.TrimSpace(strings.TrimPrefix(got, "missing: ")))
			case !logged(reached, c.path):
				t.Errorf("%s did not reach the server (it logged %q):\n%s", c.name, reached, got)
			case c.answers && (!strings.Contains("\n"+got+"\n", "\nok "+c.path+"\n") || !strings.HasSuffix(strings.TrimSpace(got), "rc=0")):
				t.Errorf("%s: %q, want the server's answer", c.name, got)
			}
		})
	}
	// What the template's variables do: without DENO_TLS_CA_STORE, Deno
	// refuses the CA. (Debian's Node.js and this Bun trust the system's
	// store on their own.)
	got := out["deno without DENO_TLS_CA_STORE"]
	if !strings.HasPrefix(got, "missing:") && (strings.HasSuffix(strings.TrimSpace(got), "rc=0") || logged(reached, "/deno-bare")) {
		t.Errorf("deno trusted the CA without the template's variable: %q", got)
	}
}

// logged reports whether the server's log has a request for path.
func logged(log, path string) bool {
	for _, line := range strings.Split(log, "\n") {
		if line == path || strings.HasPrefix(line, path+"?") {
			return true
		}
	}
	return false
}

// clientResults splits the output of trustClients into each client's.
func clientResults(stdout string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split("\n"+stdout, "\n== ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		out[name] = body
	}
	return out
}

// trustServer serves HTTPS on 127.0.0.1:8443 with server.crt, answering
// every GET "ok PATH" and logging the path: a client is in the log only if
// its TLS handshake succeeded.
const trustServer = `import http.server, ssl

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("requests.log", "a") as log:
            log.write(self.path + "\n")
        body = ("ok " + self.path.split("?")[0]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 8443), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("server.crt", "server.key")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
open("ready", "w").close()
server.serve_forever()
`

// trustClients starts trustServer and runs each client against it with
// the sandbox's environment as it is: "== NAME", its output, "rc=N"; or
// "missing: PROGRAM" when base lacks it.
const trustClients = `python3 serve.py >server.out 2>&1 &
server=$!
for i in $(seq 100); do [ -e ready ] && break; sleep 0.1; done
url=https://127.0.0.1:8443
run() {
	name=$1 need=$2; shift 2
	echo "== $name"
	if ! sh -c "$need" >/dev/null 2>&1; then echo "missing: $need"; return; fi
	"$@" 2>&1
	rc=$?
	echo
	echo "rc=$rc"
}
has() { echo "command -v $1"; }
js='const r = await fetch(URL); console.log(await r.text())'
run curl "$(has curl)" curl -sS --max-time 20 $url/curl
run "python urllib" "$(has python3)" python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())' $url/python
run "python requests" "python3 -c 'import requests'" python3 -c 'import sys, requests; print(requests.get(sys.argv[1], timeout=20).text)' $url/requests
run "python httpx" "python3 -c 'import httpx'" python3 -c 'import sys, httpx; print(httpx.get(sys.argv[1], timeout=20).text)' $url/httpx
run node "$(has node)" node -e 'fetch(process.argv[1]).then(r => r.text()).then(console.log, e => { console.error(e.cause || e); process.exit(1) })' $url/node
run deno "$(has deno)" deno eval "$(echo "$js" | sed "s|URL|'$url/deno'|")"
run "deno without DENO_TLS_CA_STORE" "$(has deno)" env -u DENO_TLS_CA_STORE deno eval "$(echo "$js" | sed "s|URL|'$url/deno-bare'|")"
run bun "$(has bun)" bun -e "$(echo "$js" | sed "s|URL|'$url/bun'|")"
run npm "$(has npm)" npm ping --registry $url/npm/ --fetch-retries 0
run pip "$(has pip3)" pip3 download --no-deps --no-cache-dir --retries 0 --timeout 20 -d /tmp/pip --index-url $url/pip/ hutch-none
run "pip in a venv" "python3 -m venv /tmp/venv" /tmp/venv/bin/pip download --no-deps --no-cache-dir --retries 0 --timeout 20 -d /tmp/pip --index-url $url/venv/ hutch-none
run git "$(has git)" git ls-remote $url/git
kill $server
echo "== server log"
cat requests.log
`

// serverCerts makes a CA and a certificate it signs for 127.0.0.1 and
// localhost, in PEM: the CA's, the certificate's and its key's.
func serverCerts(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caPEM, cert := testCerts(t, "127.0.0.1", "localhost")
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
