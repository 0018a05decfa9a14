package e2e

// TestBaseTemplate is in a file of its own, named to come first: go test
// starts parallel tests in the order of their files, and this one, the
// longest of the package (it builds the base template with apt-get and
// npm), must start at once rather than behind the others.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchdev/hutch/client"
)

// TestBaseTemplate builds the default template as ./setup does, from
// nothing (the other tests' templates are unpacked from what their last
// build kept), and again from what that build kept; and runs each
// language the acceptance names in it, under each runtime, through the
// CLI.
func TestBaseTemplate(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("building templates needs debootstrap (./setup --deps installs it)")
	}
	d := startDaemon(t)
	out, stderr, code := d.cli("", "template", "build", "base", "--fresh")
	if code != 0 || !strings.HasPrefix(out, "base ") {
		t.Fatalf("template build base --fresh: %d %q\n%s", code, out, tail(stderr, 2000))
	}
	if !strings.Contains(stderr, "\nnpm ") || !strings.Contains(stderr, "Keeping base for later builds") {
		t.Errorf("no npm progress line, or base not kept, in:\n%s", tail(stderr, 2000))
	}
	out, stderr, code = d.cli("", "template", "build", "base")
	if code != 0 || !strings.HasPrefix(out, "base ") || !strings.Contains(stderr, "Unpacking base kept from an earlier build") || strings.Contains(stderr, "\nnpm ") {
		t.Fatalf("template build base again: %d %q; want it unpacked from the kept build:\n%s", code, out, tail(stderr, 2000))
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		for _, argv := range [][]string{
			{"python3", "-c", "print(1)"},
			{"node", "-e", "console.log(1)"},
			{"deno", "eval", "console.log(1)"},
			{"bun", "-e", "console.log(1)"},
		} {
			args := append([]string{"run", "--template", "base", "--runtime", runtime, "--"}, argv...)
			if out, stderr, code := d.cli("", args...); code != 0 || out != "1\n" {
				t.Errorf("hutch %s: %d %q %q", strings.Join(args, " "), code, out, stderr)
			}
		}
	})
	sb := d.create(client.CreateSandboxRequest{Template: "base"})
	res := d.exec(sb.ID, `for tool in git rg curl jq sqlite3 unzip gcc make pip3; do command -v $tool >/dev/null || echo "no $tool"; done; python3 -m venv /tmp/v && echo venv`)
	if res.ExitCode != 0 || res.Stdout != "venv\n" {
		t.Errorf("tools of base: %+v", res)
	}
	testRunCode(t, d, sb.ID)
	testLocalInstalls(t, d, sb.ID)
	t.Run("npm install through an allow-list", func(t *testing.T) { testRegistryAllowList(t, d) })
	t.Run("runtimes trust its CAs", func(t *testing.T) { runtimesTrustTemplateCAs(t, d) })
}

// testRegistryAllowList installs a package from the real npm registry in a
// base sandbox whose allow-list names the registry alone, where this host
// reaches it (the one check of the suite that leaves the host); anything
// else stays refused.
func testRegistryAllowList(t *testing.T, d *daemon) {
	const registry = "registry.npmjs.org"
	if c, err := net.DialTimeout("tcp", registry+":443", 5*time.Second); err != nil {
		t.Skipf("the npm registry is not reachable from this host: %v", err)
	} else {
		c.Close()
	}
	sb := d.create(client.CreateSandboxRequest{Template: "base", Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []string{registry}}})
	res := d.exec(sb.ID, `mkdir app && cd app && npm install --no-audit --no-fund --silent is-number@7.0.0 2>&1 && node -e 'console.log(require("is-number")(5))'`)
	if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "true\n") {
		t.Errorf("npm install is-number through an allow-list of the registry: %+v", res)
	}
	if res := d.exec(sb.ID, "curl -sS --max-time 10 https://github.com/ 2>&1"); res.ExitCode == 0 {
		t.Errorf("a host off the allow-list answered: %+v", res)
	}
}

// testLocalInstalls installs a local wheel with pip and a local tarball
// with npm, as the sandbox user and with no more than the commands a user
// types (no --break-system-packages), in sandbox id (of base), and finds
// both there after a suspend and resume.
func testLocalInstalls(t *testing.T, d *daemon, id string) {
	ctx := t.Context()
	for path, data := range map[string][]byte{
		"hutchdemo-1.0-py3-none-any.whl": wheel(t, "hutchdemo", "1.0", map[string]string{"hutchdemo/__init__.py": "VALUE = 42\n"}),
		"hutch-demo-1.0.0.tgz": npmTarball(t, map[string]string{
			"package/package.json": `{"name": "hutch-demo", "version": "1.0.0", "main": "index.js"}`,
			"package/index.js":     "module.exports = 42;\n",
		}),
	} {
		if _, err := d.client.WriteFile(ctx, id, path, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	res := d.exec(id, `pip install --no-index --quiet ./hutchdemo-1.0-py3-none-any.whl 2>&1 && mkdir -p app && cd app && npm install --offline --no-audit --no-fund --silent ../hutch-demo-1.0.0.tgz 2>&1 && echo installed`)
	if res.ExitCode != 0 || !strings.HasSuffix(res.Stdout, "installed\n") {
		t.Fatalf("pip and npm install of local packages: %+v", res)
	}
	check := func(when string) {
		t.Helper()
		res := d.exec(id, `python3 -c 'import hutchdemo; print(hutchdemo.VALUE)' && cd app && node -e 'console.log(require("hutch-demo"))'`)
		if res.Stdout != "42\n42\n" {
			t.Errorf("%s: %+v", when, res)
		}
	}
	check("after the installs")
	if _, err := d.client.SuspendSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.ResumeSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("after a suspend and resume")
}

// wheel makes a pure-Python wheel of files (path to content).
func wheel(t *testing.T, name, version string, files map[string]string) []byte {
	t.Helper()
	info := name + "-" + version + ".dist-info/"
	files[info+"METADATA"] = "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	files[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: hutch-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256([]byte(files[path]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", path, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[path]))
		w, err := zw.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[path])); err != nil {
			t.Fatal(err)
		}
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npmTarball makes an npm package tarball (.tgz) of files.
func npmTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(files[path])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[path])); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testRunCode runs code in each language of base in sandbox id (of base),
// through the API and the CLI.
func testRunCode(t *testing.T, d *daemon, id string) {
	ctx := t.Context()
	for lang, code := range map[string]string{
		"python":     "import sys\nprint(sys.version_info[0] - 2)",
		"node":       "console.log(process.argv.length - 1)",
		"typescript": "const n: number = 1;\nconsole.log(n)",
		"deno":       "console.log(Deno.args.length + 1)",
		"bun":        "console.log(typeof Bun === 'object' ? 1 : 0)",
		"bash":       "echo $(( BASH_VERSINFO > 0 ))",
		"sh":         "echo 1",
	} {
		res, err := d.client.RunCode(ctx, id, client.CodeRequest{Language: lang, Code: code})
		if err != nil || res.ExitCode != 0 || res.Stdout != "1\n" {
			t.Errorf("%s code: %+v, %v", lang, res, err)
		}
	}
	// The code's own failure is a result; its stderr is all its own.
	res, err := d.client.RunCode(ctx, id, client.CodeRequest{Language: "python", Code: "import sys; sys.stderr.write('bad'); sys.exit(3)"})
	if err != nil || res.ExitCode != 3 || res.Stderr != "bad" {
		t.Errorf("failing python code: %+v, %v", res, err)
	}
	// Deno gets the least permissions: the workspace, no more.
	res, err = d.client.RunCode(ctx, id, client.CodeRequest{Language: "deno", Code: `
await Deno.writeTextFile("in-workspace.txt", "ok");
console.log(await Deno.readTextFile("in-workspace.txt"));
try { await Deno.readTextFile("/etc/passwd"); console.log("read /etc/passwd"); } catch (e) { console.log(e.name); }
try { Deno.env.get("HOME"); console.log("read the environment"); } catch (e) { console.log(e.name); }
try { new Deno.Command("true").outputSync(); console.log("ran a program"); } catch (e) { console.log(e.name); }`})
	if err != nil || res.Stdout != "ok\nNotCapable\nNotCapable\nNotCapable\n" {
		t.Errorf("deno permissions: %+v, %v", res, err)
	}
	// A language the template lacks, or none Hutch knows: clear errors.
	if _, err := d.client.RunCode(ctx, id, client.CodeRequest{Language: "ruby", Code: "puts 1"}); !client.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "ruby") {
		t.Errorf("ruby code in base: %v, want a failed precondition naming ruby", err)
	}
	if _, err := d.client.RunCode(ctx, id, client.CodeRequest{Language: "cobol", Code: "x"}); !client.IsInvalidArgument(err) || !strings.Contains(err.Error(), "python") {
		t.Errorf("cobol code: %v, want an invalid argument listing the languages", err)
	}
	host := d.create(client.CreateSandboxRequest{})
	if _, err := d.client.RunCode(ctx, host.ID, client.CodeRequest{Language: "deno", Code: "console.log(1)"}); !client.IsFailedPrecondition(err) || !strings.Contains(err.Error(), `"template": "base"`) {
		t.Errorf("deno code in a host sandbox: %v, want a failed precondition naming base", err)
	}
	// The CLI: code as words, or from stdin.
	if out, stderr, code := d.cli("", "exec", id, "--language", "python", "print(6 * 7)"); code != 0 || out != "42\n" {
		t.Errorf("hutch exec --language python: %d %q %q", code, out, stderr)
	}
	if out, stderr, code := d.cli("console.log(2 ** 5)", "exec", id, "--language", "node"); code != 0 || out != "32\n" {
		t.Errorf("hutch exec --language node < code: %d %q %q", code, out, stderr)
	}
}
