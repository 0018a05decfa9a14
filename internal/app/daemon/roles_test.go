package daemon

import (
	"strings"
	"testing"
)

// A node is reached over TLS only: its advertised URL is https, by
// default and when given; plain http is refused at start.
func TestNodeAdvertisesHTTPSOnly(t *testing.T) {
	tests := []struct {
		name, listen, advertise string
		want, wantErr           string
	}{
		{"default", "10.0.0.5:7070", "", "https://10.0.0.5:7070", ""},
		{"given", "0.0.0.0:7070", "https://node-1.example:7070/", "https://node-1.example:7070", ""},
		{"plain http", "10.0.0.5:7070", "http://10.0.0.5:7070", "", "https URL"},
		{"every address", "0.0.0.0:7070", "", "", "give advertise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			cfg.Role, cfg.Listen, cfg.Advertise = RoleNode, tt.listen, tt.advertise
			got, err := cfg.advertise()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("advertise() = %q, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("advertise() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
