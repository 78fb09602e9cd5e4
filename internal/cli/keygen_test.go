package cli

import (
	"crypto/tls"
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
	meta, err := keygenMeta("cluster1", []string{"mammal=chinchilla,reptile=chamelion", "smurf=", "bare", "keygen.hostname=myhost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := keygen(path, meta); err != nil {
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
	for _, want := range []string{`name = "cluster1"`, `mammal = "chinchilla"`, `reptile = "chamelion"`,
		`smurf = ""`, `bare = ""`, `keygen.hostname = "myhost"`, "secret-key = ", "public-key = "} {
		if !strings.Contains(string(first), want) {
			t.Errorf("certificate lacks %q:\n%s", want, first)
		}
	}
	// the broker reads the PEM pair past the header
	if _, err := tls.X509KeyPair(first, first); err != nil {
		t.Fatalf("key pair: %v", err)
	}
	block, _ := pem.Decode(first)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no certificate in %s", first)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName != "cluster1" {
		t.Errorf("certificate name %q, %v", cert.Subject.CommonName, err)
	}
	// an existing file is replaced, and made private again
	os.Chmod(path, 0o644)
	if err := keygen(path, meta); err != nil {
		t.Fatal(err)
	}
	st, _ = os.Stat(path)
	if again, _ := os.ReadFile(path); string(again) == string(first) || st.Mode().Perm() != 0o600 {
		t.Errorf("overwrite: new key %v, mode %v", string(again) != string(first), st.Mode().Perm())
	}
	// metadata that could break the file is refused
	for _, bad := range []string{`x="y"`, "a b=c", "k=-----BEGIN"} {
		if _, err := keygenMeta("", []string{bad}); err == nil {
			t.Errorf("--meta %q accepted", bad)
		}
	}
}

func TestKeygenCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb strings.Builder
	if code := Main([]string{"keygen"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(errb.String(), "WARNING: add PATH argument") {
		t.Fatalf("keygen without PATH: exit %d: %s", code, errb.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("keygen without PATH wrote %v", ents)
	}
	if code := Main([]string{"keygen", "a", "b"}, strings.NewReader(""), &out, &errb); code == 0 {
		t.Error("two paths accepted")
	}
	if code := Main([]string{"keygen", "--force", "k"}, strings.NewReader(""), &out, &errb); code == 0 {
		t.Error("--force accepted (flux-core has no such option)")
	}
	if code := Main([]string{"keygen", "--name=testcert", "cert2"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("keygen --name: %s", errb.String())
	}
	if b, _ := os.ReadFile("cert2"); !strings.Contains(string(b), "testcert") {
		t.Error("--name not in the certificate")
	}
}
