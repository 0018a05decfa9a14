package kube_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// overlay is the test's kustomize overlay of deploy/: what a user writes
// for their cluster (the image, the Secret, the node's host paths), and
// what the test's cluster needs besides (no registry: images are never
// pulled; the API tier under gVisor).
type overlay struct {
	Dir, Deploy, Image                         string
	APIKey, MasterKey, Store, PostgresPassword string
	NodeData, NodeRun                          string
}

func (o overlay) write() error {
	i := strings.LastIndex(o.Image, ":")
	repo, tag := o.Image[:max(i, 0)], o.Image[i+1:]
	if i < 0 || strings.Contains(tag, "/") {
		return fmt.Errorf("image %q has no tag", o.Image)
	}
	// kustomize takes a base by a relative path only.
	base, err := filepath.Rel(o.Dir, o.Deploy)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: hutch
    newName: %s
    newTag: %q
secretGenerator:
  - name: hutch
    namespace: hutch
    literals:
      - api-key=%s
      - master-key=%s
      - store=%s
      - postgres-password=%s
generatorOptions:
  disableNameSuffixHash: true
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: hutch-node, namespace: hutch}
      spec:
        template:
          spec:
            volumes:
              - name: data
                hostPath: {path: %s, type: DirectoryOrCreate}
              - name: run
                hostPath: {path: %s, type: DirectoryOrCreate}
            containers:
              - name: hutch
                env:
                  - name: HUTCH_PORT
                    value: "%d"
  - target: {kind: DaemonSet, name: hutch-node}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/ports/0/containerPort
        value: %d
      - op: replace
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
`, base, repo, tag, o.APIKey, o.MasterKey, o.Store, o.PostgresPassword, o.NodeData, o.NodeRun, nodePort, nodePort)
	// The API tier runs under gVisor here: it faces the callers, and it
	// needs nothing gVisor lacks.
	b.WriteString(`  - target: {kind: Deployment, name: hutch-api}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/runtimeClassName
        value: gvisor
`)
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Dir, "kustomization.yaml"), []byte(b.String()), 0o600)
}

// singleFileTar is a tar stream of one file, at name in the root.
func singleFileTar(src, name string) (io.ReadCloser, error) {
	body, err := os.ReadFile(src) // #nosec G304 -- a file the test built
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(body))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}
