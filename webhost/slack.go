package webhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentsurface/agentsurface/surface"
)

// SlackWebhook returns a [NotifyFunc] that posts every confirmation
// request to an incoming webhook that takes Slack's message JSON (Slack;
// Mattermost and Rocket.Chat take it too): {"text": …, "blocks": […]},
// saying who asks, for what (the capability and the request's summary),
// until when, with a button that opens the approve link. The person
// decides on the approve page, never in the chat: the message approves
// nothing by itself, and the exact input is on the page only (a chat
// keeps messages: the summary is all it gets).
//
// The link must be absolute: set Options.PublicURL. A request decided
// before the post is not posted. client nil means http.DefaultClient;
// give one with a timeout shorter than the notifier's, and mind that the
// webhook's URL is a secret. A status other than 2xx is an error.
//
// Text from the request (the summary, the consumer's name) is escaped
// for Slack's mrkdwn, so that an agent cannot put a link of its own, a
// mention or formatting into the message.
func SlackWebhook(webhookURL string, client *http.Client) NotifyFunc {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, s *Session, p surface.PendingConfirmation, approveURL string) error {
		if approveURL == "" {
			return nil // decided already
		}
		if u, err := url.Parse(approveURL); err != nil || !u.IsAbs() {
			return errors.New("webhost: SlackWebhook needs an absolute approve link: set Options.PublicURL")
		}
		body, err := json.Marshal(slackMessage(p, approveURL))
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhookURL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("webhost: SlackWebhook: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // the webhook's URL is a secret: keep it out of the log
			}
			return fmt.Errorf("webhost: SlackWebhook: %w", err)
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		if res.StatusCode/100 != 2 {
			return fmt.Errorf("webhost: SlackWebhook: the webhook answered %s", res.Status)
		}
		return nil
	}
}

// slackText is a text object of a Slack block.
type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// slackBlock is a section or actions block.
type slackBlock struct {
	Type     string         `json:"type"`
	Text     *slackText     `json:"text,omitempty"`
	Elements []slackElement `json:"elements,omitempty"`
}

// slackElement is a link button.
type slackElement struct {
	Type  string    `json:"type"`
	Text  slackText `json:"text"`
	URL   string    `json:"url"`
	Style string    `json:"style,omitempty"`
}

// slackMessage is the message that tells of p, with its link. What the
// agent wrote (the summary) goes in a code block, where Slack neither
// formats, links nor mentions; the ids in inline code.
func slackMessage(p surface.PendingConfirmation, link string) any {
	expires := p.ExpiresAt.UTC().Format("15:04:05") + " UTC"
	who, what, summary := mrkdwn(p.ConsumerKey), mrkdwn(p.CapabilityID), mrkdwn(p.Summary)
	return struct {
		Text   string       `json:"text"`
		Blocks []slackBlock `json:"blocks"`
	}{
		Text: "`" + who + "` asks for your approval to run `" + what + "`, until " + expires + ": <" + link + "|open the approve page>",
		Blocks: []slackBlock{
			{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*An agent asks for your approval*\n`" + who + "` wants to run `" + what +
				"`:\n```" + summary + "```\nThe request expires at " + expires + "."}},
			{Type: "actions", Elements: []slackElement{{Type: "button", Text: slackText{Type: "plain_text", Text: "Review and decide"}, URL: link, Style: "primary"}}},
		},
	}
}

// mrkdwn escapes text for Slack's mrkdwn: &, < and >, which would make
// links, mentions and commands, and the backtick, which would end a code
// span.
func mrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "`", "'").Replace(s)
}
