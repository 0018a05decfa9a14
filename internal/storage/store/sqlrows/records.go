package sqlrows

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hutchdev/hutch/internal/net/netpolicy"
	"github.com/hutchdev/hutch/internal/storage/store"
)

// SandboxColumns are a sandbox's columns, in the order of SandboxArgs and
// ScanSandbox.
const SandboxColumns = `id, template, backend, state, state_reason, handle, cpus, memory_mb, pids,
	idle_timeout_s, env, metadata, created_at, updated_at, disk_mb, template_version, idle_action, key, expires_at, volumes, network,
	workspace, owner_user, secrets, node, image, checkpoints, on_suspend, on_resume`

// ShapeArgs are s's values for env, metadata, cpus, memory_mb, pids,
// disk_mb, volumes and updated_at, in that order.
func ShapeArgs(s store.Shape) ([]any, error) {
	env, meta, err := encodeMaps(s.Env, s.Metadata)
	if err != nil {
		return nil, err
	}
	volumes, err := encodeVolumes(s.Volumes)
	if err != nil {
		return nil, err
	}
	return []any{env, meta, s.CPUs, s.MemoryMB, s.Pids, s.DiskMB, volumes, s.At.UnixNano()}, nil
}

// encodeVolumes is vols as their column holds them: a JSON array, [] for
// none.
func encodeVolumes(vols []store.VolumeMount) (string, error) {
	if vols == nil {
		vols = []store.VolumeMount{}
	}
	b, err := json.Marshal(vols)
	return string(b), err
}

// encodeMaps is env and metadata as their columns hold them: JSON
// objects, {} for none.
func encodeMaps(env, meta map[string]string) (string, string, error) {
	e, err := json.Marshal(nonNil(env))
	if err != nil {
		return "", "", err
	}
	m, err := json.Marshal(nonNil(meta))
	return string(e), string(m), err
}

// SandboxArgs are sb's values for SandboxColumns.
func SandboxArgs(sb *store.Sandbox) ([]any, error) {
	env, meta, err := encodeMaps(sb.Env, sb.Metadata)
	if err != nil {
		return nil, err
	}
	volumes, err := encodeVolumes(sb.Volumes)
	if err != nil {
		return nil, err
	}
	network, err := EncodeNetwork(sb.Network)
	if err != nil {
		return nil, err
	}
	var secrets *string // NULL: all of its workspace's
	if sb.Secrets != nil {
		b, err := json.Marshal(sb.Secrets)
		if err != nil {
			return nil, err
		}
		s := string(b)
		secrets = &s
	}
	return []any{
		sb.ID, sb.Template, sb.Backend, string(sb.State), sb.StateReason, sb.Handle, sb.CPUs,
		sb.MemoryMB, sb.Pids, int64(sb.IdleTimeout / time.Second), env, meta,
		sb.CreatedAt.UnixNano(), sb.UpdatedAt.UnixNano(), sb.DiskMB, sb.TemplateVersion, sb.IdleAction, nullable(sb.Key),
		sb.ExpiresAt.UnixNano(), volumes, network, sb.Workspace, sb.User, secrets, sb.Node, sb.Image, sb.Checkpoints, sb.OnSuspend, sb.OnResume,
	}, nil
}

// ScanSandbox reads a row of SandboxColumns.
func ScanSandbox(row Scanner) (*store.Sandbox, error) {
	var (
		sb               store.Sandbox
		state            string
		idle             int64
		env, meta        string
		created, updated int64
		key              *string
		expires          int64
		volumes, network string
		secrets          *string
	)
	err := row.Scan(&sb.ID, &sb.Template, &sb.Backend, &state, &sb.StateReason, &sb.Handle,
		&sb.CPUs, &sb.MemoryMB, &sb.Pids, &idle, &env, &meta, &created, &updated, &sb.DiskMB, &sb.TemplateVersion, &sb.IdleAction, &key, &expires, &volumes, &network,
		&sb.Workspace, &sb.User, &secrets, &sb.Node, &sb.Image, &sb.Checkpoints, &sb.OnSuspend, &sb.OnResume)
	if err != nil {
		return nil, err
	}
	sb.State = store.State(state)
	sb.IdleTimeout = time.Duration(idle) * time.Second
	if key != nil {
		sb.Key = *key
	}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return nil, fmt.Errorf("decode env of %s: %w", sb.ID, err)
	}
	if err := json.Unmarshal([]byte(meta), &sb.Metadata); err != nil {
		return nil, fmt.Errorf("decode metadata of %s: %w", sb.ID, err)
	}
	sb.CreatedAt = Time(created)
	sb.UpdatedAt = Time(updated)
	sb.ExpiresAt = Time(expires)
	if err := json.Unmarshal([]byte(volumes), &sb.Volumes); err != nil {
		return nil, fmt.Errorf("decode volumes of %s: %w", sb.ID, err)
	}
	if err := json.Unmarshal([]byte(network), &sb.Network); err != nil {
		return nil, fmt.Errorf("decode network policy of %s: %w", sb.ID, err)
	}
	if secrets != nil {
		if err := json.Unmarshal([]byte(*secrets), &sb.Secrets); err != nil {
			return nil, fmt.Errorf("decode secrets' names of %s: %w", sb.ID, err)
		}
		if sb.Secrets == nil {
			sb.Secrets = []string{}
		}
	}
	return &sb, nil
}

// EncodeNetwork is a policy as stored: none when not given.
func EncodeNetwork(p netpolicy.Policy) (string, error) {
	if p.Mode == "" {
		p.Mode = netpolicy.None
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// ProcessColumns are a background process's columns, in the order of
// ProcessArgs and ScanProcess.
const ProcessColumns = `sandbox_id, name, argv, cwd, "user", env, port, running, created_at, for_user, stdin, public, slot, links_revoked_at`

// ProcessArgs are p's values for ProcessColumns.
func ProcessArgs(p *store.Process) ([]any, error) {
	argv, err := json.Marshal(p.Argv)
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(nonNil(p.Env))
	if err != nil {
		return nil, err
	}
	var revoked *int64 // NULL: none revoked
	if !p.LinksRevokedAt.IsZero() {
		at := p.LinksRevokedAt.UnixNano()
		revoked = &at
	}
	return []any{
		p.SandboxID, p.Name, string(argv), p.Cwd, p.User, string(env), p.Port, p.Running, p.CreatedAt.UnixNano(),
		p.ForUser, p.Stdin, p.Public, p.Slot, revoked,
	}, nil
}

// ScanProcess reads a row of ProcessColumns.
func ScanProcess(row Scanner) (*store.Process, error) {
	var (
		p         store.Process
		argv, env string
		created   int64
		revoked   *int64
	)
	if err := row.Scan(&p.SandboxID, &p.Name, &argv, &p.Cwd, &p.User, &env, &p.Port, &p.Running, &created,
		&p.ForUser, &p.Stdin, &p.Public, &p.Slot, &revoked); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(argv), &p.Argv); err != nil {
		return nil, fmt.Errorf("decode command of process %s: %w", p.Name, err)
	}
	if err := json.Unmarshal([]byte(env), &p.Env); err != nil {
		return nil, fmt.Errorf("decode env of process %s: %w", p.Name, err)
	}
	p.CreatedAt = Time(created)
	if revoked != nil {
		p.LinksRevokedAt = Time(*revoked)
	}
	return &p, nil
}

// VolumeColumns are a volume's columns, in the order of ScanVolume.
const VolumeColumns = `name, created_at`

// ScanVolume reads a row of VolumeColumns.
func ScanVolume(row Scanner) (*store.Volume, error) {
	var (
		v       store.Volume
		created int64
	)
	if err := row.Scan(&v.Name, &created); err != nil {
		return nil, err
	}
	v.CreatedAt = Time(created)
	return &v, nil
}

// APIKeyColumns are an API key's columns, in the order of APIKeyArgs and
// ScanAPIKey.
// #nosec G101 -- column names: the key itself is never stored, only its hash
const APIKeyColumns = `name, hash, tools_mode, network_mode, workspace, created_at`

// APIKeyArgs are k's values for APIKeyColumns.
func APIKeyArgs(k *store.APIKey) []any {
	return []any{k.Name, k.Hash, k.ToolsMode, OrFull(k.NetworkMode), k.Workspace, k.CreatedAt.UnixNano()}
}

// ScanAPIKey reads a row of APIKeyColumns.
func ScanAPIKey(row Scanner) (*store.APIKey, error) {
	var (
		k       store.APIKey
		created int64
	)
	if err := row.Scan(&k.Name, &k.Hash, &k.ToolsMode, &k.NetworkMode, &k.Workspace, &created); err != nil {
		return nil, err
	}
	k.CreatedAt = Time(created)
	return &k, nil
}

// OrFull is a key's network mode as stored: full when not given.
func OrFull(mode string) string {
	if mode == "" {
		return string(netpolicy.Full)
	}
	return mode
}

// WorkspaceColumns are a workspace's columns, in the order of
// ScanWorkspace.
const WorkspaceColumns = `name, quota, created_at, updated_at`

// ScanWorkspace reads a row of WorkspaceColumns.
func ScanWorkspace(row Scanner) (*store.Workspace, error) {
	var (
		w                store.Workspace
		quota            string
		created, updated int64
	)
	if err := row.Scan(&w.Name, &quota, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(quota), &w.Quota); err != nil {
		return nil, fmt.Errorf("decode quota of workspace %s: %w", w.Name, err)
	}
	w.CreatedAt, w.UpdatedAt = Time(created), Time(updated)
	return &w, nil
}

// AuditColumns are an audit entry's columns but its id (which the database
// gives), in the order of AuditArgs.
const AuditColumns = `at, key_name, workspace, "user", action, object, status, code`

// AuditArgs are e's values for AuditColumns.
func AuditArgs(e *store.AuditEntry) []any {
	return []any{e.Time.UnixNano(), e.Key, e.Workspace, e.User, e.Action, e.Object, e.Status, e.Code}
}

// ScanAuditEntry reads a row of id and AuditColumns.
func ScanAuditEntry(row Scanner) (*store.AuditEntry, error) {
	var (
		e  store.AuditEntry
		at int64
	)
	if err := row.Scan(&e.ID, &at, &e.Key, &e.Workspace, &e.User, &e.Action, &e.Object, &e.Status, &e.Code); err != nil {
		return nil, err
	}
	e.Time = Time(at)
	return &e, nil
}

// nullable is s, or NULL when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// NodeColumns are a node's columns, in the order of NodeArgs and ScanNode.
const NodeColumns = `id, url, state, reason, report, started_at, heartbeat_at, tls_fingerprint`

// NodeArgs are n's values for NodeColumns.
func NodeArgs(n *store.Node) ([]any, error) {
	report, err := json.Marshal(n.Report)
	if err != nil {
		return nil, err
	}
	return []any{n.ID, n.URL, n.State, n.Reason, string(report), n.StartedAt.UnixNano(), n.HeartbeatAt.UnixNano(), n.Fingerprint}, nil
}

// ScanNode reads a row of NodeColumns.
func ScanNode(row Scanner) (*store.Node, error) {
	var (
		n              store.Node
		report         string
		started, beats int64
	)
	if err := row.Scan(&n.ID, &n.URL, &n.State, &n.Reason, &report, &started, &beats, &n.Fingerprint); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(report), &n.Report); err != nil {
		return nil, fmt.Errorf("decode report of node %s: %w", n.ID, err)
	}
	n.StartedAt, n.HeartbeatAt = Time(started), Time(beats)
	return &n, nil
}

// ScanClusterTemplate reads a row of name, version, origin, info and
// updated_at.
func ScanClusterTemplate(row Scanner) (*store.ClusterTemplate, error) {
	var (
		t       store.ClusterTemplate
		info    string
		updated int64
	)
	if err := row.Scan(&t.Name, &t.Version, &t.Origin, &info, &updated); err != nil {
		return nil, err
	}
	t.Info, t.UpdatedAt = []byte(info), Time(updated)
	return &t, nil
}

// EventColumns are an event's columns but its id (which the database
// gives), in the order of EventArgs.
const EventColumns = `at, workspace, sandbox, type, reason, message, data`

// EventArgs are e's values for EventColumns.
func EventArgs(e *store.Event) ([]any, error) {
	data, err := json.Marshal(nonNil(e.Data))
	if err != nil {
		return nil, err
	}
	return []any{e.Time.UnixNano(), e.Workspace, e.Sandbox, e.Type, e.Reason, e.Message, string(data)}, nil
}

// ScanEvent reads a row of id and EventColumns.
func ScanEvent(row Scanner) (*store.Event, error) {
	var (
		e    store.Event
		at   int64
		data string
	)
	if err := row.Scan(&e.ID, &at, &e.Workspace, &e.Sandbox, &e.Type, &e.Reason, &e.Message, &data); err != nil {
		return nil, err
	}
	e.Time = Time(at)
	if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
		return nil, fmt.Errorf("decode data of event %d: %w", e.ID, err)
	}
	if len(e.Data) == 0 {
		e.Data = nil
	}
	return &e, nil
}

// WebhookColumns are a webhook's columns, in the order of WebhookArgs and
// ScanWebhook.
const WebhookColumns = `id, workspace, url, types, sealed_secret, created_at`

// WebhookArgs are w's values for WebhookColumns.
func WebhookArgs(w *store.Webhook) ([]any, error) {
	types := w.Types
	if types == nil {
		types = []string{}
	}
	b, err := json.Marshal(types)
	if err != nil {
		return nil, err
	}
	return []any{w.ID, w.Workspace, w.URL, string(b), w.SealedSecret, w.CreatedAt.UnixNano()}, nil
}

// ScanWebhook reads a row of WebhookColumns.
func ScanWebhook(row Scanner) (*store.Webhook, error) {
	var (
		w       store.Webhook
		types   string
		created int64
	)
	if err := row.Scan(&w.ID, &w.Workspace, &w.URL, &types, &w.SealedSecret, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(types), &w.Types); err != nil {
		return nil, fmt.Errorf("decode types of webhook %s: %w", w.ID, err)
	}
	if len(w.Types) == 0 {
		w.Types = nil
	}
	w.CreatedAt = Time(created)
	return &w, nil
}

// DeliveryColumns are a delivery's columns but its id (which the
// database gives), in the order of DeliveryArgs.
const DeliveryColumns = `webhook, event, attempt, at, status, error, duration_ns`

// DeliveryArgs are d's values for DeliveryColumns.
func DeliveryArgs(d *store.Delivery) []any {
	return []any{d.Webhook, d.Event, d.Attempt, d.Time.UnixNano(), d.Status, d.Error, int64(d.Duration)}
}

// ScanDelivery reads a row of id and DeliveryColumns.
func ScanDelivery(row Scanner) (*store.Delivery, error) {
	var (
		d        store.Delivery
		at, took int64
	)
	if err := row.Scan(&d.ID, &d.Webhook, &d.Event, &d.Attempt, &at, &d.Status, &d.Error, &took); err != nil {
		return nil, err
	}
	d.Time, d.Duration = Time(at), time.Duration(took)
	return &d, nil
}
