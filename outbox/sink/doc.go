// Package sink holds the sinks that baton's outbox relay delivers events
// to, and Open, which makes one from the --sink value of baton relay:
//
//	http://HOST[:PORT]/PATH, https://…                        Webhook
//	nats://HOST[:PORT][,…][?subject_prefix=P.&stream=NAME]    NATS (JetStream);
//	    &tls=true&tls_ca=FILE&tls_cert=FILE&tls_key=FILE        with TLS,
//	    &creds=FILE or &nkey=FILE                             a creds file or an NKey seed
//	exec:COMMAND [ARG…]                                       Exec
//	noop:[?fail=N]                                            Noop
//
// Every sink answers a delivery in one of three ways, which the relay acts
// on: nil (the receiver has the event, perhaps again: delivery is at least
// once, and receivers deduplicate by the event's key), an error wrapped by
// outbox.Permanent (retrying cannot help: the event is made dead at once),
// or any other error (retried with backoff). When in doubt a sink says
// "retry": a timeout does not mean the receiver lacks the event, and the
// key makes the second delivery harmless.
//
//	               webhook                      NATS                        exec
//	delivered      2xx                          stream ack (or duplicate)   exit 0
//	permanent      4xx but 408, 409, 429        over the server's           exit 65 (EX_DATAERR)
//	                                            max_payload
//	retried        3xx (not followed), 5xx,     no stream for the subject,  any other exit,
//	               408, 409, 429, network       not connected, ack error,   a signal, the timeout
//	               error, the timeout           the timeout
//
// A webhook and an exec command receive the event's envelope, JSON with
// the fields id, topic, key, ordering_key, payload, headers, created_at and
// attempt (outbox.Event decodes it). NATS subscribers receive the payload
// alone, with the rest in headers. Webhook requests may be signed with
// HMAC-SHA256 (Sign, VerifySignature). docs/SINKS.md describes each sink
// for operators.
//
// Every delivery is bounded by Options.Timeout. Nothing a sink shows (its
// String, its errors) holds a password, a NATS token, a webhook URL's query
// values or an exec command's arguments.
package sink
