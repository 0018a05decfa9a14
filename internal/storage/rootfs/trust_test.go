package rootfs

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// rootWith makes a root whose /etc/ssl/certs is as certs leaves it.
func rootWith(t *testing.T, certs func(dir string)) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/ssl"), 0o755); err != nil {
		t.Fatal(err)
	}
	certs(filepath.Join(root, "etc/ssl/certs"))
	return root
}

// debianCerts is what ca-certificates leaves: the directory and the bundle.
func debianCerts(t *testing.T) func(string) {
	return func(certs string) {
		if err := os.MkdirAll(certs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(certs, "ca-certificates.crt"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWithBundleTrust(t *testing.T) {
	t.Parallel()
	elsewhere := t.TempDir()
	debianCerts(t)(elsewhere)
	for _, tc := range []struct {
		name  string
		certs func(certs string)
		env   map[string]string
		want  map[string]string
	}{
		{name: "Debian's bundle", certs: debianCerts(t), want: bundleTrust},
		{
			name: "the template's own variables win", certs: debianCerts(t),
			env:  map[string]string{"SSL_CERT_DIR": "/opt/certs", "GREETING": "hello"},
			want: map[string]string{"DENO_TLS_CA_STORE": "system", "NODE_USE_SYSTEM_CA": "1", "SSL_CERT_DIR": "/opt/certs", "GREETING": "hello"},
		},
		{name: "no ca-certificates", certs: func(string) {}, env: map[string]string{"GREETING": "hello"}, want: map[string]string{"GREETING": "hello"}},
		{name: "the directory alone", certs: func(certs string) { mkdir(t, certs) }, want: map[string]string{}},
		{name: "the bundle a directory", certs: func(certs string) { mkdir(t, filepath.Join(certs, "ca-certificates.crt")) }, want: map[string]string{}},
		{
			name: "the bundle a link", want: map[string]string{},
			certs: func(certs string) {
				mkdir(t, certs)
				symlink(t, filepath.Join(elsewhere, "ca-certificates.crt"), filepath.Join(certs, "ca-certificates.crt"))
			},
		},
		{name: "the directory a link", certs: func(certs string) { symlink(t, elsewhere, certs) }, want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withBundleTrust(rootWith(t, tc.certs), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("env = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBundleTrustLeavesTheDaemonsTrust guards the rule bundleTrust's
// comment gives: none of its variables is one that internal/core/secretenv sets
// for a command given a proxy-injected secret (trustEnv), since a
// sandbox's own environment wins over those and would keep such a
// command from trusting the daemon's CA. The names are read from the
// source, so that a new one there is checked too.
func TestBundleTrustLeavesTheDaemonsTrust(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "core", "secretenv", "secretenv.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var daemons []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "trustEnv" || len(spec.Values) != 1 {
			return true
		}
		lit, ok := spec.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatalf("trustEnv is not a map literal")
		}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if key, ok := kv.Key.(*ast.BasicLit); ok {
				if name, err := strconv.Unquote(key.Value); err == nil {
					daemons = append(daemons, name)
				}
			}
		}
		return false
	})
	if len(daemons) == 0 {
		t.Fatal("no trustEnv in internal/core/secretenv/secretenv.go: where did the daemon's per-command trust go?")
	}
	for _, name := range daemons {
		if _, ok := bundleTrust[name]; ok {
			t.Errorf("bundleTrust sets %s, which the daemon sets for commands given a proxy-injected secret", name)
		}
	}
}

// TestHutchfileTrustsItsStore: a template layered on one built before
// templates had the variables (its Info has no Env) gets them, its RUN
// steps first; its ENV lines win.
func TestHutchfileTrustsItsStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	b, err := s.Begin("old")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(b.Root(), "etc/ssl"), 0o755); err != nil {
		t.Fatal(err)
	}
	debianCerts(t)(filepath.Join(b.Root(), "etc/ssl/certs"))
	if _, err := b.Commit(Info{Source: SourceDebian, Packages: []string{"ca-certificates"}}); err != nil {
		t.Fatal(err)
	}
	hf, err := ParseHutchfile("FROM old\nRUN true\nENV SSL_CERT_DIR=/opt/certs\n")
	if err != nil {
		t.Fatal(err)
	}
	var stepEnv map[string]string
	run := func(_ context.Context, _ string, step RunStep) error {
		stepEnv = maps.Clone(step.Env)
		return nil
	}
	if _, err := s.BuildHutchfile(t.Context(), "layered", hf, nil, run, nil); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(stepEnv, bundleTrust) {
		t.Errorf("the RUN step's env = %v, want %v", stepEnv, bundleTrust)
	}
	tmpl, err := s.Get("layered")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"DENO_TLS_CA_STORE": "system", "NODE_USE_SYSTEM_CA": "1", "SSL_CERT_DIR": "/opt/certs"}
	if !maps.Equal(tmpl.Env, want) {
		t.Errorf("the template's env = %v, want %v", tmpl.Env, want)
	}
}
