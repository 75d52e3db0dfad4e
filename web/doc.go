// Package web is baton's HTTP server: health and readiness probes, the
// Prometheus endpoint it is given, and a server-rendered dashboard of the
// schedule (jobs, runs, leases, outbox) with a few actions (trigger, pause,
// resume, retry or skip a dead event). Open pages reload themselves with a
// meta refresh, which the reader pauses with ?pause=1.
//
// # Security model
//
// The server is meant to be safe to leave running next to production jobs:
//
//   - It binds to loopback unless told otherwise, and the caller refuses a
//     non-loopback address without a token (see [Loopback]). Without a
//     token, only requests whose Host is a loopback name or address are
//     served, so a web page cannot reach the dashboard through DNS
//     rebinding.
//   - With a token, every request except /healthz, /readyz and /login needs
//     it: an API client sends "Authorization: Bearer TOKEN", a browser signs
//     in once through a form and then carries an HttpOnly, SameSite=Strict
//     session cookie. Tokens are compared in constant time. /readyz tells an
//     anonymous prober only ready or not and why in one word; the detail is
//     for authenticated callers and the log.
//   - Actions are POSTs. A browser's POST must come from the dashboard's own
//     origin (net/http's CrossOriginProtection: Sec-Fetch-Site, else Origin
//     against Host) and carry its session's CSRF token in a hidden field. A
//     POST authenticated by the Authorization header needs no CSRF token:
//     browsers never attach that header on their own.
//   - Read-only mode hides the action buttons and answers their POSTs 403.
//   - The http.Server has header, read, write and idle timeouts and a 16 KiB
//     header limit (larger headers get 431); form bodies are limited too.
//     Every response carries a Content-Security-Policy without scripts or
//     framing, nosniff and no-referrer. Nothing is served from a directory.
//   - Error pages carry the error's message, never a stack trace, after
//     [Config.Redact] has removed secrets (the database password, the
//     token) from it.
//
// The dashboard works without JavaScript: it has none. Pages render from
// html/template with the CSS inline (allowed by its hash in the policy).
package web
