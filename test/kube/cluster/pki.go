package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificates, all made by one CA for the test's
// lifetime: the API server's serving certificate and one client
// certificate in system:masters that every component and kubectl use (the
// cluster has one user: the test).
type pki struct {
	dir                   string
	caCert                string
	serverCert, serverKey string
	adminCert, adminKey   string
	saKey, saPub          string // the service accounts' signing key
}

func makePKI(dir string, serverIPs []net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	join := func(n string) string { return filepath.Join(dir, n) }
	p.caCert = join("ca.crt")
	p.serverCert, p.serverKey = join("apiserver.crt"), join("apiserver.key")
	p.adminCert, p.adminKey = join("admin.crt"), join("admin.key")
	p.saKey, p.saPub = join("sa.key"), join("sa.pub")

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hutch-kube-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.caCert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(certPath, keyPath string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.NotBefore, tmpl.NotAfter = caTmpl.NotBefore, caTmpl.NotAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", keyDER)
	}
	err = issue(p.serverCert, p.serverKey, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  serverIPs,
		DNSNames:     []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	})
	if err != nil {
		return nil, fmt.Errorf("API server certificate: %w", err)
	}
	err = issue(p.adminCert, p.adminKey, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "hutch-kube-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	// Service account tokens: the API server verifies with the public
	// half, the API server and the controller manager sign with the key.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	if err := writePEM(p.saPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// kubeconfig is a kubeconfig for server with the admin certificate.
func (p *pki) kubeconfig(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: hutch-kube
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: hutch-kube
  context: {cluster: hutch-kube, user: admin}
current-context: hutch-kube
`, server, p.caCert, p.adminCert, p.adminKey)
}
