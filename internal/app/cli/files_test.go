package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchdev/hutch/client"
)

func TestCpUpload(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(local, []byte("local content"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		wantErr  string
		wantPath string // where the content should land in the sandbox
		wantData string
	}{
		{name: "absolute path", args: []string{"cp", local, "sb:/tmp/x.txt"}, wantPath: "/tmp/x.txt", wantData: "local content"},
		{name: "relative path", args: []string{"cp", local, "sb:src/x.txt"}, wantPath: fakeWorkspace + "/src/x.txt", wantData: "local content"},
		{name: "into dir by slash", args: []string{"cp", local, "sb:new/dir/"}, wantPath: fakeWorkspace + "/new/dir/notes.txt", wantData: "local content"},
		{name: "into existing dir", args: []string{"cp", local, "sb:/home/user"}, wantPath: "/home/user/notes.txt", wantData: "local content"},
		{name: "into workspace", args: []string{"cp", local, "sb:"}, wantPath: fakeWorkspace + "/notes.txt", wantData: "local content"},
		{name: "from stdin", args: []string{"cp", "-", "sb:in.bin"}, stdin: "\x00\xffbinary", wantPath: fakeWorkspace + "/in.bin", wantData: "\x00\xffbinary"},
		{name: "stdin into dir", args: []string{"cp", "-", "sb:/tmp"}, wantCode: 1, wantErr: "give the file name"},
		{name: "local directory", args: []string{"cp", dir, "sb:/tmp/"}, wantCode: 1, wantErr: "is a directory; hutch cp copies single files"},
		{name: "missing local", args: []string{"cp", filepath.Join(dir, "nope"), "sb:/tmp/"}, wantCode: 1, wantErr: "no such file or directory"},
		{name: "no such sandbox", args: []string{"cp", local, "nope:/tmp/x"}, wantCode: 1, wantErr: "hutch: sandbox nope not found"},
		{name: "both local", args: []string{"cp", local, filepath.Join(dir, "other")}, wantCode: 2, wantErr: "exactly one of SRC and DST"},
		{name: "both remote", args: []string{"cp", "sb:a", "sb:b"}, wantCode: 2, wantErr: "exactly one of SRC and DST"},
		{name: "local path with colon", args: []string{"cp", "./a:b", "sb:/tmp/"}, wantCode: 1, wantErr: "a:b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeDaemon(t)
			f.addSandbox("sb", fakeNow)
			f.putFile("sb", "/tmp/existing", "", "")
			r := f.run(t.Context(), tt.stdin, tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
			if tt.wantPath == "" {
				return
			}
			ff, ok := f.file("sb", tt.wantPath)
			if !ok || ff.dir || string(ff.data) != tt.wantData {
				t.Errorf("%s in sandbox = %+v, %v", tt.wantPath, ff, ok)
			}
		})
	}
}

func TestCpUploadJSON(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	r := f.run(t.Context(), "abc", "-o", "json", "cp", "-", "sb:a.txt")
	var fe client.FileEntry
	if err := json.Unmarshal([]byte(r.stdout), &fe); err != nil || r.code != 0 {
		t.Fatalf("exit %d, stdout %q: %v", r.code, r.stdout, err)
	}
	if fe.Path != fakeWorkspace+"/a.txt" || fe.Size != 3 {
		t.Errorf("entry %+v", fe)
	}
}

func TestCpDownload(t *testing.T) {
	tests := []struct {
		name     string
		dst      string // relative to a temp dir, or "-"
		src      string
		wantCode int
		wantErr  string
		wantOut  string
		wantFile string // relative to the temp dir
		wantPerm os.FileMode
	}{
		{name: "to file", src: "sb:/tmp/script.sh", dst: "copy.sh", wantFile: "copy.sh", wantPerm: 0o755},
		{name: "relative source", src: "sb:rel.txt", dst: "rel.txt", wantFile: "rel.txt", wantPerm: 0o644},
		{name: "replaces file", src: "sb:/tmp/script.sh", dst: "existing", wantFile: "existing", wantPerm: 0o755},
		{name: "into dir", src: "sb:/tmp/script.sh", dst: ".", wantFile: "script.sh", wantPerm: 0o755},
		{name: "into dir by slash", src: "sb:/tmp/script.sh", dst: "sub/", wantFile: "sub/script.sh", wantPerm: 0o755},
		{name: "to stdout", src: "sb:/tmp/script.sh", dst: "-", wantOut: "#!/bin/sh\necho hi\n"},
		{name: "remote dir", src: "sb:/tmp", dst: "x", wantCode: 1, wantErr: "sb:/tmp is a directory"},
		{name: "remote missing", src: "sb:/tmp/nope", dst: "x", wantCode: 1, wantErr: "hutch: no such file: /tmp/nope"},
		{name: "local dir missing", src: "sb:/tmp/script.sh", dst: "nodir/x", wantCode: 1, wantErr: "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("old content that is longer"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			f := newFakeDaemon(t)
			f.addSandbox("sb", fakeNow)
			f.putFile("sb", "/tmp/script.sh", "#!/bin/sh\necho hi\n", "0755")
			f.putFile("sb", fakeWorkspace+"/rel.txt", "#!/bin/sh\necho hi\n", "")

			r := f.run(t.Context(), "", "cp", tt.src, tt.dst)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if r.stdout != tt.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			if tt.wantFile != "" {
				p := filepath.Join(dir, tt.wantFile)
				b, err := os.ReadFile(p)
				if err != nil || string(b) != "#!/bin/sh\necho hi\n" {
					t.Errorf("local file %q: %v", b, err)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != tt.wantPerm {
					t.Errorf("local file mode %v, want %v", fi.Mode(), tt.wantPerm)
				}
			}
			// No temporary files are left behind.
			matches, _ := filepath.Glob(filepath.Join(dir, ".*.hutch-*"))
			if len(matches) != 0 {
				t.Errorf("left behind: %v", matches)
			}
		})
	}
}

func TestFs(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantOut   string // exact unless wantMatch
		wantMatch []string
		wantErr   string
		check     func(t *testing.T, f *fakeDaemon)
	}{
		{
			name: "ls workspace",
			args: []string{"fs", "ls", "sb"},
			wantMatch: []string{
				"TYPE   SIZE   MODIFIED",
				"dir    4096", fakeWorkspace + "/src\n",
				"file   5", fakeWorkspace + "/a.txt\n",
			},
		},
		{
			name:      "ls depth",
			args:      []string{"fs", "ls", "sb", "/home/user", "--depth", "3"},
			wantMatch: []string{"/home/user/workspace\n", fakeWorkspace + "/src/main.go\n"},
		},
		{name: "ls bad depth", args: []string{"fs", "ls", "sb", "--depth", "0"}, wantCode: 2, wantErr: "--depth must be at least 1"},
		{name: "ls a file", args: []string{"fs", "ls", "sb", "a.txt"}, wantCode: 1, wantErr: "is not a directory"},
		{name: "cat", args: []string{"fs", "cat", "sb", "a.txt", "src/main.go"}, wantOut: "hello" + "package main\n"},
		{name: "cat missing", args: []string{"fs", "cat", "sb", "nope"}, wantCode: 1, wantErr: "hutch: no such file: " + fakeWorkspace + "/nope\n"},
		{
			name: "rm", args: []string{"fs", "rm", "sb", "src", "nope", "a.txt"}, wantCode: 1,
			wantErr: "hutch: no such file: " + fakeWorkspace + "/nope\n",
			check: func(t *testing.T, f *fakeDaemon) {
				for _, p := range []string{"/src", "/src/main.go", "/a.txt"} {
					if _, ok := f.file("sb", fakeWorkspace+p); ok {
						t.Errorf("%s still there", p)
					}
				}
			},
		},
		{
			name: "mkdir", args: []string{"fs", "mkdir", "sb", "x/y", "/opt/z"},
			check: func(t *testing.T, f *fakeDaemon) {
				for _, p := range []string{fakeWorkspace + "/x", fakeWorkspace + "/x/y", "/opt/z"} {
					if ff, ok := f.file("sb", p); !ok || !ff.dir {
						t.Errorf("%s not a directory", p)
					}
				}
			},
		},
		{name: "mkdir existing", args: []string{"fs", "mkdir", "sb", "src"}, wantCode: 1, wantErr: "already exists"},
		{name: "mkdir json", args: []string{"fs", "mkdir", "-o", "json", "sb", "d"}, wantMatch: []string{`"type": "dir"`, `"path": "` + fakeWorkspace + `/d"`}},
		{
			name: "mv", args: []string{"fs", "mv", "sb", "src", "/opt/src2"},
			check: func(t *testing.T, f *fakeDaemon) {
				if ff, ok := f.file("sb", "/opt/src2/main.go"); !ok || string(ff.data) != "package main\n" {
					t.Error("not moved")
				}
				if _, ok := f.file("sb", fakeWorkspace+"/src"); ok {
					t.Error("source still there")
				}
			},
		},
		{name: "mv missing", args: []string{"fs", "mv", "sb", "nope", "x"}, wantCode: 1, wantErr: "no such file"},
		{name: "mv usage", args: []string{"fs", "mv", "sb", "a"}, wantCode: 2, wantErr: "a sandbox ID, a source and a destination"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeDaemon(t)
			f.addSandbox("sb", fakeNow)
			f.putFile("sb", fakeWorkspace+"/a.txt", "hello", "")
			f.putFile("sb", fakeWorkspace+"/src/main.go", "package main\n", "")
			r := f.run(t.Context(), "", tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.wantCode, r.stderr)
			}
			if tt.wantMatch == nil && r.stdout != tt.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantOut)
			}
			for _, w := range tt.wantMatch {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout %q lacks %q", r.stdout, w)
				}
			}
			if !strings.Contains(r.stderr, tt.wantErr) || tt.wantErr == "" && r.stderr != "" {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestFsLsJSON(t *testing.T) {
	f := newFakeDaemon(t)
	f.addSandbox("sb", fakeNow)
	f.putFile("sb", fakeWorkspace+"/a.txt", "hello", "")
	r := f.run(t.Context(), "", "fs", "ls", "sb", "-o", "json")
	var entries []client.FileEntry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || r.code != 0 {
		t.Fatalf("exit %d, stdout %q: %v", r.code, r.stdout, err)
	}
	if len(entries) != 1 || entries[0].Name != "a.txt" || entries[0].Size != 5 {
		t.Errorf("entries %+v", entries)
	}
}
