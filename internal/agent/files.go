package agent

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
	w.Header().Set("Vary", "Accept-Encoding")
	// E2B's SDK asks for gzip (read({gzip: true})). A Range or conditional
	// request is ServeContent's to answer, on the bytes as they are (envd
	// does the same).
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) || rangeOrConditional(r.Header) {
		// ServeContent streams the file and answers Range requests.
		http.ServeContent(w, r, "", fi.ModTime(), f)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	if r.Method == http.MethodHead {
		return
	}
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, f); err != nil {
		// The answer has begun. Without the gzip trailer the client reads
		// it as cut short rather than as a whole, smaller file.
		s.log.Debug("gzipped file answer cut short", logError, err)
		return
	}
	_ = zw.Close()
}

// acceptsGzip reports whether an Accept-Encoding value lists gzip with a
// quality above 0.
func acceptsGzip(accept string) bool {
	for enc := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(enc, ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := 1.0
		for param := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
			if !strings.EqualFold(strings.TrimSpace(k), "q") {
				continue
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				q = f
			}
		}
		return q > 0
	}
	return false
}

// rangeOrConditional reports whether a GET asks for part of a file or for it
// only if it changed.
func rangeOrConditional(h http.Header) bool {
	for _, k := range []string{"Range", "If-Range", "If-Modified-Since", "If-None-Match", "If-Unmodified-Since", "If-Match"} {
		if h.Get(k) != "" {
			return true
		}
	}
	return false
}

// postFile serves POST /files?path=P[&username=U]. The body is either
// multipart/form-data whose parts named "file" are files (envd's upload),
// or, with any other content type (envd's application/octet-stream), the
// file's raw bytes, streamed to disk. With Content-Encoding: gzip the body
// is gunzipped first. Each file is written as uploadFile says. The answer
// lists the files written, envd's [{"name","type":"file","path"}].
func (s *server) postFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	acct, err := s.requestUser(r.Header, q.Get("username"))
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	body, err := uploadBody(r)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	defer body.Close()
	path := q.Get("path")
	var results []fileResult
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case mediaType == "multipart/form-data":
		results, err = s.uploadParts(path, acct, body, params["boundary"])
	case path == "":
		err = connect.NewError(connect.CodeInvalidArgument, errors.New("the path query parameter is required"))
	default:
		var res fileResult
		res, err = s.uploadFile(path, acct, body)
		results = []fileResult{res}
	}
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(results)
}

// uploadBody is the request's body, decoded as its Content-Encoding says.
func uploadBody(r *http.Request) (io.ReadCloser, error) {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return r.Body, nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("gzipped body: %w", err))
		}
		return zr, nil
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("content encoding %q is not supported: send gzip or none", enc))
	}
}

// uploadParts writes the parts named "file" of a multipart body. Each goes
// to path, which then takes a single file, or, without a path, to the path
// in the part's file name: envd's clients send a file's full path there
// (/home/user/x/a.txt, or x/a.txt relative to the user's home).
func (s *server) uploadParts(path string, acct account, body io.Reader, boundary string) ([]fileResult, error) {
	if boundary == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the multipart body has no boundary"))
	}
	mr := multipart.NewReader(body, boundary)
	var results []fileResult
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("multipart body: %w", err))
		}
		if part.FormName() != "file" {
			continue
		}
		target := path
		if target == "" {
			target = partPath(part)
		} else if len(results) > 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("several files sent for one path"))
		}
		if target == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a file part has no file name and there is no path query parameter"))
		}
		res, err := s.uploadFile(target, acct, part)
		if err != nil {
			return nil, err
		}
		results = append(results, res)
	}
	if len(results) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(`the multipart body has no part named "file"`))
	}
	return results, nil
}

// partPath is the filename parameter of a part's Content-Disposition, whole.
// Part.FileName keeps only its last element, as RFC 7578 asks of a
// receiver, but envd's clients send the file's path there and envd keeps it
// (its utils/multipart.go).
func partPath(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// uploadFile writes src to path (resolved against acct's home) atomically:
// to a temporary file next to it, renamed into place, with the replaced
// file's permissions or 0644, owned by acct. Missing parent directories are
// created, owned by acct too. A symlink at path is followed: the file it
// points to is replaced.
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
		if errors.As(err, &pe) { // the write failed (a full disk is 507), not the request body
			return res, fsError(&fs.PathError{Op: pe.Op, Path: p, Err: pe.Err})
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
