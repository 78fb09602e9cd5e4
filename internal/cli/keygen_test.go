package cli

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "curve.cert")
	if err := keygen(path, "cluster1", false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	first, _ := os.ReadFile(path)
	block, rest := pem.Decode(first)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no certificate in %s", first)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName != "cluster1" {
		t.Errorf("certificate name %q, %v", cert.Subject.CommonName, err)
	}
	if key, _ := pem.Decode(rest); key == nil || !strings.Contains(key.Type, "PRIVATE KEY") {
		t.Error("no private key after the certificate")
	}

	err = keygen(path, "cluster1", false)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("overwrite without --force: %v", err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Error("refused overwrite changed the file")
	}

	os.Chmod(path, 0o644)
	if err := keygen(path, "cluster1", true); err != nil {
		t.Fatal(err)
	}
	st, _ = os.Stat(path)
	if again, _ := os.ReadFile(path); string(again) == string(first) || st.Mode().Perm() != 0o600 {
		t.Errorf("--force: new key %v, mode %v", string(again) != string(first), st.Mode().Perm())
	}
}

func TestKeygenCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, want := range []int{0, 1} {
		var out, errb strings.Builder
		if code := Main([]string{"keygen"}, strings.NewReader(""), &out, &errb); code != want {
			t.Fatalf("exit %d, want %d: %s", code, want, errb.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, defaultKeyPath)); err != nil {
		t.Error(err)
	}
}
