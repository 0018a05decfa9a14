package cluster

import (
	"net/http/httptest"
	"testing"
)

func TestSandboxOf(t *testing.T) {
	tests := []struct {
		method, target, host string
		want                 string
		create               bool
	}{
		{"GET", "/v1/sandboxes/abc123/files?path=x", "api:7070", "abc123", false},
		{"GET", "/v1/sandboxes/abc123", "api:7070", "abc123", false},
		{"GET", "/v1/sandboxes", "api:7070", "", false},
		{"POST", "/v1/sandboxes", "api:7070", "", true},
		{"POST", "/e2b/sandboxes", "api:7070", "", true},
		{"POST", "/e2b/sandboxes/abc123/pause", "api:7070", "abc123", false},
		{"GET", "/", "8000-abc123.localhost:7070", "abc123", false},
		{"GET", "/", "8000-abc123.example.com", "", false}, // another domain: not a preview
		{"GET", "/v1/health", "api:7070", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		r.Host = tt.host
		if got := sandboxOf(r, "localhost"); got != tt.want {
			t.Errorf("%s %s (host %s): sandbox %q, want %q", tt.method, tt.target, tt.host, got, tt.want)
		}
		if got := isCreate(r); got != tt.create {
			t.Errorf("%s %s: create %v, want %v", tt.method, tt.target, got, tt.create)
		}
	}
}
