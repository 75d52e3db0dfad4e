package sink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/outbox"
)

// The Standard Webhooks specification's published test vector.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// standardVerify is a receiver's check written from the Standard Webhooks
// specification alone, without baton's code: the key is the base64 after
// "whsec_", the signed content "<id>.<timestamp>.<body>", the header a
// space-separated list of "<version>,<base64>", of which one v1 must match.
func standardVerify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	if d := now.Unix() - sec; d > 300 || d < -300 {
		return errors.New("timestamp out of tolerance")
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.%s", id, ts, body)
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Split(sigs, " ") {
		if v, sig, ok := strings.Cut(s, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

func vectorHeader() http.Header {
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", strconv.Itoa(vectorTimestamp))
	h.Set("webhook-signature", vectorSignature)
	return h
}

func TestStandardWebhooksTestVector(t *testing.T) {
	t.Parallel()
	at := time.Unix(vectorTimestamp, 0)
	// The test's own verifier agrees with the specification's vector, so
	// that it is a check of baton's signing, not a copy of it.
	if err := standardVerify(vectorSecret, vectorHeader(), []byte(vectorBody), at); err != nil {
		t.Fatalf("the independent verifier refuses the spec's vector: %v", err)
	}
	key, err := SigningKey([]byte(vectorSecret))
	if err != nil {
		t.Fatal(err)
	}
	if got := SignWebhook(key, vectorID, at, []byte(vectorBody)); got != vectorSignature {
		t.Errorf("SignWebhook = %s, want the spec's %s", got, vectorSignature)
	}
	if err := VerifySignature([]byte(vectorSecret), vectorHeader(), []byte(vectorBody), at.Add(time.Minute), 0); err != nil {
		t.Errorf("VerifySignature refuses the spec's vector: %v", err)
	}
	// Rotation: several signatures, separated by spaces; other versions ignored.
	h := vectorHeader()
	h.Set("webhook-signature", "v1a,abc v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" "+vectorSignature)
	if err := VerifySignature([]byte(vectorSecret), h, []byte(vectorBody), at, 0); err != nil {
		t.Errorf("a rotation header: %v", err)
	}
	for name, mod := range map[string]func(http.Header){
		"no id":           func(h http.Header) { h.Del("webhook-id") },
		"no timestamp":    func(h http.Header) { h.Del("webhook-timestamp") },
		"bad timestamp":   func(h http.Header) { h.Set("webhook-timestamp", "soon") },
		"no signature":    func(h http.Header) { h.Del("webhook-signature") },
		"no v1":           func(h http.Header) { h.Set("webhook-signature", "v2,"+vectorSignature[3:]) },
		"not base64":      func(h http.Header) { h.Set("webhook-signature", "v1,!!") },
		"not version,sig": func(h http.Header) { h.Set("webhook-signature", "garbage") },
	} {
		h := vectorHeader()
		mod(h)
		if err := VerifySignature([]byte(vectorSecret), h, []byte(vectorBody), at, 0); !errors.Is(err, ErrSignatureMalformed) {
			t.Errorf("%s: %v, want ErrSignatureMalformed", name, err)
		}
	}
	h = vectorHeader()
	h.Set("webhook-id", "msg_other")
	if err := VerifySignature([]byte(vectorSecret), h, []byte(vectorBody), at, 0); !errors.Is(err, ErrSignatureMismatch) {
		t.Errorf("another id: %v, want ErrSignatureMismatch", err)
	}
	if err := VerifySignature([]byte(vectorSecret), vectorHeader(), []byte(vectorBody), at.Add(time.Hour), 0); !errors.Is(err, ErrSignatureStale) {
		t.Errorf("an hour later: %v, want ErrSignatureStale", err)
	}
	if _, err := SigningKey([]byte("whsec_not*base64")); err == nil {
		t.Error("a whsec_ secret that is not base64 is taken")
	}
}

// The relay's requests verify with a receiver written from the
// specification, for a whsec_ secret and for a plain one (whose key, for a
// library that wants whsec_, is the base64 of its bytes).
func TestWebhookSignsPerStandardWebhooks(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{vectorSecret, "plain secret"} {
		libSecret := secret
		if !strings.HasPrefix(secret, "whsec_") {
			libSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte(secret))
		}
		verdict := make(chan error, 1)
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			err := standardVerify(libSecret, r.Header, body, time.Now())
			verdict <- err
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
			}
		})
		if err := openWebhook(t, srv.URL, Options{Secret: []byte(secret)}).Deliver(context.Background(), testEvent()); err != nil {
			t.Errorf("secret %q: %v", secret, err)
		}
		if err := <-verdict; err != nil {
			t.Errorf("secret %q: the receiver refuses: %v", secret, err)
		}
	}
	if _, err := Open("http://127.0.0.1:1/", Options{Secret: []byte("whsec_%%")}); err == nil || !strings.Contains(err.Error(), "--secret-file") {
		t.Errorf("a bad whsec_ secret: %v, want an error naming --secret-file", err)
	}
}

func TestWebhookIdempotencyKeyFormat(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Idempotency-Key") })
	e := testEvent()
	for format, want := range map[string]string{"": `"order-7/created"`, KeyQuoted: `"order-7/created"`, KeyBare: "order-7/created"} {
		if err := openWebhook(t, srv.URL, Options{Webhook: WebhookOptions{IdempotencyKeyFormat: format}}).Deliver(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		if h := <-got; h != want {
			t.Errorf("format %q: Idempotency-Key %s, want %s", format, h, want)
		}
	}
	// A key that cannot be sent quoted is not sent bare either.
	e.Key = "a\r\nX-Injected: 1"
	if err := openWebhook(t, srv.URL, Options{Webhook: WebhookOptions{IdempotencyKeyFormat: KeyBare}}).Deliver(context.Background(), e); outcomeOf(err) != dead {
		t.Errorf("a key with CRLF, bare: %v, want dead", err)
	}
	if _, err := Open(srv.URL, Options{Webhook: WebhookOptions{IdempotencyKeyFormat: "raw"}}); err == nil || !strings.Contains(err.Error(), "--idempotency-key-format") {
		t.Errorf("format raw: %v, want an error naming --idempotency-key-format", err)
	}
}

// A 429 or 503 with a Retry-After that fits the claim is waited for and
// asked again within one delivery; one that does not fit gives the event
// back with the wait, and only one request is sent.
func TestWebhookObeysRetryAfter(t *testing.T) {
	t.Parallel()
	t.Run("fits", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var at []time.Time
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			n := len(at)
			mu.Unlock()
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := openWebhook(t, srv.URL, Options{Timeout: 10 * time.Second}).Deliver(ctx, testEvent()); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(at) != 2 {
			t.Fatalf("%d requests, want 2", len(at))
		}
		if gap := at[1].Sub(at[0]); gap < time.Second {
			t.Errorf("asked again after %s, before Retry-After's 1s", gap)
		}
	})
	for name, ra := range map[string]func() string{
		"seconds": func() string { return "120" },
		"date":    func() string { return time.Now().Add(120 * time.Second).UTC().Format(http.TimeFormat) },
	} {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			t.Run(fmt.Sprintf("%s/%d does not fit", name, status), func(t *testing.T) {
				t.Parallel()
				n := 0
				var mu sync.Mutex
				srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					n++
					mu.Unlock()
					w.Header().Set("Retry-After", ra())
					w.WriteHeader(status)
				})
				// The relay's delivery deadline: half a 30s claim.
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				err := openWebhook(t, srv.URL, Options{Timeout: 5 * time.Second}).Deliver(ctx, testEvent())
				d, ok := outbox.RetryAfterOf(err)
				if !ok || outcomeOf(err) != retried {
					t.Fatalf("Deliver = %v, want a retry with the receiver's wait", err)
				}
				if d < 100*time.Second || d > 120*time.Second {
					t.Errorf("wait %s, want about 120s", d)
				}
				if ctx.Err() != nil {
					t.Errorf("Deliver waited out the claim's deadline")
				}
				mu.Lock()
				defer mu.Unlock()
				if n != 1 {
					t.Errorf("%d requests, want 1", n)
				}
			})
		}
	}
	t.Run("not on 500", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusInternalServerError)
		})
		err := openWebhook(t, srv.URL, Options{}).Deliver(context.Background(), testEvent())
		if _, ok := outbox.RetryAfterOf(err); ok || outcomeOf(err) != retried {
			t.Errorf("500 with Retry-After: %v, want a plain retry", err)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, " 30 ": 30 * time.Second, "99999999": 24 * time.Hour,
		"Wed, 02 Dec 2026 08:01:00 GMT": time.Minute, "Wed, 02 Dec 2026 07:00:00 GMT": 0,
	} {
		if d, ok := parseRetryAfter(v, now); !ok || d != want {
			t.Errorf("%q: %s %v, want %s", v, d, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon", "1.5"} {
		if d, ok := parseRetryAfter(v, now); ok {
			t.Errorf("%q: taken as %s", v, d)
		}
	}
}

// pki is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type pki struct {
	dir                                string
	ca                                 *x509.CertPool
	caFile, certFile, keyFile, otherCA string
	server                             tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: x509.NewCertPool()}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(p.dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	makeCert := func(tmpl *x509.Certificate, parent *x509.Certificate, key *ecdsa.PrivateKey, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, der
	}
	caKey := newKey()
	ca, caDER := makeCert(&x509.Certificate{Subject: pkix.Name{CommonName: "baton test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, caKey, caKey)
	p.ca.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	otherKey := newKey()
	_, otherDER := makeCert(&x509.Certificate{Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, otherKey, otherKey)
	p.otherCA = write("other-ca.pem", "CERTIFICATE", otherDER)

	srvKey := newKey()
	_, srvDER := makeCert(&x509.Certificate{Subject: pkix.Name{CommonName: "receiver"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, srvKey, caKey)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}

	cliKey := newKey()
	_, cliDER := makeCert(&x509.Certificate{Subject: pkix.Name{CommonName: "baton-relay"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, cliKey, caKey)
	p.certFile = write("client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.keyFile = write("client-key.pem", "PRIVATE KEY", keyDER)
	return p
}

// A TLS receiver on 127.0.0.1 that requires a client certificate signed by
// its CA: the sink trusts the custom CA and presents its certificate.
func TestWebhookMutualTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	clients := make(chan string, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clients <- r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.ca}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	mtls := WebhookOptions{CAFile: p.caFile, CertFile: p.certFile, KeyFile: p.keyFile}
	if err := openWebhook(t, srv.URL+"/hook", Options{Webhook: mtls}).Deliver(context.Background(), testEvent()); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if cn := <-clients; cn != "baton-relay" {
		t.Errorf("the receiver saw client %q", cn)
	}
	// Without the client certificate the receiver refuses the handshake;
	// without the CA the sink refuses the receiver. Both are retried.
	for name, o := range map[string]WebhookOptions{
		"no client certificate": {CAFile: p.caFile},
		"system CAs":            {CertFile: p.certFile, KeyFile: p.keyFile},
		"another CA":            {CAFile: p.otherCA, CertFile: p.certFile, KeyFile: p.keyFile},
	} {
		err := openWebhook(t, srv.URL+"/hook", Options{Webhook: o}).Deliver(context.Background(), testEvent())
		if outcomeOf(err) != retried {
			t.Errorf("%s: %v, want a retried error", name, err)
		}
	}
	if len(clients) != 0 {
		t.Errorf("%d requests reached the handler without a valid certificate", len(clients))
	}
	// Bad files are usage errors naming the flag.
	for flag, o := range map[string]WebhookOptions{
		"--sink-ca-file":   {CAFile: filepath.Join(p.dir, "missing.pem")},
		"--sink-key-file":  {CertFile: p.certFile},
		"--sink-cert-file": {CertFile: p.keyFile, KeyFile: p.keyFile},
	} {
		if _, err := Open(srv.URL, Options{Webhook: o}); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: %v, want an error naming %s", o, err, flag)
		}
	}
	if _, err := Open(srv.URL, Options{Webhook: WebhookOptions{CAFile: p.keyFile}}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file with no certificate: %v", err)
	}
}

// The shell check of webhook-signature in docs/SINKS.md, run as it is
// written there, accepts what the sink signs and refuses a wrong secret.
func TestWebhookSignatureShellCheckInDocs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl here:", err)
	}
	doc, err := os.ReadFile("../../docs/SINKS.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```sh\n# verify a webhook-signature\n"
	_, script, ok := strings.Cut(string(doc), open)
	script, _, ok2 := strings.Cut(script, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/SINKS.md has no block starting %q", open)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(testBody), 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := SigningKey([]byte(vectorSecret))
	now := time.Now()
	sig := "v1,bm90IHRoaXMgb25lIGJ1dCBhIHJvdGF0ZWQgc2VjcmV0Lg== " + SignWebhook(key, "order-7/created", now, []byte(testBody))
	for _, tc := range []struct {
		secret, want string
	}{{vectorSecret, "valid\n"}, {"whsec_" + base64.StdEncoding.EncodeToString([]byte("another")), ""}} {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET="+tc.secret, "id=order-7/created", "ts="+strconv.FormatInt(now.Unix(), 10), "sig="+sig)
		out, _ := cmd.CombinedOutput()
		if string(out) != tc.want {
			t.Errorf("secret %q: the check says %q, want %q", tc.secret, out, tc.want)
		}
	}
}
