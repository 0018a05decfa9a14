package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"connectrpc.com/connect"
)

// fileResult is one entry of POST /files's answer, as envd sends it.
type fileResult struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// getFile serves GET /files?path=P[&username=U]: the file's bytes.
func (s *server) getFile(w http.ResponseWriter, r *http.Request) {
	acct, err := s.requestUser(r.Header, r.URL.Query().Get("username"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	p, err := resolvePath(r.URL.Query().Get("path"), acct)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	// Stat before opening: opening a FIFO would block.
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		writeHTTPError(w, fsError(err))
		return
	case fi.IsDir():
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is a directory", p)))
		return
	case !fi.Mode().IsRegular():
		writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a regular file", p)))
		return
	}
	// #nosec G304 -- the agent serves the sandbox's own files; paths resolve inside it
	f, err := os.Open(p)
	if err != nil {
		writeHTTPError(w, fsError(err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(p)}))
	// ServeContent streams the file and answers Range requests.
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// postFile serves POST /files?path=P[&username=U]. The body is either
// multipart/form-data whose parts named "file" are files (envd's upload; with
// no path in the query, a part's file name is its path), or, with any other
// content type, the file's raw bytes. Parent directories are created. Each
// file is written to a temporary file next to it and renamed into place, with
// the replaced file's permissions or 0644, owned by the user.
func (s *server) postFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	acct, err := s.requestUser(r.Header, q.Get("username"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	path := q.Get("path")
	var results []fileResult
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "multipart/form-data" {
		if path == "" {
			writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, errors.New("the path query parameter is required")))
			return
		}
		res, err := s.uploadFile(path, acct, r.Body)
		if err != nil {
			writeHTTPError(w, err)
			return
		}
		results = append(results, res)
	} else {
		mr, err := r.MultipartReader()
		if err != nil {
			writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("multipart body: %w", err)))
			return
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("multipart body: %w", err)))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := path
			if target == "" {
				target = part.FileName()
			} else if len(results) > 0 {
				writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, errors.New("several files sent for one path")))
				return
			}
			if target == "" {
				writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, errors.New("the path query parameter is required")))
				return
			}
			res, err := s.uploadFile(target, acct, part)
			if err != nil {
				writeHTTPError(w, err)
				return
			}
			results = append(results, res)
		}
		if len(results) == 0 {
			writeHTTPError(w, connect.NewError(connect.CodeInvalidArgument, errors.New(`the multipart body has no part named "file"`)))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(results)
}

// uploadFile writes src to path atomically. A symlink at path is followed:
// the file it points to is replaced.
func (s *server) uploadFile(path string, acct account, src io.Reader) (res fileResult, err error) {
	p, err := resolvePath(path, acct)
	if err != nil {
		return res, err
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(p); err == nil {
			p = target
		}
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return res, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is a directory", p))
		}
		mode = fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	dir := filepath.Dir(p)
	if err := makeDirs(dir, acct); err != nil {
		return res, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".upload-*")
	if err != nil {
		return res, fsError(err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chown(int(acct.UID), int(acct.GID)); err != nil {
		return res, fsError(err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return res, fsError(err)
	}
	if _, err := io.Copy(tmp, src); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // the write failed, not the request body
			return res, fsError(err)
		}
		return res, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read upload of %s: %w", p, err))
	}
	if err := tmp.Close(); err != nil {
		return res, fsError(err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return res, fsError(err)
	}
	return fileResult{Name: filepath.Base(p), Type: "file", Path: p}, nil
}

// writeHTTPError answers with {"code": "not_found", "message": "…"} and the
// status that goes with the code.
func writeHTTPError(w http.ResponseWriter, err error) {
	code := connect.CodeInternal
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		code, msg = ce.Code(), ce.Message()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus(code))
	_ = json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code.String(), strings.TrimSpace(msg)})
}

func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeFailedPrecondition:
		return http.StatusPreconditionFailed
	case connect.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
