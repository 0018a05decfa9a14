// Package console serves Hutch's web console from the binary: the page and
// assets Vite builds into dist/app (make build), each stored gzipped by the
// build. They hold no data and need no key; the page then calls the API
// with the key its user signs in with.
package console

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// built is the console's build, rooted at dist/app.
var built, _ = fs.Sub(dist, "dist/app")

// policy is the page's Content-Security-Policy: only its own scripts and
// styles, the API on its own origin, frames of host-routed previews only
// (frames, "" for none: never the daemon's own origin, whose path-routed
// previews would then run beside the console's key), and no page may frame
// it.
func policy(frames string) string {
	if frames == "" {
		frames = "'none'"
	}
	return "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
		"connect-src 'self'; frame-src " + frames + "; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// Serves reports whether a GET or HEAD of urlPath is the console's: its
// page at / and its files under /assets/.
func Serves(urlPath string) bool {
	return urlPath == "/" || strings.HasPrefix(urlPath, "/assets/") && path.Clean(urlPath) == urlPath
}

// Built reports whether the binary holds the console's build.
func Built() bool {
	_, err := fs.Stat(built, "index.html.gz")
	return err == nil
}

// Size is the bytes the console's build adds to the binary.
func Size() int64 {
	var n int64
	_ = fs.WalkDir(built, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Handler serves the console's page and files. A client that does not take
// gzip gets them decompressed. previewDomain is host routing's domain, ""
// when it is off: the console may frame previews of {port}-{id}.DOMAIN.
func Handler(previewDomain string) http.Handler {
	frames := ""
	if previewDomain != "" {
		frames = "*." + previewDomain + ":*"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name == "" {
			name = "index.html"
		}
		if !Serves(r.URL.Path) || r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		zipped, err := fs.ReadFile(built, name+".gz")
		if err != nil {
			if name == "index.html" {
				h.Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "This hutch was built without its web console: run make build (it needs npm).\n")
				return
			}
			http.NotFound(w, r)
			return
		}
		if name == "index.html" {
			h.Set("Content-Security-Policy", policy(frames))
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cache-Control", "no-cache")
		} else {
			h.Set("Cache-Control", "public, max-age=31536000, immutable") // its name holds its hash
		}
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			h.Set("Content-Type", ct)
		}
		h.Set("Vary", "Accept-Encoding")
		body := zipped
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
		} else if body, err = gunzip(zipped); err != nil {
			http.Error(w, "the console's build is damaged: "+err.Error(), http.StatusInternalServerError)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	})
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (or *)
// with a weight above 0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if coding = strings.ToLower(strings.TrimSpace(coding)); coding != "gzip" && coding != "*" {
			continue
		}
		q := 1.0
		if v, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			q, _ = strconv.ParseFloat(v, 64)
		}
		return q > 0
	}
	return false
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
