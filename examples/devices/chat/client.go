package chat

// A small client of the chat-completions API: the one request the loop
// makes, over net/http and encoding/json. It speaks the wire format that
// OpenAI documents and that OpenAI-compatible servers (Ollama, vLLM,
// llama.cpp, LiteLLM) accept.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// message is one message of a conversation, in either direction.
type message struct {
	Role string `json:"role"`
	// Content is the text; an assistant message that only calls tools
	// may have none (null on the wire).
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

func textMessage(role, text string) message { return message{Role: role, Content: &text} }

// text is the message's content, "" when it has none.
func (m message) text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object encoded as a string, as the model wrote it.
	Arguments string `json:"arguments"`
}

type toolParam struct {
	Type     string        `json:"type"` // "function"
	Function functionParam `json:"function"`
}

type functionParam struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type completionRequest struct {
	Model    string      `json:"model"`
	Messages []message   `json:"messages"`
	Tools    []toolParam `json:"tools,omitempty"`
}

type completion struct {
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
}

// maxResponseBytes caps a model's answer: far above any chat completion.
const maxResponseBytes = 8 << 20

// APIError is a chat-completions request that the server answered with
// an error status.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the server's error message (error.message of the JSON
	// body), or the start of the body when it has none.
	Message string
}

func (e *APIError) Error() string {
	msg := http.StatusText(e.StatusCode)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return fmt.Sprintf("%d %s", e.StatusCode, msg)
}

// retryable reports whether a failed request may succeed if sent again:
// the statuses OpenAI's clients retry.
func (e *APIError) retryable() bool {
	switch e.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return e.StatusCode >= 500
}

// complete sends one chat-completions request. It retries once after a
// retryable status (see [APIError]) or a connection that failed before
// any answer, honouring a short Retry-After; each attempt is bounded by
// RequestTimeout.
func (l *Loop) complete(ctx context.Context, req completionRequest) (*completion, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	const attempts = 2
	for attempt := 1; ; attempt++ {
		out, wait, err := l.attempt(ctx, body)
		if err == nil || wait < 0 || attempt == attempts || ctx.Err() != nil {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// attempt sends the request once. wait is how long to wait before a
// retry, or negative when the failure is not worth one.
func (l *Loop) attempt(ctx context.Context, body []byte) (_ *completion, wait time.Duration, _ error) {
	ctx, cancel := context.WithTimeoutCause(ctx, l.requestTimeout(), errRequestTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint(), bytes.NewReader(body))
	if err != nil {
		return nil, -1, err
	}
	for k, vs := range l.Header {
		hr.Header[k] = append([]string(nil), vs...)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if l.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+l.apiKey)
	}
	resp, err := l.httpClient().Do(hr)
	if err != nil {
		if cause := context.Cause(ctx); cause == errRequestTimeout {
			return nil, -1, fmt.Errorf("%w (%s)", errRequestTimeout, l.requestTimeout())
		}
		if ctx.Err() != nil {
			return nil, -1, ctx.Err()
		}
		return nil, 500 * time.Millisecond, err // no answer: a restart, a reset connection
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if context.Cause(ctx) == errRequestTimeout {
			return nil, -1, fmt.Errorf("%w (%s)", errRequestTimeout, l.requestTimeout())
		}
		return nil, -1, fmt.Errorf("reading the answer: %w", err)
	}
	if len(raw) > maxResponseBytes {
		return nil, -1, fmt.Errorf("the answer is larger than %d bytes", maxResponseBytes)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &APIError{StatusCode: resp.StatusCode, Message: errorMessage(raw)}
		if !apiErr.retryable() {
			return nil, -1, apiErr
		}
		return nil, retryAfter(resp.Header, 500*time.Millisecond), apiErr
	}
	var out completion
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, -1, fmt.Errorf("the answer is not a chat completion: %w", err)
	}
	return &out, 0, nil
}

// errRequestTimeout is the cause of a model request that took longer
// than Loop.RequestTimeout.
var errRequestTimeout = errors.New("the model did not answer in time")

// errorMessage is the message of an error body: error.message of
// OpenAI's shape, else the body's first line, shortened.
func errorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if r := []rune(line); len(r) > 200 {
		line = string(r[:199]) + "…"
	}
	return line
}

// retryAfter is the server's Retry-After in seconds, if it asks for at
// most 10 s, else def.
func retryAfter(h http.Header, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 && s <= 10 {
		return time.Duration(s) * time.Second
	}
	return def
}

func (l *Loop) endpoint() string { return strings.TrimRight(l.baseURL, "/") + "/chat/completions" }

func (l *Loop) httpClient() *http.Client {
	if l.HTTPClient != nil {
		return l.HTTPClient
	}
	return http.DefaultClient
}

func (l *Loop) requestTimeout() time.Duration {
	if l.RequestTimeout > 0 {
		return l.RequestTimeout
	}
	return DefaultRequestTimeout
}
