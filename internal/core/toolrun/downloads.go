package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"time"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/download"
	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
	"github.com/hutchdev/hutch/internal/runtime/agentclient"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// Download URLs (sandbox_download_url): a signed URL of the daemon that
// anyone holding it can fetch, without the API key, until it expires; one
// file, or one directory packed, of one sandbox.

// Bounds of a download URL's life.
const (
	defaultDownloadTTL = time.Hour
	maxDownloadTTL     = 7 * 24 * time.Hour
)

type downloadArgs struct {
	Path       string `json:"path"`
	Format     string `json:"format"`
	ExpiresInS int    `json:"expires_in_s"`
}

// downloadResult is what sandbox_download_url returns.
type downloadResult struct {
	URL       string    `json:"url"`
	Path      string    `json:"path"`
	Type      string    `json:"type"`             // file or dir
	Format    string    `json:"format,omitempty"` // a directory's archive
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Service) downloadTool(ctx context.Context, r *core.Running, raw json.RawMessage, user string) (Outcome, error) {
	var a downloadArgs
	var failed *tools.Error
	if errors.As(tools.DecodeArgs(raw, &a), &failed) {
		return Outcome{Error: failed}, nil
	}
	ttl := time.Duration(a.ExpiresInS) * time.Second
	switch {
	case s.downloads == nil:
		return toolFailure(tools.KindFailed, "this daemon makes no download URLs"), nil
	case a.Path == "":
		return toolFailure(tools.KindInvalidArgument, "path is required"), nil
	case ttl == 0:
		ttl = defaultDownloadTTL
	case ttl < 0 || ttl > maxDownloadTTL:
		return toolFailure(tools.KindInvalidArgument, "expires_in_s must be between 1 and %d", int(maxDownloadTTL.Seconds())), nil
	}
	if a.Format != "" && a.Format != tools.FormatTarGz && a.Format != tools.FormatZip {
		return toolFailure(tools.KindInvalidArgument, "format must be %s or %s", tools.FormatTarGz, tools.FormatZip), nil
	}
	abs := rootfs.WorkspacePath(a.Path)
	entry, err := r.Agent().Stat(ctx, abs, rootfs.UserOr(user))
	if errors.Is(err, errdefs.ErrNotFound) {
		return toolFailure(tools.KindNotFound, "%s: no such file or directory", abs), nil
	}
	if err != nil {
		return Outcome{}, r.Err(ctx, err)
	}
	res := downloadResult{Path: abs, Type: "file", ExpiresAt: time.Now().Add(ttl).UTC().Truncate(time.Second)}
	claim := download.Claim{Sandbox: r.ID(), Path: abs, Expires: res.ExpiresAt.Unix()}
	if entry.Type == agentclient.FileDir {
		res.Type, res.Format = "dir", a.Format
		if res.Format == "" {
			res.Format = tools.FormatTarGz
		}
		claim.Dir, claim.Format = true, res.Format
	}
	token, err := s.downloads.Sign(claim)
	if err != nil {
		return Outcome{}, err
	}
	res.URL = s.publicURL + "/v1/downloads/" + token
	out, err := json.Marshal(res)
	return Outcome{Result: out}, err
}

// DownloadURL signs a download URL of one file of sandbox id (an
// absolute path), valid for defaultDownloadTTL: what a code call lists of
// the files it wrote.
func (s *Service) DownloadURL(id, path string) (string, error) {
	if s.downloads == nil {
		return "", errors.New("this daemon makes no download URLs")
	}
	expires := time.Now().Add(defaultDownloadTTL).Unix()
	token, err := s.downloads.Sign(download.Claim{Sandbox: id, Path: path, Expires: expires})
	if err != nil {
		return "", err
	}
	return s.publicURL + "/v1/downloads/" + token, nil
}

// Download opens what a download URL's token allows, waking its sandbox:
// the file, or the directory packed. It returns the name to save it as.
// A token that is forged or expired is unauthenticated.
//
// may, when not nil, is asked whether the caller may reach the token's
// sandbox: a caller that presents an API key too must be one that sees
// it. secrets are the values to redact from a directory's files (nil or
// empty: none), since the redaction of the answer cannot see into a
// compressed archive (archiveredact.go); a file's bytes are the answer's
// own, redacted there.
func (s *Service) Download(ctx context.Context, token string, may func(sandboxID string) error, secrets *redact.Set) (name string, body io.ReadCloser, err error) {
	if s.downloads == nil {
		return "", nil, errdefs.NotFound("this daemon makes no download URLs")
	}
	claim, err := s.downloads.Check(token, time.Now())
	if err != nil {
		return "", nil, errdefs.Unauthenticated("%v", err)
	}
	if may != nil {
		if err := may(claim.Sandbox); err != nil {
			return "", nil, err
		}
	}
	r, release, err := s.sandboxes.Acquire(ctx, claim.Sandbox)
	if err != nil {
		return "", nil, err
	}
	name = path.Base(claim.Path)
	if claim.Dir {
		if secrets.Len() == 0 {
			body, err = r.Agent().Archive(ctx, claim.Path, claim.Format, "")
		} else {
			body, err = packRedacted(ctx, r, claim.Path, claim.Format, secrets)
		}
		body, err = core.Holding(body, r.Err(ctx, err), release)
		return name + "." + claim.Format, body, err
	}
	body, err = r.Agent().ReadFile(ctx, claim.Path, "")
	body, err = core.Holding(body, r.Err(ctx, err), release)
	return name, body, err
}
