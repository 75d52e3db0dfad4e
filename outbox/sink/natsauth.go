package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton"
)

// The NATS sink's security parameters, in the order they are shown.
//
//	tls=true          require TLS (implied by tls_ca, tls_cert and tls_key)
//	tls_ca=FILE       trust the CAs in FILE (PEM) instead of the system's
//	tls_cert=FILE     present this client certificate (PEM), with
//	tls_key=FILE      its private key (PEM)
//	creds=FILE        a credentials file: a user JWT and its NKey seed
//	nkey=FILE         a file holding an NKey user seed (SU…)
//
// The values are file names, not secrets, so they are shown; the files are
// read when the sink is made, to report a bad one at once, and again at
// each connection, so that rotated certificates and credentials are picked
// up on reconnect. The client's own library holds seeds no longer than a
// signature needs.
var natsAuthParams = []string{"tls", "tls_ca", "tls_cert", "tls_key", "creds", "nkey"}

func natsAuthParam(k string) bool {
	for _, p := range natsAuthParams {
		if k == p {
			return true
		}
	}
	return false
}

// natsAuth checks the security parameters of q and returns the client
// options they make and the parameters to show. shown names the sink in
// errors.
func natsAuth(shown string, q url.Values) ([]nats.Option, []string, error) {
	bad := func(format string, args ...any) error {
		return baton.Invalid("--sink", "%q: "+format, append([]any{shown}, args...)...)
	}
	v := map[string]string{}
	var params []string
	for _, k := range natsAuthParams {
		if vs, ok := q[k]; ok {
			if vs[0] == "" {
				want := "a file name"
				if k == "tls" {
					want = "true or false"
				}
				return nil, nil, bad("%s is empty: want %s", k, want)
			}
			v[k] = vs[0]
			params = append(params, k+"="+vs[0])
		}
	}

	var opts []nats.Option
	wantTLS := v["tls_ca"] != "" || v["tls_cert"] != "" || v["tls_key"] != ""
	if s, ok := v["tls"]; ok {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return nil, nil, bad("tls %q: want true or false", s)
		}
		if !on && wantTLS {
			return nil, nil, bad("tls=false with tls_ca, tls_cert or tls_key: these need TLS")
		}
		wantTLS = wantTLS || on
	}
	if wantTLS {
		// Verified against the system's CAs unless tls_ca is given; never
		// skipped. A server that offers no TLS is refused.
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if f := v["tls_ca"]; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, bad("tls_ca %q: %v", f, pathError(err))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, nil, bad("tls_ca %q: holds no PEM certificate", f)
		}
		opts = append(opts, nats.RootCAs(f))
	}
	cert, key := v["tls_cert"], v["tls_key"]
	switch {
	case cert != "" && key == "":
		return nil, nil, bad("tls_cert without tls_key: give both, or neither")
	case key != "" && cert == "":
		return nil, nil, bad("tls_key without tls_cert: give both, or neither")
	case cert != "":
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			return nil, nil, bad("tls_cert %q, tls_key %q: %v", cert, key, pathError(err))
		}
		opts = append(opts, nats.ClientCert(cert, key))
	}

	creds, nkey := v["creds"], v["nkey"]
	switch {
	case creds != "" && nkey != "":
		return nil, nil, bad("creds and nkey: give one (a creds file holds its own NKey seed)")
	case creds != "":
		if _, err := os.Stat(creds); err != nil {
			return nil, nil, bad("creds %q: %v", creds, pathError(err))
		}
		o := nats.UserCredentials(creds)
		// Try it as the client will: the JWT, then a signature by the seed.
		var check nats.Options
		if err := o(&check); err != nil {
			return nil, nil, bad("creds %q: %v", creds, pathError(err))
		}
		if j, err := check.UserJWT(); err != nil {
			return nil, nil, bad("creds %q: no user JWT in it: %v", creds, pathError(err))
		} else if !looksLikeJWT(j) {
			// Without the "BEGIN NATS USER JWT" lines the client takes the
			// whole file for the JWT; the server checks the rest.
			return nil, nil, bad("creds %q: no user JWT in it (want the file nsc or the account's operator made: a user JWT, then its NKey seed)", creds)
		}
		if _, err := check.SignatureCB([]byte("baton")); err != nil {
			return nil, nil, bad("creds %q: no NKey seed in it: %v", creds, pathError(err))
		}
		opts = append(opts, o)
	case nkey != "":
		if _, err := os.Stat(nkey); err != nil {
			return nil, nil, bad("nkey %q: %v", nkey, pathError(err))
		}
		o, err := nats.NkeyOptionFromSeed(nkey)
		if err != nil {
			return nil, nil, bad("nkey %q: want a file holding a user seed (SU…): %v", nkey, pathError(err))
		}
		opts = append(opts, o)
	}
	return opts, params, nil
}

// looksLikeJWT reports whether s has a JWT's shape: three base64url parts
// joined by dots (the signature's may not be empty).
func looksLikeJWT(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// pathError drops the file name from err when err repeats it: the caller
// names the file and its parameter already.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// connectHint says in words what a failed connection most likely needs,
// or "" when the error says it well enough. clientCert tells whether the
// sink presented a client certificate.
func connectHint(err error, clientCert bool) string {
	var unknownCA x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA):
		return "the server's certificate is not signed by a CA the sink trusts (tls_ca=FILE names the CA to trust): "
	case errors.As(err, &wrongHost):
		return "the server's certificate is not for the host connected to: "
	case errors.As(err, &invalid):
		return "the server's certificate is not valid: "
	case errors.Is(err, nats.ErrSecureConnWanted):
		return "the sink requires TLS and the server offers none: "
	case errors.Is(err, nats.ErrSecureConnRequired):
		return "the server requires TLS (tls=true, or tls_ca=FILE): "
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired):
		return "the server refused the credentials (user and password, token, creds or nkey): "
	case strings.Contains(msg, "certificate required"):
		return "the server requires a client certificate (tls_cert=FILE&tls_key=FILE): "
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		return "the server refused the client certificate: "
	case errors.Is(err, nats.ErrTLS) && !clientCert:
		// With TLS 1.3 a server that wants a client certificate may close
		// the connection before its alert is read.
		return "the server ended the TLS connection; does it require a client certificate (tls_cert=FILE&tls_key=FILE)? "
	case errors.Is(err, nats.ErrTLS):
		return "the server ended the TLS connection; did it refuse the client certificate? "
	}
	return ""
}
