package e2e

import (
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
	"github.com/hutchdev/hutch/internal/agent/tools/archivetest"
)

// A directory's download came compressed by the agent, where the
// redaction of the answer could not see: a secret a program wrote into a
// file of the directory left in the archive. The daemon now redacts each
// file before it compresses the archive itself, in both formats.
func TestAttackArchiveDownloadRedacted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	const value = "sk-archive-value-0123456789"
	if _, err := d.client.SetSecret(t.Context(), client.SetSecretRequest{Name: "ARCHIVE_TOKEN", Value: value}); err != nil {
		t.Fatal(err)
	}
	forEachRuntime(t, func(t *testing.T, runtime string) {
		sb := d.create(client.CreateSandboxRequest{Runtime: runtime})
		if res := d.exec(sb.ID, `mkdir -p out/sub && printf 'KEY=%s\n' "$ARCHIVE_TOKEN" > out/sub/key.env && echo plain > out/plain.txt`); res.ExitCode != 0 {
			t.Fatalf("write the files: %+v", res)
		}
		for _, format := range []string{"tar.gz", "zip"} {
			var res struct{ URL string }
			if r := d.toolCall(t, sb.ID, "sandbox_download_url", map[string]any{"path": "out", "format": format}, &res); r.Error != nil || res.URL == "" {
				t.Fatalf("sandbox_download_url %s: %+v", format, r)
			}
			files := unpack(t, format, download(t, res.URL))
			if got := files["out/sub/key.env"]; got != "KEY=[redacted:ARCHIVE_TOKEN]\n" {
				t.Errorf("%s: the file holding the secret reads %q, want it redacted", format, got)
			}
			if got := files["out/plain.txt"]; got != "plain\n" {
				t.Errorf("%s: the other file reads %q", format, got)
			}
			for name, body := range files {
				if strings.Contains(name+body, value) {
					t.Errorf("%s: the secret is in %s", format, name)
				}
			}
		}
	})
}

// unpack reads a tar.gz or zip archive's regular files by name.
func unpack(t *testing.T, format string, data []byte) map[string]string {
	t.Helper()
	entries, err := archivetest.Read(format, data)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, e := range entries {
		if e.Mode.IsRegular() {
			files[name] = e.Body
		}
	}
	return files
}
