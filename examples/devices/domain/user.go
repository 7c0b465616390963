package domain

import "slices"

// Roles a User may hold.
const (
	// RoleViewer may read devices.
	RoleViewer = "viewer"
	// RoleOperator may read, disable and enable devices.
	RoleOperator = "operator"
	// RoleAdmin may do everything.
	RoleAdmin = "admin"
)

// Permission names an operation of the domain service, in the form
// "devices:<verb>".
type Permission string

// Permissions checked by the store.
const (
	PermRead    Permission = "devices:read"
	PermDisable Permission = "devices:disable"
	PermEnable  Permission = "devices:enable"
)

// User is the acting user of a domain operation, as the host application
// authenticated it.
type User struct {
	// ID identifies the user; it is recorded in the audit log. A user
	// without an id has no permissions.
	ID string
	// Roles are RoleViewer, RoleOperator or RoleAdmin; unknown roles
	// grant nothing.
	Roles []string
}

// Can reports whether u holds a role that grants p.
func (u User) Can(p Permission) bool {
	if u.ID == "" {
		return false
	}
	return slices.ContainsFunc(u.Roles, func(role string) bool { return grants(role, p) })
}

// grants reports whether role grants p.
func grants(role string, p Permission) bool {
	known := p == PermRead || p == PermDisable || p == PermEnable
	switch role {
	case RoleAdmin:
		return known
	case RoleOperator:
		return known
	case RoleViewer:
		return p == PermRead
	}
	return false
}

// UserFromHost returns the acting user of a host context, following the
// convention of the example: host["user"] holds a User or a *User. It
// reports false when there is none, or when it has no id.
func UserFromHost(host map[string]any) (User, bool) {
	var u User
	switch v := host["user"].(type) {
	case User:
		u = v
	case *User:
		if v == nil {
			return User{}, false
		}
		u = *v
	default:
		return User{}, false
	}
	if u.ID == "" {
		return User{}, false
	}
	u.Roles = slices.Clone(u.Roles)
	return u, true
}

// HostCan reports whether the user of a host context holds permission. Its
// signature fits [surface.HasPermission], so UI components can hide what
// the domain would refuse:
//
//	surface.HasPermission(string(domain.PermDisable), domain.HostCan)
//
// Such a client-side policy only shapes what the agent sees; the store
// checks again on every call.
func HostCan(host map[string]any, permission string) bool {
	u, ok := UserFromHost(host)
	return ok && u.Can(Permission(permission))
}
