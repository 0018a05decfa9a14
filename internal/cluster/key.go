package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/hutchdev/hutch/internal/base/errdefs"
	"github.com/hutchdev/hutch/internal/front/api"
	"github.com/hutchdev/hutch/internal/storage/rootfs"
)

// The cluster key: what a node asks of every call before anything else,
// so that only the cluster's own daemons reach it. Replicas send it
// beside the caller's key (which the node checks as a single box does);
// nodes send it alone on the calls that are no tenant's (a template's
// archive, below). Tenants never hold it: it is no API key (no route of
// the API takes it as one), it travels only over TLS pinned to a node
// (tls.go), a replica sets it itself on every call it sends on (a
// caller's is replaced), and a node removes it from each call before
// the call goes further (to a sandbox's server, through a preview).
//
// It is derived from the API key every node and replica of a cluster is
// given (api_key_file, the Secret's api-key on Kubernetes): no other
// secret to hand out and keep in step, and one that is not itself that
// key, which never leaves the daemons' callers now.

// HeaderClusterKey carries the cluster key on calls to a node.
const HeaderClusterKey = "Hutch-Cluster-Key"

// InternalPrefix is where a node serves the calls of other nodes, which
// the cluster key alone allows. A replica never sends a caller's call
// there.
const InternalPrefix = "/cluster/"

// DeriveKey is the cluster key of a cluster whose daemons share apiKey.
func DeriveKey(apiKey string) string {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte("hutch cluster key v1"))
	return "hutchcluster_" + hex.EncodeToString(m.Sum(nil))
}

// NodeGuard is the front of a node's listeners: a call without the
// cluster key is refused (401); one with it goes to the node's internal
// routes (InternalPrefix) or to next, the API, with the key removed.
type NodeGuard struct {
	Key string
	// Templates are this node's, whose archives other nodes copy (nil:
	// no internal routes, as on a node's E2B front).
	Templates *rootfs.Store
	Log       *slog.Logger
}

// Wrap returns next behind g.
func (g *NodeGuard) Wrap(next http.Handler) http.Handler {
	if g.Log == nil {
		g.Log = slog.New(slog.DiscardHandler)
	}
	log := g.Log
	internal := http.NewServeMux()
	if g.Templates != nil {
		internal.HandleFunc("GET "+InternalPrefix+"v1/templates/{name}/archive", g.templateArchive)
	}
	internal.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, r, log, errdefs.NotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(HeaderClusterKey)
		r.Header.Del(HeaderClusterKey)
		if g.Key == "" || subtle.ConstantTimeCompare([]byte(got), []byte(g.Key)) != 1 {
			api.WriteError(w, r, log, errdefs.Unauthenticated("this is a node of a Hutch cluster: it answers its API replicas and nodes only (call an API replica)"))
			return
		}
		if strings.HasPrefix(r.URL.Path, InternalPrefix) {
			internal.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// templateArchive sends a version of a template (?version=, else the
// current one) as an archive to another node, with its SHA-256 in the
// trailer (api.HeaderArchiveSum).
func (g *NodeGuard) templateArchive(w http.ResponseWriter, r *http.Request) {
	name, version := r.PathValue("name"), r.URL.Query().Get("version")
	if version == "" {
		info, err := g.Templates.Info(name)
		if err != nil {
			api.WriteError(w, r, g.Log, err)
			return
		}
		version = info.Version
	}
	w.Header().Set("Trailer", api.HeaderArchiveSum)
	w.Header().Set("Content-Type", "application/x-tar")
	// An archive that fails half-way ends without its sum: the receiver
	// refuses it.
	sum, err := g.Templates.WriteArchive(r.Context(), w, name, version)
	if err != nil {
		g.Log.Warn("send a template's archive to another node", "template", name, "version", version, "error", err)
		return
	}
	w.Header().Set(api.HeaderArchiveSum, sum)
}

// isInternal says whether p is a node's internal route, which a replica
// never sends a caller's call to, however spelled (the listeners refuse
// other spellings than the one, but this holds without them too).
func isInternal(p string) bool {
	p = path.Clean("/" + p)
	return strings.HasPrefix(p+"/", InternalPrefix)
}
