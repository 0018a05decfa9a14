package toolrun

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core/coretest"
)

// sandbox_download_url signs a URL of one file or directory; Download
// opens what its token allows, and refuses a token that was changed.
func TestDownloads(t *testing.T) {
	t.Parallel()
	c := coretest.Start(t)
	s := New(Config{Sandboxes: c.M, Downloads: download.NewSigner("secret"), PublicURL: "https://hutch.example/"})
	sb := newSandbox(t, c)
	ws := c.Workspace(sb.ID)
	out := filepath.Join(ws, "out")
	if err := os.MkdirAll(filepath.Join(out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "report.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	urlOf := func(a map[string]any) (downloadResult, Outcome) {
		t.Helper()
		outcome := run(t, s, sb.ID, Call{Name: tools.DownloadURL, Args: args(t, a)})
		var res downloadResult
		if outcome.Error == nil {
			if err := json.Unmarshal(outcome.Result, &res); err != nil {
				t.Fatal(err)
			}
		}
		return res, outcome
	}
	token := func(res downloadResult) string {
		t.Helper()
		tok, ok := strings.CutPrefix(res.URL, "https://hutch.example/v1/downloads/")
		if !ok {
			t.Fatalf("URL %s is not the daemon's", res.URL)
		}
		return tok
	}

	file, _ := urlOf(map[string]any{"path": ws + "/out/report.csv"})
	name, body, err := s.Download(t.Context(), token(file), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || name != "report.csv" || string(got) != "a,b\n" || file.Type != "file" || file.Path != ws+"/out/report.csv" {
		t.Errorf("the file: %+v, %s %q %v", file, name, got, err)
	}

	dir, _ := urlOf(map[string]any{"path": ws + "/out"})
	name, body, err = s.Download(t.Context(), token(dir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tr := tar.NewReader(zr); ; {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
	body.Close()
	if name != "out.tar.gz" || dir.Type != "dir" || dir.Format != tools.FormatTarGz || strings.Join(names, " ") != "out/ out/report.csv out/sub/" {
		t.Errorf("the directory: %+v, %s %v", dir, name, names)
	}

	// With a secret known, a directory's files come redacted, in either
	// format.
	if err := os.WriteFile(filepath.Join(out, "key.env"), []byte("KEY="+archiveSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := redact.NewSet([]redact.Secret{{Name: "TOKEN", Value: archiveSecret}})
	for _, format := range []string{tools.FormatTarGz, tools.FormatZip} {
		res, _ := urlOf(map[string]any{"path": ws + "/out", "format": format})
		name, body, err := s.Download(t.Context(), token(res), nil, set)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(body)
		if cerr := body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		entries := readEntries(t, format, got)
		// A download left unread stops its re-packing.
		if _, body, err = s.Download(t.Context(), token(res), nil, set); err != nil {
			t.Fatal(err)
		}
		if _, err := body.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		_ = body.Close()
		if name != "out."+format || entries["out/key.env"].Body != "KEY=[redacted:TOKEN]\n" || entries["out/report.csv"].Body != "a,b\n" {
			t.Errorf("%s with a secret known: %s %+v", format, name, entries)
		}
	}

	tests := []struct {
		name     string
		args     map[string]any
		wantKind string
	}{
		{"nothing there", map[string]any{"path": ws + "/nope"}, tools.KindNotFound},
		{"no path", map[string]any{}, tools.KindInvalidArgument},
		{"an unknown format", map[string]any{"path": ws + "/out", "format": "rar"}, tools.KindInvalidArgument},
		{"plain tar, the daemon's own", map[string]any{"path": ws + "/out", "format": tools.FormatTar}, tools.KindInvalidArgument},
		{"too long a life", map[string]any{"path": ws + "/out", "expires_in_s": 8 * 24 * 3600}, tools.KindInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, res := urlOf(tc.args); res.Error == nil || res.Error.Kind != tc.wantKind {
				t.Errorf("%+v, want a failure of kind %s", res, tc.wantKind)
			}
		})
	}

	// The file's signature over the directory's claim.
	dirClaim, _, _ := strings.Cut(token(dir), ".")
	_, fileSig, _ := strings.Cut(token(file), ".")
	if _, _, err := s.Download(t.Context(), dirClaim+"."+fileSig, nil, nil); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("a forged token: %v", err)
	}
	off := New(Config{Sandboxes: c.M})
	if _, _, err := off.Download(t.Context(), token(file), nil, nil); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a download from a daemon that makes none: %v", err)
	}
}
