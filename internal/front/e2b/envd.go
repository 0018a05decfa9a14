package e2b

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
)

// envd's API on the front (port 49983): the agent serves envd's process
// and filesystem services and /files itself, and the front passes the
// SDK's calls on to it (agentclient.EnvdFront), holding the sandbox
// meanwhile (a call wakes it and is activity), with what the daemon adds
// to Hutch's own calls: a process's environment is the sandbox's, its
// secrets included, under what the call gives; and no secret's value
// leaves, in a command's output, a process list or a file read.

type sandboxKey struct{}

// sandboxOf is the id of the sandbox a front request is for (routed).
func sandboxOf(ctx context.Context) string { s, _ := ctx.Value(sandboxKey{}).(string); return s }

// target holds the call's sandbox running.
func (f *Front) target(ctx context.Context) (agentclient.EnvdTarget, error) {
	r, release, err := f.cfg.Manager.Acquire(ctx, sandboxOf(ctx))
	if err != nil {
		return agentclient.EnvdTarget{}, err
	}
	return agentclient.EnvdTarget{
		Agent: r.Agent(),
		Env: func(ctx context.Context, own map[string]string) (map[string]string, error) {
			return r.CommandEnv(ctx, "", own)
		},
		Release: release,
	}, nil
}

// streamRedactor is a redactor of one output stream; nil without a
// Redactor.
func (f *Front) streamRedactor() func() agentclient.StreamRedactor {
	if f.cfg.Redactor == nil {
		return nil
	}
	return func() agentclient.StreamRedactor { return f.cfg.Redactor.Stream() }
}

// serveFiles passes envd's /files on to the agent: a read's content
// redacted (asked for uncompressed: a compressed body cannot be; and
// whole: a Range is dropped, as HTTP lets a server do, since a part cut
// inside a secret would pass redaction, and a part is never redacted), a
// write as it comes.
func (f *Front) serveFiles(w http.ResponseWriter, r *http.Request) {
	t, err := f.target(r.Context())
	if err != nil {
		writeEnvdError(w, http.StatusBadGateway, err)
		return
	}
	defer t.Release()
	target, _ := url.Parse(agentclient.BaseURL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Accept-Encoding")
			pr.Out.Header.Del("X-Access-Token")
			if f.cfg.Redactor != nil {
				pr.Out.Header.Del("Range")
				pr.Out.Header.Del("If-Range")
			}
		},
		Transport:     t.Agent.EnvdHTTP(),
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			if r.Method != http.MethodGet || f.cfg.Redactor == nil {
				return nil
			}
			if res.StatusCode == http.StatusPartialContent || res.Header.Get("Content-Encoding") != "" {
				return errors.New("the agent answered a file read in a form that cannot be redacted") // never asked for
			}
			if res.StatusCode != http.StatusOK {
				return nil
			}
			res.Body = &redactingReader{src: res.Body, st: f.cfg.Redactor.Stream()}
			res.ContentLength = -1
			res.Header.Del("Content-Length")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeEnvdError(w, http.StatusBadGateway, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// redactingReader is src's content, redacted.
type redactingReader struct {
	src io.ReadCloser
	st  *redact.Stream
	buf []byte // redacted, not read yet
	eof bool
}

func (r *redactingReader) Read(p []byte) (int, error) {
	chunk := make([]byte, 32<<10)
	for len(r.buf) == 0 && !r.eof {
		n, err := r.src.Read(chunk)
		r.buf = append(r.buf, r.st.Next(chunk[:n])...)
		if errors.Is(err, io.EOF) {
			r.buf, r.eof = append(r.buf, r.st.End()...), true
		} else if err != nil {
			return 0, err
		}
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *redactingReader) Close() error { return r.src.Close() }

// writeEnvdError answers an envd HTTP route's error as envd does.
func writeEnvdError(w http.ResponseWriter, status int, err error) {
	msg, _ := errdefs.UserMessage(err)
	if msg == "" {
		msg = err.Error()
	}
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}
