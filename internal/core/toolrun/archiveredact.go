package toolrun

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/hutchdev/hutch/internal/agent/tools"
	"github.com/hutchdev/hutch/internal/base/redact"
	"github.com/hutchdev/hutch/internal/core"
)

// A directory's download is redacted like every answer, but the
// redaction of the answer (internal/front/api's recorder) cannot see into a
// compressed archive. So when the daemon knows of a secret, the agent
// packs the directory as plain tar and the daemon re-packs it in the
// format asked for, redacting each file on the way.

// spoolInMemory is how much of one redacted file a tar.gz re-packing
// holds in memory, waiting to learn its length for the tar header;
// a bigger file goes to a temp file.
const spoolInMemory = 1 << 20

// packRedacted streams directory dir of r packed as format, with the
// secrets of set redacted from every file's content and every entry's
// name. Closing the stream stops the re-packing and waits for it.
func packRedacted(ctx context.Context, r *core.Running, dir, format string, set *redact.Set) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	src, err := r.Agent().Archive(ctx, dir, tools.FormatTar, "")
	if err != nil {
		cancel()
		return nil, err
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := redactArchive(pw, src, format, set)
		_ = src.Close()
		pw.CloseWithError(err) // nil: the reader sees io.EOF
	}()
	return &repacking{PipeReader: pr, cancel: cancel, done: done}, nil
}

// repacking is the stream packRedacted returns.
type repacking struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

// Close ends the agent's stream and the pipe, so that the re-packing
// stops wherever it is blocked, and waits for it to have let go of its
// temp file.
func (p *repacking) Close() error {
	p.cancel()
	err := p.PipeReader.Close()
	<-p.done
	return err
}

// redactArchive re-packs the plain tar archive src (the agent's
// tools.FormatTar) into dst as format (tools.FormatTarGz or
// tools.FormatZip), with set's secrets redacted from every regular file's
// content, each through a fresh stream, and from every entry's name.
// Directories, symlinks and modes are kept as the agent packed them, and
// other entries left out, as the agent leaves them out. A symlink whose
// target held a secret is left out too: its redacted target could point
// anywhere.
func redactArchive(dst io.Writer, src io.Reader, format string, set *redact.Set) error {
	var add func(hdr *tar.Header, body io.Reader) error
	var finish func() error
	switch format {
	case tools.FormatTarGz:
		zw := gzip.NewWriter(dst)
		tw := tar.NewWriter(zw)
		var sp spool
		defer sp.close()
		add = func(hdr *tar.Header, body io.Reader) error {
			if body != nil {
				// tar writes a file's length before its content.
				var err error
				if body, hdr.Size, err = sp.fill(body, set); err != nil {
					return err
				}
			}
			if err := tw.WriteHeader(hdr); err != nil || body == nil {
				return err
			}
			_, err := io.Copy(tw, body)
			return err
		}
		finish = func() error { return errors.Join(tw.Close(), zw.Close()) }
	case tools.FormatZip:
		zw := zip.NewWriter(dst)
		add = func(hdr *tar.Header, body io.Reader) error {
			zh, err := zip.FileInfoHeader(hdr.FileInfo())
			if err != nil {
				return err
			}
			zh.Name, zh.Method = hdr.Name, zip.Deflate
			fw, err := zw.CreateHeader(zh) // zip learns the length as it writes
			if err != nil {
				return err
			}
			switch {
			case hdr.Typeflag == tar.TypeSymlink:
				_, err = io.WriteString(fw, hdr.Linkname) // zip keeps a symlink's target as its content
				return err
			case body != nil:
				return redactCopy(fw, body, set)
			}
			return nil
		}
		finish = zw.Close
	default:
		return fmt.Errorf("format must be %s or %s, got %q", tools.FormatTarGz, tools.FormatZip, format)
	}

	tr := tar.NewReader(src)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return finish()
		}
		if err != nil {
			return fmt.Errorf("read the agent's archive: %w", err)
		}
		var body io.Reader
		switch hdr.Typeflag {
		case tar.TypeReg:
			body = tr
		case tar.TypeDir:
		case tar.TypeSymlink:
			if set.String(hdr.Linkname) != hdr.Linkname {
				continue
			}
		default:
			continue
		}
		// The PAX records the reader kept may hold the name before
		// redaction; the writer makes those the redacted name needs.
		hdr.Name, hdr.PAXRecords, hdr.Format = set.String(hdr.Name), nil, tar.FormatUnknown
		if !staysInside(hdr.Name) {
			continue
		}
		if err := add(hdr, body); err != nil {
			return fmt.Errorf("re-pack %s: %w", hdr.Name, err)
		}
	}
}

// staysInside says whether an entry's redacted name still lands inside
// the directory it is unpacked in. The agent's names are clean and
// relative, and a redaction mark is no "..", so this holds unless a
// secret's name has a slash; it is checked all the same, as cheap.
func staysInside(name string) bool {
	c := path.Clean(name)
	return c != "." && !path.IsAbs(c) && c != ".." && !strings.HasPrefix(c, "../")
}

// redactCopy copies src to dst with set's secrets redacted.
func redactCopy(dst io.Writer, src io.Reader, set *redact.Set) error {
	w := set.Writer(dst)
	if _, err := io.Copy(w, src); err != nil {
		return err
	}
	return w.Close()
}

// spool holds one redacted file until its length is known: in memory up
// to spoolInMemory bytes, beyond that in a temp file that is unlinked as
// soon as it is made, so that nothing is left behind however the download
// ends, even if the daemon dies. The temp file, once made, serves every
// later big file of the archive.
type spool struct {
	mem    bytes.Buffer
	file   *os.File
	inFile bool // the current content is in file, not in mem
	size   int64
}

// fill redacts body into the spool, in place of what it held, and
// returns a reader of it and its length.
func (s *spool) fill(body io.Reader, set *redact.Set) (io.Reader, int64, error) {
	s.mem.Reset()
	s.inFile, s.size = false, 0
	if err := redactCopy(s, body, set); err != nil {
		return nil, 0, err
	}
	if !s.inFile {
		return &s.mem, s.size, nil
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	return io.LimitReader(s.file, s.size), s.size, nil
}

func (s *spool) Write(p []byte) (int, error) {
	if !s.inFile && s.mem.Len()+len(p) > spoolInMemory {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if s.inFile {
		n, err = s.file.Write(p)
	} else {
		n, err = s.mem.Write(p)
	}
	s.size += int64(n)
	return n, err
}

// spill moves what mem holds to the (emptied) temp file, making it first.
func (s *spool) spill() error {
	if s.file == nil {
		f, err := os.CreateTemp("", "hutch-download-*")
		if err != nil {
			return err
		}
		if err := os.Remove(f.Name()); err != nil {
			_ = f.Close()
			return err
		}
		s.file = f
	}
	if err := s.file.Truncate(0); err != nil {
		return err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := s.mem.WriteTo(s.file); err != nil {
		return err
	}
	s.inFile = true
	return nil
}

func (s *spool) close() {
	if s.file != nil {
		_ = s.file.Close()
	}
}
