package sink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton"
)

// natsPKI is a CA made for one test, with a server certificate for
// 127.0.0.1 and a client certificate it signed, all written as PEM files.
type natsPKI struct {
	dir                   string
	ca                    string // the CA's certificate
	pool                  *x509.CertPool
	serverCert            tls.Certificate
	clientCert, clientKey string
}

func newNATSPKI(t *testing.T, name string) *natsPKI {
	t.Helper()
	p := &natsPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey := natsTestKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(ca)
	p.ca = p.write(t, "ca.pem", "CERTIFICATE", caDER)

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := natsTestKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	der, key := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	p.serverCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	der, key = issue(3, "baton relay", x509.ExtKeyUsageClientAuth)
	p.clientCert = p.write(t, "client.pem", "CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = p.write(t, "client-key.pem", "PRIVATE KEY", keyDER)
	return p
}

func natsTestKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *natsPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// serverTLS is the server's TLS configuration; with verify, it asks for a
// client certificate signed by the CA and refuses a connection without one.
func (p *natsPKI) serverTLS(verify bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}
	if verify {
		c.ClientCAs = p.pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// startSecureNATS starts a NATS server with JetStream on a free port of
// 127.0.0.1, as configure leaves its options.
func startSecureNATS(t *testing.T, configure func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	configure(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// natsWithTLS makes the server speak TLS only, with a generous handshake
// timeout for a busy machine.
func natsWithTLS(o *server.Options, p *natsPKI, verify bool) {
	o.TLS = true
	o.TLSConfig = p.serverTLS(verify)
	o.TLSVerify = verify
	o.TLSTimeout = 10
}

// natsReaderStream connects to s with opts and makes stream ORDERS for
// orders.>, returning a function that counts its messages.
func natsReaderStream(t *testing.T, s *server.Server, opts ...nats.Option) func() uint64 {
	t.Helper()
	nc, err := nats.Connect(natsURL(s), append([]nats.Option{nats.Timeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return func() uint64 { return streamMsgs(t, st) }
}

func natsURL(s *server.Server) string { return "nats://127.0.0.1:" + strconv.Itoa(natsPort(s)) }

// openNATSSpec opens spec, failing the test on an error.
func openNATSSpec(t *testing.T, spec string) *NATS {
	t.Helper()
	return openNATS(t, spec, 10*time.Second)
}

// checkNATSConnectError checks that err is a retried failure to connect that
// says want, and shows no secret and no stack trace.
func checkNATSConnectError(t *testing.T, what string, err error, want string, secrets ...string) {
	t.Helper()
	if outcomeOf(err) != retried {
		t.Errorf("%s: Deliver = %v, want retried", what, err)
		return
	}
	msg := err.Error()
	t.Logf("%s: %s", what, msg)
	if !strings.Contains(msg, "cannot connect") || !strings.Contains(msg, want) {
		t.Errorf("%s: %q does not say %q", what, msg, want)
	}
	if strings.Contains(msg, "goroutine ") || strings.Contains(msg, ".go:") {
		t.Errorf("%s: %q looks like a stack trace", what, msg)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("%s: %q shows a secret", what, msg)
		}
	}
}

func TestNATSOverTLSWithCustomCA(t *testing.T) {
	t.Parallel()
	pki, other := newNATSPKI(t, "test"), newNATSPKI(t, "other")
	srv := startSecureNATS(t, func(o *server.Options) { natsWithTLS(o, pki, false) })
	count := natsReaderStream(t, srv, nats.RootCAs(pki.ca))
	base := natsURL(srv)

	n := openNATSSpec(t, base+"?tls_ca="+url.QueryEscape(pki.ca))
	if err := n.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatalf("Deliver over TLS trusting the server's CA: %v", err)
	}
	if got := count(); got != 1 {
		t.Errorf("the stream holds %d messages, want 1", got)
	}

	err := openNATSSpec(t, base+"?tls_ca="+url.QueryEscape(other.ca)).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "trusting another CA", err, "not signed by a CA the sink trusts")
	// Without tls_ca the client still upgrades (the server requires TLS),
	// and the system's CAs do not know this one.
	err = openNATSSpec(t, base).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "trusting the system's CAs", err, "not signed by a CA the sink trusts")

	// tls=true refuses a server that offers no TLS, rather than sending in
	// the clear.
	plain := startNATS(t, 0, t.TempDir(), 0)
	err = openNATSSpec(t, natsURL(plain)+"?tls=true").Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "tls=true to a server without TLS", err, "offers none")
}

func TestNATSClientCertificate(t *testing.T) {
	t.Parallel()
	pki, other := newNATSPKI(t, "test"), newNATSPKI(t, "other")
	srv := startSecureNATS(t, func(o *server.Options) { natsWithTLS(o, pki, true) })
	count := natsReaderStream(t, srv, nats.RootCAs(pki.ca), nats.ClientCert(pki.clientCert, pki.clientKey))
	base := natsURL(srv) + "?tls_ca=" + url.QueryEscape(pki.ca)

	n := openNATSSpec(t, base+"&tls_cert="+url.QueryEscape(pki.clientCert)+"&tls_key="+url.QueryEscape(pki.clientKey))
	if err := n.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatalf("Deliver with a client certificate: %v", err)
	}
	if got := count(); got != 1 {
		t.Errorf("the stream holds %d messages, want 1", got)
	}

	err := openNATSSpec(t, base).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "without a client certificate", err, "client certificate")
	// A certificate the server's CA did not sign is refused too.
	err = openNATSSpec(t, base+"&tls_cert="+url.QueryEscape(other.clientCert)+"&tls_key="+url.QueryEscape(other.clientKey)).
		Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "with a certificate of another CA", err, "certificate")
	if got := count(); got != 1 {
		t.Errorf("the stream holds %d messages after refused connections, want 1", got)
	}
}

// writeNATSSeed makes a user key pair and writes its seed to a file,
// returning the public key, the seed and the file.
func writeNATSSeed(t *testing.T, name string) (pub, seed, file string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, append(s, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, string(s), file
}

func TestNATSNKeyUserOverTLS(t *testing.T) {
	t.Parallel()
	pki := newNATSPKI(t, "test")
	pub, seed, seedFile := writeNATSSeed(t, "relay.nk")
	_, wrongSeed, wrongFile := writeNATSSeed(t, "wrong.nk")
	srv := startSecureNATS(t, func(o *server.Options) {
		natsWithTLS(o, pki, false)
		o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	})
	readerOpt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	count := natsReaderStream(t, srv, nats.RootCAs(pki.ca), readerOpt)
	base := natsURL(srv) + "?tls_ca=" + url.QueryEscape(pki.ca)

	n := openNATSSpec(t, base+"&nkey="+url.QueryEscape(seedFile))
	if err := n.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatalf("Deliver as the NKey user: %v", err)
	}
	if got := count(); got != 1 {
		t.Errorf("the stream holds %d messages, want 1", got)
	}
	if s := n.String(); strings.Contains(s, seed) || !strings.Contains(s, "nkey="+seedFile) {
		t.Errorf("String() = %q, want the seed's file and not the seed", s)
	}

	err = openNATSSpec(t, base+"&nkey="+url.QueryEscape(wrongFile)).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "with a wrong seed", err, "refused the credentials", seed, wrongSeed)
	err = openNATSSpec(t, base).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "without a seed", err, "refused the credentials")
}

func TestNATSCredsFile(t *testing.T) {
	t.Parallel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// An operator signs a system account and an account with JetStream;
	// the account signs its user, whose JWT and seed make the creds file.
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	must(err)
	opClaims, err := jwt.DecodeOperatorClaims(ojwt)
	must(err)
	resolver := &server.MemAccResolver{}
	account := func(js bool) nkeys.KeyPair {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		c := jwt.NewAccountClaims(pub)
		if js {
			c.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		a, err := c.Encode(okp)
		must(err)
		must(resolver.Store(pub, a))
		return kp
	}
	sys, acc := account(false), account(true)
	sysPub, err := sys.PublicKey()
	must(err)
	credsFor := func(signer nkeys.KeyPair, name string) (file, seed string) {
		ukp, err := nkeys.CreateUser()
		must(err)
		upub, err := ukp.PublicKey()
		must(err)
		useed, err := ukp.Seed()
		must(err)
		ujwt, err := jwt.NewUserClaims(upub).Encode(signer)
		must(err)
		creds, err := jwt.FormatUserConfig(ujwt, useed)
		must(err)
		file = filepath.Join(t.TempDir(), name)
		must(os.WriteFile(file, creds, 0o600))
		return file, string(useed)
	}
	credsFile, seed := credsFor(acc, "relay.creds")
	strangerKey, err := nkeys.CreateAccount() // an account the operator never signed
	must(err)
	strangerFile, strangerSeed := credsFor(strangerKey, "stranger.creds")

	pki := newNATSPKI(t, "test")
	srv := startSecureNATS(t, func(o *server.Options) {
		natsWithTLS(o, pki, false)
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	})
	count := natsReaderStream(t, srv, nats.RootCAs(pki.ca), nats.UserCredentials(credsFile))
	base := natsURL(srv) + "?tls_ca=" + url.QueryEscape(pki.ca)

	n := openNATSSpec(t, base+"&creds="+url.QueryEscape(credsFile))
	if err := n.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatalf("Deliver with the creds file: %v", err)
	}
	if got := count(); got != 1 {
		t.Errorf("the stream holds %d messages, want 1", got)
	}

	err = openNATSSpec(t, base+"&creds="+url.QueryEscape(strangerFile)).Deliver(context.Background(), testEvent())
	checkNATSConnectError(t, "with creds of an unknown account", err, "refused the credentials", seed, strangerSeed)
}

func TestOpenNATSRejectsBadSecurity(t *testing.T) {
	t.Parallel()
	pki := newNATSPKI(t, "test")
	_, seed, seedFile := writeNATSSeed(t, "relay.nk")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key "+seed[:10]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	akp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	aseed, err := akp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	accountSeed := filepath.Join(dir, "account.nk")
	if err := os.WriteFile(accountSeed, aseed, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	q := url.QueryEscape
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"tls_cafile=" + q(pki.ca), `unknown parameter "tls_cafile"`},
		{"tls=maybe", `tls "maybe": want true or false`},
		{"tls=false&tls_ca=" + q(pki.ca), "need TLS"},
		{"tls_ca=", "tls_ca is empty"},
		{"tls_ca=" + q(missing), "no such file"},
		{"tls_ca=" + q(garbage), "holds no PEM certificate"},
		{"tls_cert=" + q(pki.clientCert), "tls_cert without tls_key"},
		{"tls_key=" + q(pki.clientKey), "tls_key without tls_cert"},
		{"tls_cert=" + q(pki.clientKey) + "&tls_key=" + q(pki.clientCert), "tls_cert"},
		{"tls_cert=" + q(pki.clientCert) + "&tls_key=" + q(missing), "no such file"},
		{"nkey=" + q(missing), "no such file"},
		{"nkey=" + q(garbage), "want a file holding a user seed"},
		{"nkey=" + q(accountSeed), "want a file holding a user seed"},
		{"creds=" + q(missing), "no such file"},
		{"creds=" + q(seedFile), "no user JWT"},
		{"creds=" + q(garbage), "creds"},
		{"creds=" + q(seedFile) + "&nkey=" + q(seedFile), "give one"},
		{"nkey=" + q(seedFile) + "&nkey=" + q(seedFile), "given 2 times"},
	} {
		spec := "nats://127.0.0.1:4222?" + tc.query
		s, err := Open(spec, Options{})
		if err == nil {
			t.Errorf("Open(%q) = %v, want an error", spec, s)
			continue
		}
		msg := err.Error()
		if code := baton.ErrorCode(err); code != baton.EINVALID || !strings.HasPrefix(msg, "--sink: ") {
			t.Errorf("Open(%q): %q (code %q), want an EINVALID naming --sink", spec, msg, code)
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("Open(%q): %q does not say %q", spec, msg, tc.want)
		}
		for _, secret := range []string{seed, seed[:10], string(aseed)} {
			if strings.Contains(msg, secret) {
				t.Errorf("Open(%q): %q shows a seed", spec, msg)
			}
		}
	}

	// The files are named, in a fixed order, and the secrets are not shown.
	spec := "nats://127.0.0.1:4222?nkey=" + q(seedFile) + "&tls_key=" + q(pki.clientKey) + "&tls_cert=" + q(pki.clientCert) + "&tls_ca=" + q(pki.ca) + "&stream=ORDERS"
	s, err := Open(spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "nats://127.0.0.1:4222?stream=ORDERS&tls_ca=" + pki.ca + "&tls_cert=" + pki.clientCert + "&tls_key=" + pki.clientKey + "&nkey=" + seedFile
	if got := s.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	s.(*NATS).Close()
}
