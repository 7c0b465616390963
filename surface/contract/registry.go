package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentsurface/agentsurface/surface"
)

// ErrChanging reports a registry that changed every time its contract was
// being taken: the contract of a surface in motion would describe no
// surface at all.
var ErrChanging = errors.New("contract: the surface changed while its contract was taken")

// attempts is how many times FromRegistry tries to read one consumer's
// view at a single surface version.
const attempts = 5

// FromRegistry returns the contract of reg as each of consumers sees it
// (at least one; two consumers of one key are refused). It reads only
// the registry's public API: [surface.Registry.Explain] for every
// capability, hidden ones included, with its policies and their votes;
// [surface.Registry.Snapshot] for what the consumer is shown; and a
// toolset's catalog ([surface.NewToolset]) for the wire names. Like them
// it calls When predicates, Discover hooks and Describe notes, never a
// handler. Live state (availability, notes, the route, versions,
// registration ids) is left out.
//
// The registry must not change while the contract is taken; if it keeps
// changing, FromRegistry fails with [ErrChanging]. A closed registry or a
// consumer of unknown kind is an error.
func FromRegistry(reg *surface.Registry, consumers ...surface.Consumer) (*Contract, error) {
	if len(consumers) == 0 {
		return nil, errors.New("contract: FromRegistry needs at least one consumer")
	}
	c := &Contract{Format: Format, Version: Version, Source: SourceRegistry}
	for _, consumer := range consumers {
		if !consumer.Kind.Valid() {
			return nil, fmt.Errorf("contract: consumer %q has an unknown kind", consumer.Key())
		}
		v, err := viewOf(reg, consumer)
		if err != nil {
			return nil, err
		}
		c.Consumers = append(c.Consumers, v)
	}
	return c.normalized()
}

// Combine returns one contract holding the consumers of parts, which must
// share a source and name different consumers: the contract of an
// application whose registry is built per consumer.
func Combine(parts ...*Contract) (*Contract, error) {
	out := &Contract{Format: Format, Version: Version}
	for i, p := range parts {
		if i == 0 {
			out.Source = p.Source
		} else if p.Source != out.Source {
			return nil, fmt.Errorf("contract: cannot combine a %s contract with a %s one", out.Source, p.Source)
		}
		if p.Format != Format || p.Version != Version {
			return nil, fmt.Errorf("%w: format %q version %d", ErrFormat, p.Format, p.Version)
		}
		out.Consumers = append(out.Consumers, p.Consumers...)
	}
	if len(parts) == 0 {
		return nil, errors.New("contract: nothing to combine")
	}
	return out.normalized()
}

// viewOf reads one consumer's view, retrying while the surface changes
// between the three reads.
func viewOf(reg *surface.Registry, consumer surface.Consumer) (ConsumerView, error) {
	for range attempts {
		v, ok, err := tryViewOf(reg, consumer)
		if err != nil || ok {
			return v, err
		}
	}
	return ConsumerView{}, ErrChanging
}

// capKey identifies a capability in one registry at one version.
type capKey struct{ capabilityID, registrationID string }

// tryViewOf reads one consumer's view; ok is false when the surface
// version moved between the explanation, the snapshot and the catalog.
func tryViewOf(reg *surface.Registry, consumer surface.Consumer) (v ConsumerView, ok bool, err error) {
	opts := surface.SnapshotOptions{Consumer: consumer}
	ex := reg.Explain(opts)
	snap := reg.Snapshot(opts)
	if snap.Closed {
		return v, false, surface.ErrClosed
	}
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Consumer: consumer, Topology: surface.TopologyRemote})
	if err != nil {
		return v, false, err
	}
	cat := ts.Catalog()
	_ = ts.Close()
	if ex.SurfaceVersion != snap.SurfaceVersion || cat.SurfaceVersion() != snap.SurfaceVersion {
		return v, false, nil
	}

	norm := ex.Consumer // the explanation's consumer is normalized
	v = ConsumerView{Name: norm.Key(), Kind: norm.Kind, ID: norm.ID, Grants: slices.Clone(norm.Grants)}
	tools := map[capKey]surface.Tool{}
	for _, t := range cat.Tools() {
		tools[capKey{t.CapabilityID, t.RegistrationID}] = t
	}
	listed := map[capKey]*Capability{} // from the snapshot
	for _, comp := range snap.Components {
		var c Component
		if err := record(comp, &c); err != nil {
			return v, false, err
		}
		v.Components = append(v.Components, c)
		for _, o := range comp.Observations {
			if listed[capKey{o.CapabilityID, comp.RegistrationID}], err = recordCap(o); err != nil {
				return v, false, err
			}
		}
		for _, a := range comp.Actions {
			if listed[capKey{a.CapabilityID, comp.RegistrationID}], err = recordCap(a); err != nil {
				return v, false, err
			}
		}
	}
	for _, p := range snap.Procedures {
		if listed[capKey{p.ProcedureID, p.RegistrationID}], err = recordCap(p); err != nil {
			return v, false, err
		}
	}

	for _, ce := range ex.Capabilities {
		k := capKey{ce.CapabilityID, ce.RegistrationID}
		c, inSnapshot := listed[k]
		if inSnapshot {
			delete(listed, k)
		} else {
			c = &Capability{Description: ce.Description}
		}
		c.CapabilityID, c.Kind = ce.CapabilityID, ce.Kind
		c.Component = &surface.Parent{Type: ce.ComponentType, InstanceID: ce.InstanceID}
		c.Visibility, c.DisabledReason = visibilityOf(ce)
		for _, p := range ce.Policies {
			c.Policies = append(c.Policies, Policy{Name: p.Name, Layer: p.Layer, Hooks: slices.Clone(p.Hooks),
				Vote: p.Vote, Reason: p.Reason, RequiresConfirmation: p.RequiresConfirmation})
			if p.RequiresConfirmation && ce.Kind != surface.KindObservation {
				c.ConfirmationByPolicy = surface.ConfirmRequired
			}
		}
		if c.Visibility != Hidden {
			t, inCatalog := tools[k]
			switch {
			case !inSnapshot:
				return v, false, fmt.Errorf("contract: %s is visible but missing from the snapshot", ce.CapabilityID)
			case !inCatalog:
				return v, false, fmt.Errorf("contract: %s is visible but missing from the catalog", ce.CapabilityID)
			}
			// What the descriptor leaves implicit (an observation's
			// effect, idempotency and level, a procedure reference's
			// idempotency) is the tool's, as every adapter shows it.
			c.WireName = t.Name
			c.Declared.Set(factEffect, t.Effect)
			c.Declared.Set(factIdempotent, t.Idempotent)
			c.Declared.Set(factConfirmation, t.Confirmation)
			c.RequiresConfirmation = ptr(t.Confirmation == surface.ConfirmRequired)
			c.Annotations = annotationsOf(t)
			if g := ce.Grants; g != nil {
				c.StandingGrants = &GrantCeiling{MaxTTLMs: g.MaxTTL.Milliseconds(), MaxUses: g.MaxUses}
			}
		}
		v.Capabilities = append(v.Capabilities, *c)
	}
	if len(listed) > 0 {
		return v, false, errors.New("contract: the snapshot lists capabilities the explanation does not")
	}
	return v, true, nil
}

// visibilityOf is the contract's visibility of an explained capability:
// the registry's consumer view, less what is live state (whether the
// current state makes a capability available is not part of a
// contract).
func visibilityOf(ce surface.CapabilityExplanation) (Visibility, string) {
	switch ce.View {
	case surface.ViewHidden:
		return Hidden, ""
	case surface.ViewDisabled:
		return Disabled, ce.Reason
	}
	return Exposed, ""
}

// A contract records a snapshot descriptor field by field, under the
// descriptor's wire names: a component's into a [Component], a
// capability's into a [Capability] (a procedure reference's procedureId
// as its capabilityId). A descriptor field is recorded by the contract
// field of the same JSON name, and the contract leaves out the live
// ones ([live] lists them). TestDescriptorFields fails for a descriptor
// field that is neither recorded nor declared live, and checks that each
// recorded value arrives.

// live are the descriptor fields a contract leaves out, by JSON name:
// live state, which changes while the surface's declarations do not
// (availability and its reason, a procedure reference's contextual note,
// registration ids), and a capability's name, which its id holds.
var live = []string{"name", "available", "unavailableReason", "contextualNote", "registrationId"}

// recordCap records a capability's descriptor.
func recordCap(desc any) (*Capability, error) {
	c := &Capability{}
	return c, record(desc, c)
}

// record records the descriptor desc into into, a *Component or a
// *Capability: each field of desc under its JSON name, but the live ones
// and the capabilities a component lists (recorded on their own).
func record(desc, into any) error {
	b, err := json.Marshal(desc)
	if err != nil {
		return fmt.Errorf("contract: encoding a descriptor: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Errorf("contract: decoding a descriptor: %w", err)
	}
	for _, k := range live {
		delete(fields, k)
	}
	delete(fields, "observations")
	delete(fields, "actions")
	if id, ok := fields["procedureId"]; ok {
		fields["capabilityId"] = id
		delete(fields, "procedureId")
	}
	if b, err = json.Marshal(fields); err == nil {
		if c, ok := into.(*Capability); ok {
			err = c.decode(b, false) // what the contract does not hold (a bound field's source) is left out
		} else {
			err = json.Unmarshal(b, into)
		}
	}
	if err != nil {
		return fmt.Errorf("contract: recording a descriptor: %w", err)
	}
	return nil
}
