// Package httpexec is a [surface.ProcedureExecutor] that performs domain
// procedures by calling a backend over HTTP and JSON.
//
// The registry decides what an agent may call, validates the effective
// input and gathers confirmation evidence; the backend is the domain
// service that does the work and, as the only authority, re-checks the
// caller's permission on every call. An [Executor] is the thin, honest
// pipe between the two: it forwards the call with the user's own
// credentials, and maps the backend's answer onto the registry's error
// model without ever letting the backend's text reach the agent.
//
//	exec, err := httpexec.New(&httpexec.Options{
//		BaseURL: "https://api.internal/rpc",
//		Paths:   []string{"devices.list", "devices.disable"},
//		Logger:  logger,
//	})
//	if err != nil { // a bad BaseURL or manifest
//		return err
//	}
//	defer exec.CloseIdleConnections()
//	reg.SetProcedureExecutor(exec)
//
// Paths is the manifest: the registry accepts procedure references only
// for these paths, and [Executor.Execute] refuses any other path without
// sending a request, so a reference can never reach more of the backend
// than the manifest lists.
//
// # Wire protocol
//
// This section is for backend authors. Each call is one request:
//
//	POST {BaseURL}/{path}
//	Content-Type: application/json
//	Accept: application/json
//	Idempotency-Key: <invocation id>
//	X-Agent-Consumer: <consumer key, e.g. "mcp-bridge:session-7">
//	X-Confirmation-Id: <confirmation id>                 (only with evidence)
//	X-Confirmation-Approved-At: <RFC 3339 UTC timestamp> (only with evidence)
//	<credential headers, e.g. Authorization: Bearer …>
//
//	<the effective input: a JSON object>
//
// The path is appended to BaseURL as is, each "/"-separated segment
// path-escaped ("devices.disable" → https://api.internal/rpc/devices.disable).
// The body is the effective input: the agent's input merged with the
// values bound from the live UI and validated against the procedure's
// full input schema. It is still untrusted: validate it again.
//
// Idempotency-Key lets the backend deduplicate a retried call; the same
// key with the same consumer is the same logical call. Go's HTTP transport
// treats a request with this header as idempotent: it may send it again
// when a reused keep-alive connection breaks before any answer.
//
// The confirmation headers say that the user approved this exact call in
// the application's UI, and when. They are information for the backend's
// audit and UX, never authority: the backend must authorize the request
// from its credentials as it would any other, and must not skip its own
// approval rules because the headers are present. The credential headers
// come from [Options.Credentials]; by default the host context's
// "authorization" string is sent as the Authorization header, so the
// backend sees the user's own session, not a privileged service account.
//
// The backend answers with a status and, optionally, a JSON body:
//
//	200, 201       the body is the output: JSON of at most MaxResponseBytes
//	               (an empty body is null)
//	204            the output is null
//	401, 403       NOT_AUTHORIZED, details {"origin":"server"}
//	400, 422       INVALID_INPUT, one fixed issue at the root
//	404            an error: the manifest lists a path the backend does not serve
//	408, 429, 5xx  a transient error (EXECUTION_FAILED, retry after a delay)
//	other          an error (EXECUTION_FAILED, no retry); 3xx included, as
//	               the default client follows no redirects
//
// The backend demands the user's approval with a 428, or with any 4xx
// whose body is one of
//
//	{"code":"APPROVAL_REQUIRED", "approvalId":"apr_123"}
//	{"data":{"approvalRequired":true, "approvalId":"apr_123"}}
//
// (approvalId is optional, at the top level or in data). Any 4xx whose
// body has a "code" or "status" of "UNAUTHORIZED", "FORBIDDEN", 401 or 403
// (e.g. {"code":"FORBIDDEN","message":"…"} with a 409) is NOT_AUTHORIZED
// with details {"origin":"server"}, as a 401 or 403 is: the domain service
// refused this caller, whatever the status it chose. The demand wins
// over the plain meaning of the 4xx status and becomes
// CONFIRMATION_REQUIRED with details {"origin":"server"}, plus
// "confirmationId" set to the approval id when there is one. The approval
// id is the only text of a response that can reach the agent, and only
// when it is 1 to 128 characters of A–Z, a–z, 0–9 and "._:~-"; otherwise
// it is dropped (and logged). A 2xx or 5xx body is never read as a demand.
//
// # Errors
//
// [Executor.Execute] returns a *[surface.Error] for the mapped statuses
// above; its message and details are fixed, never built from the response.
// Every other failure is an ordinary error, which the registry turns into
// EXECUTION_FAILED (reason "transport"); it is wrapped with
// [surface.Transient] for 408, 429 and 5xx responses, an expired context
// deadline, and network failures (connection refused or reset, DNS
// errors, timeouts). Errors carry the path and status, never the response
// body: test them with errors.Is and errors.As against [ErrUnknownPath],
// [ErrPathNotServed], [ErrResponseTooLarge], [ErrNotJSON] and
// [*StatusError].
//
// The causes — status, an excerpt of the body, network errors — go to
// [Options.Logger], which only the operator reads.
//
// # Concurrency and lifetime
//
// An Executor is immutable after [New] and safe for concurrent use. Each
// call is bounded by its context: cancellation and the deadline the
// registry sets (Limits.ProcedureTimeout) abort the request, including
// reading the body. The default client opens connections of its own;
// [Executor.CloseIdleConnections] releases them when the executor is no
// longer needed.
package httpexec
