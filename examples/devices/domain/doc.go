// Package domain is the devices domain service of the example app: a
// SQLite-backed store of devices and an audit log, and the procedures
// that make its operations available to AI agents through package
// surface.
//
// # The store
//
// [Open] opens (or creates) the database, migrates its schema and returns
// a [Store]; [Store.Seed] fills an empty database with a dozen devices.
// Every operation takes the acting [User] explicitly and checks the
// user's permission itself:
//
//	viewer    List, Get, History
//	operator  List, Get, History, Disable, Enable
//	admin     everything
//
// Disable and Enable are all-or-nothing: one transaction checks every id,
// changes the statuses and writes one audit_log row per changed device
// (who, what, when, why). Failures are values usable with errors.Is:
// [ErrForbidden], [ErrNotFound] (a [*NotFoundError] naming the unknown
// ids) and [ErrInvalid] (an [*InvalidError] naming the argument).
//
// # The agent side
//
// [Procedures] returns the in-process [surface.FuncExecutor] exposing
// "devices.list", "devices.disable" and "devices.enable". Each call reads the acting user
// from the host context ([UserFromHost]: host["user"] holds a User) and
// calls the store, which re-checks the user's authority on every call:
// neither the client-side policies nor the confirmation evidence are
// trusted. Domain errors become agent errors with fixed, safe texts:
//
//	no user in the host context  NOT_AUTHENTICATED
//	ErrForbidden                 NOT_AUTHORIZED, details.origin "server"
//	ErrNotFound, ErrInvalid      INVALID_INPUT with details.issues
//	anything else                a plain error: EXECUTION_FAILED transport
//
// [DisableRef], [EnableRef] and [ListRef] build the procedure references the example's
// UI components list, for instance a table whose live selection is bound
// to the ids of "domain:devices.disable":
//
//	reg.SetProcedureExecutor(domain.Procedures(store))
//	reg.Register(surface.Component{
//		Type:        "devices.table",
//		Description: "Devices table",
//		Procedures:  []surface.Capability{domain.DisableRef(sel.Bind, sel.Describe), domain.ListRef()},
//	})
//
// where sel.Bind returns map[string]any{"ids": the selected ids}.
package domain
