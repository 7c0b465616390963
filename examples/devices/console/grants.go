package console

// Standing grants in the page: the approval card's "approve, and allow
// this for N minutes for these devices" (the offer webhost derives from
// the pending request, so that the card and the approve page offer, and
// make, the same grant), and the Grants card, which lists the session's
// active grants with a Revoke button each, live.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// grantOfferCard is the grant an approval card offers with an approval.
type grantOfferCard struct {
	Minutes []int
	// MaxUses is the most calls the grant lets through; 0 for no cap.
	MaxUses  int
	Consumer string
	// Terms are its constraints in plain words, devices by name.
	Terms []string
}

// offerCard is the approval card's rendering of webhost's offer, or nil.
func (s *Session) offerCard(o *webhost.GrantOffer) *grantOfferCard {
	if o == nil {
		return nil
	}
	return &grantOfferCard{Minutes: o.Minutes, MaxUses: o.MaxUses, Consumer: consumerWords(o.Consumer), Terms: s.terms(o.Constraints)}
}

// grantRow is one active grant on the Grants card.
type grantRow struct {
	ID, What, Capability, Consumer string
	Terms                          []string
	// Uses says how many calls it may still let through.
	Uses string
	// ExpiresAt is when it ends, unless used up or revoked first (the
	// card then drops it).
	ExpiresAt time.Time
}

// grantRows are the session's active grants, oldest first.
func (s *Session) grantRows() []grantRow {
	var out []grantRow
	for _, g := range s.Registry().Grants().List() {
		r := grantRow{ID: g.GrantID, What: capabilityWords(g.CapabilityID), Capability: g.CapabilityID,
			Consumer: consumerWords(g.ConsumerKey), Terms: s.terms(g.Constraints), ExpiresAt: g.ExpiresAt}
		if g.InstanceID != "" && g.InstanceID != "main" {
			r.Capability += " @" + g.InstanceID
		}
		switch {
		case g.MaxUses == 0:
			r.Uses = "any number of calls"
		case g.MaxUses-g.Uses == 1:
			r.Uses = "1 call left of " + strconv.Itoa(g.MaxUses)
		default:
			r.Uses = fmt.Sprintf("%d calls left of %d", g.MaxUses-g.Uses, g.MaxUses)
		}
		out = append(out, r)
	}
	return out
}

// capabilityWords names what a capability does, for a person.
func capabilityWords(id string) string {
	switch id {
	case "domain:devices.disable":
		return "Disable devices"
	case "domain:devices.enable":
		return "Enable devices"
	}
	return id
}

// consumerWords names a consumer, for a person, with its key.
func consumerWords(key string) string {
	switch key {
	case MCPConsumer.Key():
		return "the MCP agent (" + key + ")"
	case ConsoleConsumer.Key():
		return "the page's agent (" + key + ")"
	case WebMCPConsumer.Key():
		return "the browser's agent (" + key + ")"
	case surface.AllConsumers:
		return "every agent of this session"
	}
	return key
}

// terms says constraints in plain words: the devices by name.
func (s *Session) terms(cs []surface.Constraint) []string {
	var out []string
	for _, c := range cs {
		out = append(out, s.term(c))
	}
	return out
}

// term says one constraint in plain words.
func (s *Session) term(c surface.Constraint) string {
	field := c.Path
	if field == "" {
		field = "the input"
	}
	switch c.Kind {
	case surface.ConstraintKeys:
		if len(c.Keys) == 0 {
			return "no input at all"
		}
		return "nothing set but " + strings.Join(c.Keys, ", ")
	case surface.ConstraintIn:
		vals := make([]string, 0, len(c.Values))
		for _, v := range c.Values {
			var str string
			if c.Path == "ids" && json.Unmarshal([]byte(v), &str) == nil {
				vals = append(vals, s.nameOf(str)+" ("+str+")")
				continue
			}
			vals = append(vals, string(v))
		}
		if c.Path == "ids" {
			return "only these devices, or some of them: " + strings.Join(vals, ", ")
		}
		if len(vals) == 1 {
			return field + " exactly " + vals[0]
		}
		return field + " one of " + strings.Join(vals, ", ")
	case surface.ConstraintRange:
		return fmt.Sprintf("%s from %v to %v", field, deref(c.Min), deref(c.Max))
	case surface.ConstraintPrefix:
		return fmt.Sprintf("%s starting with %q", field, c.Prefix)
	}
	return string(c.Kind) + " " + field
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// revokeGrant ends the session's active grant id on behalf of the
// page's user. It reports false for a grant that is not an active one of
// this session (unknown, another session's, ended already).
func (s *Session) revokeGrant(ctx context.Context, id string) bool {
	return s.Registry().Grants().Revoke(ctx, id, actorName(s.User(), "browser"))
}

// Grants returns the session's active grants, oldest first.
func (s *Session) Grants() []surface.Grant { return s.Registry().Grants().List() }

// grantsChanged follows the registry's grants: the Grants card shows
// them.
func (s *Session) grantsChanged([]surface.Grant) { s.changed(partGrants) }
